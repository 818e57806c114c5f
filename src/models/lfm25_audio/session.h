// LFM2.5-Audio end to end: the model (weights, shared) and a Session (one
// conversation: its history, caches, samplers and scratch).
//
// A session holds the conversation as the official ChatState does: a list
// of positions, each TEXT (a token), AUDIO_IN (an encoder embedding, issue 4)
// or AUDIO_OUT (a frame of codes). The backbone cache covers a prefix of it;
// Prefill runs whatever is not cached yet (a whole prompt in batched
// passes, or the one item generated last), so a prompt, a generated item and
// a later turn all go through the same path, and multi-turn history is exact
// by construction.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "blocks/sampling.h"
#include "io/safetensors.h"
#include "lfmvox/types.h"
#include "models/lfm25_audio/backbone.h"
#include "models/lfm25_audio/config.h"
#include "models/lfm25_audio/conformer.h"
#include "models/lfm25_audio/depthformer.h"
#include "models/lfm25_audio/detokenizer.h"
#include "models/lfm25_audio/log_mel.h"
#include "text/tokenizer.h"

namespace lfmvox {

class ThreadTeam;

// The official modality flags (liquid-audio utils.py).
enum class Modality : uint8_t { kText = 1, kAudioIn = 2, kAudioOut = 3 };

// Special ids, looked up by name in the model's tokenizer.
struct SpecialTokens {
  int32_t start_of_text = -1;  // <|startoftext|>
  int32_t im_start = -1;       // <|im_start|>
  int32_t im_end = -1;         // <|im_end|>
  int32_t audio_start = -1;    // <|audio_start|>: sequential mode switches to audio
  int32_t text_end = -1;       // <|text_end|>: interleaved text is done
  int32_t end_of_audio = -1;   // the audio code that ends speech: the last row of each codebook (2048)
};

struct ModelLoadOptions {
  bool load_detokenizer = true;  // audio_detokenizer/ (needed to produce PCM)
};

class Lfm25AudioModel {
 public:
  // `dir`: a Hugging Face snapshot of LFM2.5-Audio (config.json,
  // model.safetensors or a sharded index, tokenizer.json, audio_detokenizer/).
  static Result<std::unique_ptr<Lfm25AudioModel>> Load(const std::string& dir,
                                                       const ModelLoadOptions& options = {});

  const Lfm25AudioConfig& config() const { return config_; }
  const Lfm2Backbone& backbone() const { return *backbone_; }
  const Depthformer& depthformer() const { return *depth_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const SpecialTokens& special() const { return special_; }
  // Null when loaded without it.
  const Lfm25Detokenizer* detokenizer() const { return detok_.get(); }
  const AudioEncoder& encoder() const { return *encoder_; }
  const LogMelConfig& mel_config() const { return config_.preprocessor; }

 private:
  Lfm25AudioModel() = default;
  std::optional<Checkpoint> ckpt_;
  Lfm25AudioConfig config_;
  std::optional<Lfm2Backbone> backbone_;
  std::optional<Depthformer> depth_;
  std::optional<AudioEncoder> encoder_;
  std::optional<Tokenizer> tokenizer_;
  SpecialTokens special_;
  std::unique_ptr<Lfm25Detokenizer> detok_;
};

struct GenerationOptions {
  GenerationMode mode = GenerationMode::kSequential;
  int max_new_tokens = 512;  // text tokens and audio frames together, as liquid-audio counts
  SamplingParams text = SamplingParams::Greedy();
  SamplingParams audio = SamplingParams::Greedy();
};

// Receives generated items as they are produced. A non-OK status stops
// generation and is returned by Generate.
class GenerationSink {
 public:
  virtual ~GenerationSink() = default;
  virtual Status OnText(int32_t id) = 0;
  // codes [num_codebooks]; end_of_audio: the all-end-of-audio frame that
  // closes a stretch of speech (not audio itself).
  virtual Status OnAudioFrame(std::span<const int32_t> codes, bool end_of_audio) = 0;
};

struct GenerationResult {
  int text_tokens = 0;
  int audio_frames = 0;       // including end-of-audio frames
  bool ended = false;         // the model closed its turn (<|im_end|>)
  bool context_full = false;  // stopped because the context has no room left
};

struct SessionOptions {
  int threads = 1;               // the team size this session is used with
  size_t context = 4096;         // positions the backbone cache holds (≤ the model's maximum)
  size_t prefill_chunk = 128;    // positions one batched backbone pass takes
  uint64_t seed = 0;             // sampling RNG seed: a seeded run is reproducible
  double max_clip_seconds = 60;  // longest audio clip one AppendAudio takes (sizes the encoder's scratch)
};

// The four voices LFM2.5-Audio's TTS system prompt names.
const std::vector<std::string>& Lfm25TtsVoices();

class Lfm25Session {
 public:
  static Result<std::unique_ptr<Lfm25Session>> Create(const Lfm25AudioModel& model,
                                                      const SessionOptions& options);

