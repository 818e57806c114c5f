// LFM3-Audio end to end: the model (backbone, depth decoder, codec, tokenizer; shared) and a Session
// (one conversation: its history, backbone caches, depth-decoder stream and samplers).
//
// A session holds the conversation as a list of positions, each a text token or an audio-out frame
// (12 codes); the backbone cache covers a prefix of it, and each step feeds whatever is not cached yet
// (a whole prompt in batched passes, or the one item generated last), so a prompt, a generated item and
// a later turn go through the same path. A frame feeds its codebook_embedding row sum
// (Lfm3DepthDecoder::FrameRow), a frame holding the EOS code the all-EOS row (EosRow), as the generation
// loop does (generation.h; spec §5.5, §7.3). The slot rules are Lfm3Turn's: the mode comes from the
// history's last token (`<|audio_start|>`, `<|mixed_start|>`, else text).
//
// Speech input is not here: LFM3-Audio's audio encoder is not specified far enough to build (spec
// LFM3_AUDIO.md §3.2 and §9.8: the downsampler's activations and conv types, the 4096 → 768 linear, the
// projector `mlp.*`), so the family answers AddAudio with Unimplemented.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/aligned.h"
#include "base/status.h"
#include "blocks/sampling.h"
#include "io/safetensors.h"
#include "lfmvox/types.h"
#include "models/lfm3_audio/backbone.h"
#include "models/lfm3_audio/codec.h"
#include "models/lfm3_audio/depth_decoder.h"
#include "models/lfm3_audio/generation.h"
#include "models/lfm3_audio/lfm3_config.h"
#include "models/lfm3_audio/lfm3_stack.h"
#include "text/tokenizer.h"

namespace lfmvox {

class ThreadTeam;
class Lfm3Session;

class Lfm3AudioModel {
 public:
  // `dir`: config.json with the `lfm` backbone section next to `depth_decoder` and `codec`
  // (lfm3_config.h), model.safetensors (`lfm.*`, `depth_decoder.*`, `codebook_embedding.weight`,
  // `codec.*`) and tokenizer.json holding `<|im_start|>`, `<|im_end|>` and `<|audio_start|>`
  // (`<|mixed_start|>` and `<|text_end|>` when it has them). A speech-output-only folder (no `lfm`
  // section) is an error that says so.
  // check_weights: scan every tensor for NaN/inf first (CheckWeightsFinite).
  static Result<std::unique_ptr<Lfm3AudioModel>> Load(const std::string& dir, bool check_weights = true);

  const Lfm3Config& config() const { return config_; }
  const Lfm3Backbone& backbone() const { return backbone_; }
  const Lfm3DepthDecoder& depth() const { return depth_; }
  const Lfm3Codec& codec() const { return *codec_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  // The turn's special ids (from the tokenizer; eos from config.json's eos_token_id).
  const Lfm3TurnTokens& tokens() const { return tokens_; }
  int32_t bos() const { return config_.backbone.bos_token_id; }
  // The audio sampling the files give (config.json's `generation`, else LFM3-Audio's published one).
  const Lfm3AudioSampling& sampling() const { return sampling_; }

 private:
  Lfm3AudioModel() = default;
  std::optional<Checkpoint> ckpt_;  // the backbone's and the depth decoder's weights (the codec maps its own)
  Lfm3Config config_;
  Lfm3Backbone backbone_;
  Lfm3DepthDecoder depth_;
  std::unique_ptr<Lfm3Codec> codec_;
  std::optional<Tokenizer> tokenizer_;
  Lfm3TurnTokens tokens_;
  Lfm3AudioSampling sampling_;
};

struct Lfm3GenerationOptions {
  // Interleaved: the turn is the interleaved one; `<|mixed_start|>` is appended unless the history ends
  // with it. Otherwise the history's last token picks the mode.
  bool interleaved = false;
  int max_new = 512;                               // text tokens and audio frames together
  SamplingParams text = SamplingParams::Greedy();  // LFM3's published text decoding is greedy
  float audio_temperature = 1.0f;                  // the draw of each code (the penalty is the files')
  int audio_top_k = 128;
};

// Receives generated items as they are produced; a non-OK status stops the generation with it.
class Lfm3Sink {
 public:
  virtual ~Lfm3Sink() = default;
  virtual Status OnText(int32_t id) = 0;
  // codes [C]; end_of_audio: the frame holds the EOS code (speech ends; it is not decoded).
  virtual Status OnAudioFrame(std::span<const int32_t> codes, bool end_of_audio) = 0;
};

struct Lfm3GenerationResult {
  int text_tokens = 0;
  int audio_frames = 0;       // end-of-audio frames included
  bool ended = false;         // a token ended the turn (<|im_end|>, the EOS id, <|text_end|> outside mixed)
  bool context_full = false;  // stopped because the context has no room left
  bool cancelled = false;     // stopped by Cancel()
};

// Step scratch shared by every session it runs (the engine's worker): backbone, text-head and depth
// activations for max_batch sessions, sized once. One thread at a time.
struct Lfm3WorkerOptions {
  size_t max_batch = 1;       // sessions one step takes
  size_t max_rows = 128;      // backbone rows one pass takes over all its sessions
  size_t max_context = 4096;  // the longest context of a session it runs
  int threads = 1;            // the largest team it runs with
};

class Lfm3Worker {
 public:
  static Result<std::unique_ptr<Lfm3Worker>> Create(const Lfm3AudioModel& model,
                                                    const Lfm3WorkerOptions& options);
  const Lfm3WorkerOptions& options() const { return options_; }

