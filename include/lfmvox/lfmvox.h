// lfmvox public API.
//
// Models hold weights: loaded once, immutable, shared by every stream and
// thread. Streams (sessions) hold all per-conversation state, sized once at
// creation; their hot calls allocate nothing. Errors come back as Status /
// Result with a message that says what to fix; the library never prints,
// exits or aborts on bad input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "lfmvox/status.h"

namespace lfmvox {

class Lfm25Detokenizer;
class Lfm25DetokenizerSession;
class ThreadTeam;

// The LFM2.5-Audio detokenizer: audio codes (8 per 80 ms frame) → 24 kHz PCM.
class DetokenizerModel {
 public:
  // `model_dir`: the model directory as downloaded (holding
  // audio_detokenizer/) or the audio_detokenizer folder itself.
  static Result<std::shared_ptr<const DetokenizerModel>> Load(const std::string& model_dir);
  ~DetokenizerModel();

  int sample_rate() const;
  int num_codebooks() const;      // codes per frame
  int codebook_size() const;      // valid codes are [0, codebook_size)
  int samples_per_frame() const;  // PCM samples per code frame (1920 = 80 ms)
  int tail_samples() const;       // samples Flush emits at the end of a stream

  const Lfm25Detokenizer& impl() const { return *impl_; }

 private:
  explicit DetokenizerModel(std::unique_ptr<Lfm25Detokenizer> impl);
  std::unique_ptr<Lfm25Detokenizer> impl_;
};

struct StreamOptions {
  int threads = 1;                 // the stream's thread team (the caller is one of them)
  size_t max_frames_per_call = 1;  // frames one Push decodes in a single pass
};

// One audio stream (a turn of speech). Push frames as they are produced; the
// PCM that became final is written straight into the caller's span.
class DetokenizerStream {
 public:
  static Result<std::unique_ptr<DetokenizerStream>> Create(std::shared_ptr<const DetokenizerModel> model,
                                                           const StreamOptions& options = {});
  ~DetokenizerStream();

  // codes: frame-major [frames, num_codebooks]. pcm must hold
  // frames·samples_per_frame() floats. Returns the samples written (the first
  // frame of a stream yields tail_samples() fewer).
  Result<size_t> Push(std::span<const int32_t> codes, std::span<float> pcm);
  // Writes the last tail_samples() samples and ends the stream.
  Result<size_t> Flush(std::span<float> pcm);
  // Starts a new stream, as if freshly created.
  void Reset();

  const DetokenizerModel& model() const { return *model_; }

 private:
  DetokenizerStream() = default;
  std::shared_ptr<const DetokenizerModel> model_;
  std::unique_ptr<ThreadTeam> team_;
  std::unique_ptr<Lfm25DetokenizerSession> session_;
};

}  // namespace lfmvox