  // History building, as ChatState: each call is one piece (text pieces are
  // tokenized separately, so token boundaries never cross pieces).
  Status AppendTokens(std::span<const int32_t> ids);
  Status AppendText(std::string_view utf8);
  Status AppendAudioOut(std::span<const int32_t> frames);  // frame-major [frames, num_codebooks]
  // AUDIO_IN positions: the audio encoder's (adapter's) output rows [rows, H].
  Status AppendAudioIn(std::span<const float> embeddings);
  // An audio clip: downmixed, resampled to the front end's rate, log-mel,
  // encoder and adapter, then ceil(F/8) AUDIO_IN positions. `sink` receives
  // the front end's "mel" [n_mels, F] and the encoder's traces.
  Status AppendAudio(const AudioBuffer& audio, ThreadTeam& team, TraceSink* sink = nullptr);
  Status StartConversation();               // <|startoftext|>
  Status StartTurn(std::string_view role);  // "<|im_start|>{role}\n"
  Status EndTurn();                         // "<|im_end|>\n" (no second <|im_end|>)
  // The LFM2.5-Audio README's TTS prompt for `text` in `voice` (one of
  // Lfm25TtsVoices()), ending with the assistant's turn opening; starts the
  // conversation first if it is empty.
  Status AppendTtsPrompt(std::string_view voice, std::string_view text);

  // Generates from the current history (normally ending with
  // "<|im_start|>assistant\n"); every item is appended to the history.
  Result<GenerationResult> Generate(const GenerationOptions& options, GenerationSink& sink, ThreadTeam& team);

  // Runs the backbone over every position not in the cache yet; returns the
  // last position's final-normed hidden state [H].
  Result<const float*> Prefill(ThreadTeam& team, TraceSink* sink = nullptr);

  size_t positions() const { return history_.size(); }
  size_t cached_positions() const { return cached_; }
  size_t context() const { return context_; }
  Modality modality(size_t i) const { return history_[i].modality; }
  int32_t token(size_t i) const { return history_[i].token; }
  // Codes of an AUDIO_OUT position [num_codebooks].
  std::span<const int32_t> audio_codes(size_t i) const;

  // Empties the history and the caches (a new conversation).
  void Reset();

 private:
  struct Position {
    Modality modality;
    int32_t token;  // TEXT: the id; AUDIO_OUT: frame index in audio_out_; AUDIO_IN: row index in audio_in_
  };
  Lfm25Session(const Lfm25AudioModel& model, Lfm2State state, DepthformerState depth, Sampler text,
               Sampler audio, const SessionOptions& options);
  Status CheckRoom(size_t more) const;
  Status Embed(const Position& p, float* out) const;
  Status AppendFrame(std::span<const int32_t> codes);

  const Lfm25AudioModel& model_;
  Lfm2State state_;
  DepthformerState depth_;
  Sampler text_sampler_;
  Sampler audio_sampler_;
  Rng rng_;
  uint64_t seed_ = 0;
  size_t context_ = 0;
  std::vector<Position> history_;
  std::vector<int32_t> audio_out_;       // [frames, num_codebooks]
  std::vector<float> audio_in_;          // [rows, H] encoder embeddings of the audio-in positions
  std::optional<LogMelFrontEnd> mel_;    // the front end (its FFT plan and per-frame scratch)
  std::unique_ptr<EncoderScratch> enc_;  // encoder activations for clips up to max_clip_seconds
  MelFeatures features_;                 // the last clip's mel [n_mels, F]
  std::vector<float> clip_;              // [E, H] the last clip's adapter output
  size_t cached_ = 0;                    // history positions already in the backbone cache
  AlignedBuffer<float> x_;               // [prefill_chunk, H] embeddings of the positions being run
  AlignedBuffer<float> h_;               // [H] final-normed hidden state of the last position
  AlignedBuffer<float> logits_;          // [vocab]
  std::vector<int32_t> frame_;           // [num_codebooks]
};

}  // namespace lfmvox
