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
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lfmvox/status.h"
#include "lfmvox/types.h"

namespace lfmvox {

class Lfm25AudioModel;
class Lfm25Detokenizer;
class Lfm25DetokenizerSession;
class Lfm25Session;
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

// ---------------------------------------------------------------------------
// LFM2.5-Audio: text and speech in, text and speech out.

class AudioModel {
 public:
  // `model_dir`: a Hugging Face snapshot of LFM2.5-Audio-1.5B (config.json,
  // model.safetensors or its sharded index, tokenizer.json,
  // audio_detokenizer/). Everything is validated; a missing file or tensor is
  // an error that names it.
  static Result<std::shared_ptr<const AudioModel>> Load(const std::string& model_dir);
  ~AudioModel();

  int sample_rate() const;  // of the speech it produces (24000)
  // Text of a token id (special tokens included), for display.
  std::string TokenText(int32_t id) const;
  // Whether `id` is a control token (<|im_end|>, <|audio_start|>, ...) that a
  // transcript or a chat display leaves out.
  bool IsSpecialToken(int32_t id) const;

  const Lfm25AudioModel& impl() const { return *impl_; }

 private:
  explicit AudioModel(std::unique_ptr<Lfm25AudioModel> impl);
  std::unique_ptr<Lfm25AudioModel> impl_;
};

// temperature ≤ 0 or top_k == 1: greedy (the first maximal logit).
struct Sampling {
  float temperature = 0;
  int top_k = 0;  // 0: no top-k cut
};

struct GenerateOptions {
  GenerationMode mode = GenerationMode::kSequential;
  int max_new_tokens = 512;  // text tokens and audio frames together
  Sampling text;             // official default: greedy
  Sampling audio;            // official defaults: TTS 0.8 / 64, speech-to-speech 1.0 / 4
};

// Streaming output. Any callback may be empty. A non-OK return stops generation.
struct OutputCallbacks {
  // A text token and the UTF-8 text it completes (may be empty while a
  // multi-byte character is still incomplete).
  std::function<Status(int32_t id, std::string_view piece)> on_text;
  // An audio frame's codes; end_of_audio marks the frame that closes speech.
  std::function<Status(std::span<const int32_t> codes, bool end_of_audio)> on_audio_frame;
  // 24 kHz speech as it is decoded, in chunks of up to 80 ms.
  std::function<Status(std::span<const float> pcm)> on_pcm;
};

struct GenerateSummary {
  int text_tokens = 0;
  int audio_frames = 0;
  size_t pcm_samples = 0;
  bool ended = false;         // the model closed its turn
  bool context_full = false;  // stopped for lack of context
};

struct ConversationOptions {
  int threads = 1;
  size_t context = 4096;         // positions kept (text tokens, audio frames in and out)
  uint64_t seed = 0;             // sampling seed: the same seed gives the same output
  double max_clip_seconds = 60;  // the longest audio clip one AddAudio call takes
};

// The four LFM2.5-Audio TTS voices ("US male", "US female", "UK male", "UK female").
const std::vector<std::string>& Lfm25Voices();

// One conversation: its history, caches and speech decoder.
class Conversation {
 public:
  static Result<std::unique_ptr<Conversation>> Create(std::shared_ptr<const AudioModel> model,
                                                      const ConversationOptions& options = {});
  ~Conversation();

  // Prompt pieces, as the official ChatState builds them.
  Status Begin();                           // <|startoftext|>
  Status StartTurn(std::string_view role);  // <|im_start|>role\n
  Status AddText(std::string_view utf8);    // tokenized on its own
  Status AddTokens(std::span<const int32_t> ids);
  Status AddAudioOut(std::span<const int32_t> frames);  // [frames, 8] codes of earlier speech
  // Speech in: an audio file (WAV, FLAC, Ogg/Vorbis, MP3; mixed to mono by
  // the mean of its channels, resampled to 16 kHz), or samples in memory
  // (interleaved [frames, channels] floats at `sample_rate`).
  Status AddAudioFile(const std::string& path);
  Status AddAudio(std::span<const float> samples, int sample_rate, int channels = 1);
  Status EndTurn();  // <|im_end|>\n
  // The whole TTS prompt for `text` in `voice` (one of Lfm25Voices()),
  // ending with the assistant's turn opening.
  Status StartSpeech(std::string_view voice, std::string_view text);

  // Generates the assistant's output; each item is appended to the history.
  // Speech is decoded as it is produced when on_pcm is set; the decoder
  // starts fresh at every call.
  Result<GenerateSummary> Generate(const GenerateOptions& options, const OutputCallbacks& out);

  void Reset();  // a new, empty conversation

 private:
  Conversation() = default;
  std::shared_ptr<const AudioModel> model_;
  std::unique_ptr<ThreadTeam> team_;
  std::unique_ptr<Lfm25Session> session_;
  std::unique_ptr<Lfm25DetokenizerSession> detok_;
  std::vector<float> pcm_;
  std::vector<int32_t> clamped_;
};

}  // namespace lfmvox