 private:
  friend Status StepLfm3Sessions(std::span<Lfm3Session* const>, Lfm3Worker&, ThreadTeam&);
  friend class Lfm3Session;
  Lfm3Worker(const Lfm3AudioModel& model, const Lfm3WorkerOptions& options, Lfm3Scratch backbone,
             Lfm3DepthScratch depth);

  const Lfm3AudioModel& model_;
  Lfm3WorkerOptions options_;
  Lfm3Scratch backbone_;
  Lfm3DepthScratch depth_;
  AlignedBuffer<float> x_;       // [max_rows, H] input rows of one pass
  AlignedBuffer<float> h_;       // [max_batch, H] final-normed state of each session's last row
  AlignedBuffer<float> ht_;      // [max_batch, H] those of the text slots, gathered for the head
  AlignedBuffer<float> logits_;  // [max_batch, V]
  // Per-step bookkeeping, reserved for max_batch sessions.
  std::vector<Lfm3Session*> feeding_, text_, audio_;
  std::vector<Lfm3State*> states_;
  std::vector<size_t> rows_, slot_;
  std::vector<const float*> audio_h_;
  std::vector<Lfm3DepthState*> audio_states_;
};

struct Lfm3SessionOptions {
  size_t context = 4096;       // positions the backbone cache holds (≤ max_position_embeddings)
  size_t prefill_chunk = 128;  // positions one backbone pass takes from this session (≤ the worker's rows)
  uint64_t seed = 0;           // the depth decoder's SplitMix64 stream (and the text draw's, when sampled)
};

class Lfm3Session {
 public:
  static Result<std::unique_ptr<Lfm3Session>> Create(const Lfm3AudioModel& model,
                                                     const Lfm3SessionOptions& options);

  // History pieces (text is tokenized piece by piece, so token boundaries never cross pieces).
  Status AppendTokens(std::span<const int32_t> ids);
  Status AppendText(std::string_view utf8);
  Status AppendAudioOut(std::span<const int32_t> frames);  // frame-major [frames, C], codes in [0, V)
  Status StartConversation();                              // bos_token_id
  Status StartTurn(std::string_view role);                 // "<|im_start|>{role}\n"
  Status EndTurn();                                        // "<|im_end|>\n" (no second <|im_end|>)
  // The TTS prompt (spec §4): system turn `task` (e.g. "Perform TTS in American English using a female
  // voice."), user turn `text`, the assistant's turn opened and `<|audio_start|>`; starts the
  // conversation first if it is empty.
  Status AppendTtsPrompt(std::string_view task, std::string_view text);

