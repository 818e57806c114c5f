// The seam between the public API and a model family: AudioModel::Impl holds
// one FamilyModel, Conversation::Impl one FamilySession, DetokenizerModel one
// FamilyCodec and DetokenizerStream one FamilyCodecStream. LoadFamily and
// LoadFamilyCodec pick the family from the files through the registry
// (Families()): each family folder src/models/<family>/ holds its adapter
// (family_adapter.cc, compiled into this library) defining one FamilyEntry, and
// the root CMakeLists.txt lists the families (LFMVOX_FAMILIES), so a family is
// removed by deleting its folder and its name there.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
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
  // Conversation::Prefill: every uncached position but the last through the backbone now. Under the
  // engine's lock.
  virtual Status Prefill() = 0;
  virtual void Cancel() = 0;  // thread-safe
  virtual Status TruncateSpeech(size_t samples) = 0;
  virtual void Reset() = 0;
  virtual ContextStats context_stats() const = 0;
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
  // OK when the loaded files allow speech input (output); else why not, naming what to add.
  virtual Status CanListen() const = 0;
  virtual Status CanSpeak() const = 0;
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

// One stream of a family's speech decoder (codes → PCM), behind DetokenizerStream; the contract
// of DetokenizerStream (lfmvox.h). One thread at a time.
class FamilyCodecStream {
 public:
  virtual ~FamilyCodecStream() = default;
  virtual Result<size_t> Step(std::span<const int32_t> codes, std::span<float> pcm, ThreadTeam& team) = 0;
  virtual Result<size_t> Flush(std::span<float> pcm) = 0;
  virtual void Reset() = 0;
};

// A family's speech decoder weights (immutable, shared by its streams), behind DetokenizerModel.
class FamilyCodec {
 public:
  virtual ~FamilyCodec() = default;
  virtual int sample_rate() const = 0;
  virtual int num_codebooks() const = 0;
  virtual int codebook_size() const = 0;  // codes a stream accepts: [0, codebook_size)
  virtual int samples_per_frame() const = 0;
  virtual int tail_samples() const = 0;
  virtual Result<std::unique_ptr<FamilyCodecStream>> CreateStream(size_t max_frames_per_call,
                                                                  int max_threads) const = 0;
};

// What a model folder holds, as the registry's probes see it: the folder (or file) as given and its
// parsed config.json (null when there is none, e.g. a GGUF release).
struct FamilyFiles {
  std::string dir;
  const nlohmann::json* config = nullptr;
};

// One model family in the registry.
struct FamilyEntry {
  const char* name;       // as users read it, e.g. "LFM2.5-Audio"
  const char* signature;  // how its config names it, for the error listing what is supported
  bool (*claims)(const FamilyFiles& files);
  Result<std::unique_ptr<FamilyModel>> (*load_model)(const std::string& dir, const ModelOptions& options);
  Result<std::unique_ptr<FamilyCodec>> (*load_codec)(const std::string& dir, const ModelOptions& options);
};

// A speech decoder that belongs to no model family (Kyutai's Mimi: LFM2-Audio-1.5B's codec and the Moshi
// family's), reachable through DetokenizerModel only; LoadFamilyCodec asks these before the families.
struct CodecEntry {
  const char* name;                         // as users read it, e.g. "Mimi"
  bool (*claims)(const std::string& path);  // a folder or file this codec takes
  Result<std::unique_ptr<FamilyCodec>> (*load)(const std::string& path, const ModelOptions& options);
};
// Every such codec compiled in (codec_registry.cc).
std::span<const CodecEntry* const> Codecs();

// Every family compiled in, in the order of LFMVOX_FAMILIES (family_registry.cc).
std::span<const FamilyEntry* const> Families();

// Loads the family whose probe claims `dir` (a folder with config.json, or a GGUF release). A config
// of no known family is an error naming its "architectures" / "model_type".
Result<std::unique_ptr<FamilyModel>> LoadFamily(const std::string& dir, const ModelOptions& options);
// The speech decoder of the codec (Codecs()) or else the family that claims `dir`; with no claim, the first
// family's loader
// (LFM2.5-Audio's detokenizer, whose own errors say what it looked for).
Result<std::unique_ptr<FamilyCodec>> LoadFamilyCodec(const std::string& dir, const ModelOptions& options);

}  // namespace lfmvox
