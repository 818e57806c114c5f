// The seam between the public API and a model family: AudioModel::Impl holds
// one FamilyModel, Conversation::Impl one FamilySession. LoadFamily picks the
// family from the files (config.json). One family today: LFM2.5-Audio
// (lfm25_family.cc); LFM3-Audio will be a second implementation.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "io/audio_file.h"
#include "lfmvox/lfmvox.h"

namespace lfmvox {

// Whole-task prompt presets and sampling settings a family defines.
enum class Task { kTts, kSpeechToSpeech, kAsr };

class ThreadTeam;
struct EngineCore;

// A family's step scratch (its worker), one per engine and model, shared by
// every session of that model on the engine. Used under the engine's lock.
class FamilyWorker {
 public:
  virtual ~FamilyWorker() = default;
};

// One conversation of a family: history, caches, speech decoder. One thread at a time.
class FamilySession {
 public:
  virtual ~FamilySession() = default;
  virtual Status Begin() = 0;
  virtual Status StartTurn(std::string_view role) = 0;
  virtual Status AddText(std::string_view utf8) = 0;
  virtual Status AddTokens(std::span<const int32_t> ids) = 0;
  virtual Status AddAudioOut(std::span<const int32_t> frames) = 0;
  virtual Status AddAudio(const AudioBuffer& audio) = 0;
  virtual Status EndTurn() = 0;
  virtual Status StartSpeech(std::string_view voice, std::string_view text) = 0;
  virtual Status StartAsr() = 0;
  // Generation, step-wise: Begin arms it, the family's Step advances it, Finish
  // flushes speech and reports. Begin and Finish are called under the engine's lock.
  virtual Status BeginGenerate(const GenerateOptions& options, const OutputCallbacks& out) = 0;
  virtual bool generating() const = 0;
  virtual Result<GenerateSummary> FinishGenerate() = 0;
  virtual void Cancel() = 0;  // thread-safe
  virtual Status TruncateSpeech(size_t samples) = 0;
  virtual void Reset() = 0;
};

// A family's weights (immutable, shared by threads).
class FamilyModel {
 public:
  virtual ~FamilyModel() = default;
  virtual std::string_view family() const = 0;
  virtual int sample_rate() const = 0;
  virtual int num_codebooks() const = 0;
  virtual int audio_vocab() const = 0;
  virtual int samples_per_frame() const = 0;
  virtual const std::vector<std::string>& voices() const = 0;
  virtual const std::string& default_voice() const = 0;
  virtual const std::string& default_system_prompt() const = 0;
  virtual GenerateOptions Preset(Task task) const = 0;
  virtual std::string TokenText(int32_t id) const = 0;
  virtual bool IsSpecialToken(int32_t id) const = 0;
  // The scratch to run this model's sessions on an engine.
  virtual Result<std::shared_ptr<FamilyWorker>> CreateWorker(const EngineOptions& options) const = 0;
  // A session whose steps run on `core` with `worker` (from CreateWorker on that engine).
  virtual Result<std::unique_ptr<FamilySession>> CreateSession(
      const ConversationOptions& options, EngineCore& core, std::shared_ptr<FamilyWorker> worker) const = 0;
  // One batched step of sessions of this model (all created on `worker`), under the engine's lock.
  virtual Status Step(std::span<FamilySession* const> sessions, FamilyWorker& worker,
                      ThreadTeam& team) const = 0;
};

// Reads `dir`/config.json and loads the family it names. A config of no known
// family is an error naming its "architectures" / "model_type".
Result<std::unique_ptr<FamilyModel>> LoadFamily(const std::string& dir, const ModelOptions& options);

// The LFM2.5-Audio family (lfm25_family.cc).
Result<std::unique_ptr<FamilyModel>> LoadLfm25Family(const std::string& dir, const ModelOptions& options);

}  // namespace lfmvox