  // Generation as a resumable state machine: BeginGeneration arms it, each StepLfm3Sessions call
  // advances every armed session by one slot (a text token or an audio frame, given to its sink and
  // appended to the history), and it disarms itself when the turn ends, max_new is reached, the
  // context is full, the sink fails or Cancel() was called.
  Status BeginGeneration(const Lfm3GenerationOptions& options, Lfm3Sink& sink);
  bool generating() const { return gen_.active; }
  const Lfm3GenerationResult& generation() const { return gen_.result; }
  // Where this session's time went since the last call (the batched passes charged whole to each).
  StageTimings TakeTimings() { return std::exchange(timings_, StageTimings{}); }
  const Status& generation_status() const { return gen_.status; }

  // Runs the backbone now over every uncached position but the last, which the next generation step
  // feeds (it samples from that position's state), with `worker`'s scratch: the work of the next
  // step's prefill done ahead, e.g. while a live conversation waits for the user. The items generated
  // after are the same bits (a prefill in chunks equals one pass). Not while generating; Cancel()
  // stops it between passes (kCancelled; what ran stays cached).
  Status PrefillAhead(Lfm3Worker& worker, ThreadTeam& team);

  // Thread-safe: the running generation (or PrefillAhead) stops at its next check (result.cancelled).
  void Cancel() { cancel_.store(true, std::memory_order_relaxed); }
  // Stops the generation with `status` (a consumer of its items failed after the step).
  void Abort(Status status) { Finish(std::move(status)); }
  // Keeps the first `positions` positions; the caches are rebuilt on the next step when they held more.
  Status Truncate(size_t positions);
  void Reset();  // an empty conversation, the streams reseeded

  size_t positions() const { return history_.size(); }
  size_t cached_positions() const { return cached_; }
  size_t context() const { return context_; }
  bool is_frame(size_t i) const { return history_[i].frame; }
  int32_t token(size_t i) const { return history_[i].index; }
  std::span<const int32_t> frame_codes(size_t i) const;  // [C] of a frame position
  bool end_of_audio_frame(size_t i) const;               // a frame position holding the EOS code
  const Lfm3AudioModel& model() const { return model_; }

 private:
  friend Status StepLfm3Sessions(std::span<Lfm3Session* const>, Lfm3Worker&, ThreadTeam&);
  struct Position {
    bool frame;     // an audio-out frame, else a text token
    int32_t index;  // the token id, or the frame's index in frames_
  };
  struct Generation {
    bool active = false;
    int max_new = 0;
    int steps = 0;
    Lfm3Sink* sink = nullptr;
    Lfm3GenerationResult result;
    Status status;
  };
  Lfm3Session(const Lfm3AudioModel& model, Lfm3State state, Lfm3DepthState depth, Sampler text,
              const Lfm3SessionOptions& options);
  Status CheckRoom(size_t more) const;
  // Whether `w` was made for this session's model, context and prefill chunk.
  Status FitsWorker(const Lfm3Worker& w) const;
  Status Embed(const Position& p, float* out) const;
  void AppendFrame(std::span<const int32_t> codes);
  bool TakeCancel() { return cancel_.exchange(false, std::memory_order_relaxed); }
  void Finish(Status status);
  bool StopIfCancelled();
  void OnText(int32_t id);  // a text slot's token
  void OnFrame();           // an audio slot's frame (in depth_)

  const Lfm3AudioModel& model_;
  Lfm3State state_;
  Lfm3DepthState depth_;
  Sampler text_sampler_;
  Rng text_rng_;
  Lfm3Turn turn_;
  uint64_t seed_ = 0;
  size_t context_ = 0;
  size_t prefill_chunk_ = 0;
  std::vector<Position> history_;
  StageTimings timings_;
  std::vector<int32_t> frames_;  // [frames, C]
  size_t cached_ = 0;            // history positions in the backbone cache
  Generation gen_;
  std::atomic<bool> cancel_{false};
};

// Advances every generating session by one slot in one batched step: their uncached positions run
// through the backbone together (prefill and decode rows mixed, in passes of up to the worker's
// max_rows), the text slots' logits in one head pass, the audio slots' frames in one depth-decoder
// call. Each session's items are bit-identical to running it alone (the MatMul contract; the
// backbone's per-sequence states). Fails (changing nothing) only when the batch itself is invalid:
// more sessions than the worker takes, a session twice, or one of another model.
Status StepLfm3Sessions(std::span<Lfm3Session* const> sessions, Lfm3Worker& worker, ThreadTeam& team);

}  // namespace lfmvox
