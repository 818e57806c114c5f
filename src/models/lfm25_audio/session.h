// LFM2.5-Audio end to end: the model (weights, shared) and a Session (one
// conversation: its history, caches, samplers and scratch).
//
// A session holds the conversation as the official ChatState does: a list
// of positions, each TEXT (a token), AUDIO_IN (an encoder embedding)
// or AUDIO_OUT (a frame of codes). The backbone cache covers a prefix of it;
// Prefill runs whatever is not cached yet (a whole prompt in batched
// passes, or the one item generated last), so a prompt, a generated item and
// a later turn all go through the same path, and multi-turn history is exact
// by construction.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
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
class Lfm25Session;

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
  bool check_weights = true;     // every tensor scanned for NaN/inf (CheckWeightsFinite)
  // Quantize float matrices at load time (QuantizeCheckpoint: kF16, kBF16,
  // kQ8_0 or kQ4_0); unset keeps every tensor as stored.
  std::optional<WeightFormat> weights = std::nullopt;
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
  // The stages a GGUF set may lack (a snapshot has both): check has_encoder() / has_depthformer()
  // before encoder() / depthformer().
  bool has_encoder() const { return encoder_.has_value(); }
  bool has_depthformer() const { return depth_.has_value(); }
  const AudioEncoder& encoder() const { return *encoder_; }
  // Why speech input / output cannot run ("" when it can): the file to add, by name.
  const std::string& speech_in_missing() const { return speech_in_missing_; }
  const std::string& speech_out_missing() const { return speech_out_missing_; }
  const LogMelConfig& mel_config() const { return config_.preprocessor; }
  // The filterbank and window the files store, if any (checked at load against the config's).
  StoredMelTables stored_mel_tables() const { return {stored_fb_, stored_window_}; }

 private:
  Lfm25AudioModel() = default;
  Status LoadStoredMelTables();
  std::optional<Checkpoint> ckpt_;
  Lfm25AudioConfig config_;
  std::optional<Lfm2Backbone> backbone_;
  std::optional<Depthformer> depth_;
  std::optional<AudioEncoder> encoder_;
  std::optional<Tokenizer> tokenizer_;
  SpecialTokens special_;
  std::unique_ptr<Lfm25Detokenizer> detok_;
  std::string speech_in_missing_, speech_out_missing_;
  std::vector<float> stored_fb_, stored_window_;  // [n_mels, bins], [win_length]; empty: computed
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
  bool cancelled = false;     // stopped by Cancel()
};

// Scratch for running sessions: the backbone, text-head, depthformer and encoder activations of
// one step, owned by whoever runs steps (the engine's worker), shared by every session it serves
// and sized once. One thread uses a worker at a time.
struct WorkerOptions {
  size_t max_batch = 1;          // sessions one batched step takes
  size_t max_rows = 128;         // backbone rows one pass takes over all its sessions
  size_t max_context = 4096;     // the longest context of a session it runs
  int threads = 1;               // the largest team it runs with
  double max_clip_seconds = 60;  // longest audio clip one AppendAudio takes (sizes the encoder's scratch)
};

class Lfm25Worker {
 public:
  static Result<std::unique_ptr<Lfm25Worker>> Create(const Lfm25AudioModel& model,
                                                     const WorkerOptions& options);
  ~Lfm25Worker();
  const WorkerOptions& options() const { return options_; }
  size_t bytes() const;  // all of its scratch

 private:
  friend class Lfm25Session;
  friend Status StepSessions(std::span<Lfm25Session* const>, Lfm25Worker&, ThreadTeam&);
  Lfm25Worker(const Lfm25AudioModel& model, const WorkerOptions& options, Lfm2Scratch backbone,
              std::optional<DepthformerScratch> depth);

  const Lfm25AudioModel& model_;
  WorkerOptions options_;
  Lfm2Scratch backbone_;
  std::optional<DepthformerScratch> depth_;  // none when the model has no depthformer
  // Backbone passes in parallel or inline, by measure (threading/stage_policy.h): Prefill's and
  // StepSessions' apart, as their rows per call differ.
  AdaptiveMode prefill_mode_, step_mode_;
  AlignedBuffer<float> x_;       // [max_rows, H] embeddings of the rows being run
  AlignedBuffer<float> h_;       // [max_batch, H] final-normed hidden state of each session's last row
  AlignedBuffer<float> ht_;      // [max_batch, H] those of the text sessions, gathered for the head
  AlignedBuffer<float> logits_;  // [max_batch, vocab]
  // Per-step bookkeeping, reserved for max_batch sessions.
  std::vector<Lfm25Session*> feeding_, text_, audio_;
  std::vector<Lfm2State*> states_;
  std::vector<size_t> rows_, slot_;
  std::vector<DepthRequest> requests_;
  // Audio input.
  std::optional<LogMelFrontEnd> mel_;    // the front end (its FFT plan and per-frame scratch)
  std::unique_ptr<EncoderScratch> enc_;  // encoder activations for clips up to max_clip_seconds (none
                                         // when the model has no encoder)
  MelFeatures features_;                 // the last clip's mel [n_mels, M]
  AlignedBuffer<float> clip_;            // [max T', H] the last clip's adapter output
};

struct SessionOptions {
  int threads = 1;               // the team size of the session's own worker (when it has one)
  size_t context = 4096;         // positions the backbone cache holds (≤ the model's maximum)
  size_t prefill_chunk = 128;    // positions one batched backbone pass takes from this session
  uint64_t seed = 0;             // sampling RNG seed: a seeded run is reproducible
  double max_clip_seconds = 60;  // longest audio clip one AppendAudio takes (for its own worker)
  // The worker whose scratch the session's own calls (Prefill, Generate, AppendAudio) use; null:
  // the session creates one of its own for one session. A shared worker must have been sized for
  // this session (its context and prefill_chunk) and be used by one thread at a time.
  std::shared_ptr<Lfm25Worker> worker = nullptr;
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
  // encoder and adapter, then T' = ceil(M/8) AUDIO_IN positions. `sink` receives
  // the front end's "mel" [n_mels, M] and the encoder's traces. Cancel() stops
  // the encoder between layers (the history is then unchanged).
  Status AppendAudio(const AudioBuffer& audio, ThreadTeam& team, TraceSink* sink = nullptr);
  Status StartConversation();               // <|startoftext|>
  Status StartTurn(std::string_view role);  // "<|im_start|>{role}\n"
  Status EndTurn();                         // "<|im_end|>\n" (no second <|im_end|>)
  // The LFM2.5-Audio README's TTS prompt for `text` in `voice` (one of
  // Lfm25TtsVoices()), ending with the assistant's turn opening; starts the
  // conversation first if it is empty.
  Status AppendTtsPrompt(std::string_view voice, std::string_view text);

  // Generation is a resumable state machine: BeginGeneration arms it, each
  // StepSessions call advances every armed session by one item (a text token
  // or an audio frame, given to its sink), and it disarms itself when the
  // turn ends, max_new_tokens is reached, the context is full, the sink fails
  // or Cancel() was called. Every item is appended to the history.
  Status BeginGeneration(const GenerationOptions& options, GenerationSink& sink);
  bool generating() const { return gen_.active; }
  // The result so far; status() is the first error (a failed sink, an invalid step).
  const GenerationResult& generation() const { return gen_.result; }
  const Status& generation_status() const { return gen_.status; }
  // BeginGeneration + steps on this session alone (its own worker) until done.
  Result<GenerationResult> Generate(const GenerationOptions& options, GenerationSink& sink, ThreadTeam& team);

  // Runs the backbone over every position not in the cache yet; returns the
  // last position's final-normed hidden state [H].
  Result<const float*> Prefill(ThreadTeam& team, TraceSink* sink = nullptr);
  // Runs the backbone now over every uncached position but the last, which the next generation step
  // feeds (it samples from that position's state): the work of the next step's prefill done ahead,
  // e.g. while a live conversation waits for the user. The items generated after are the same bits
  // (a prefill in chunks equals one pass). Not while generating.
  Status PrefillAhead(ThreadTeam& team);

  // Thread-safe: asks a running AppendAudio, Prefill or generation to stop at
  // its next check (between encoder layers, backbone passes and steps). The
  // call in progress returns a kCancelled status (generation: result.cancelled);
  // the flag clears when the next call starts.
  void Cancel() { cancel_.store(true, std::memory_order_relaxed); }
  // Stops the generation with `status` (a consumer of its items failed after the step); the
  // first error is the one generation_status() keeps.
  void Abort(Status status) { Finish(std::move(status)); }
  // The stages' wall time since the last call (encoder, prefill, backbone steps, depth head; the
  // detokenizer is the caller's), and a fresh count from here.
  StageTimings TakeTimings() { return std::exchange(timings_, StageTimings{}); }

  // Keeps the first `positions` positions of the history and drops the rest
  // (barge-in: the model should remember only what the listener heard). The
  // caches are rebuilt from the kept history on the next step.
  Status Truncate(size_t positions);
  // Drops the last `frames` audio-out frames of the history and everything
  // after them, keeping the turn's earlier items.
  Status DropTrailingAudioOut(size_t frames);
  // Drops the positions [begin, end) of the history (the oldest turns of a long conversation), keeping
  // those before and after in order. The caches are rebuilt from the kept history on the next step, so
  // the session then continues exactly as a fresh one prefilled with that history would.
  Status DropPositions(size_t begin, size_t end);
  // Bytes the session holds for its history and caches (its vectors' capacities and the backbone state).
  size_t state_bytes() const;

  size_t positions() const { return history_.size(); }
  size_t cached_positions() const { return cached_; }
  size_t context() const { return context_; }
  Modality modality(size_t i) const { return history_[i].modality; }
  int32_t token(size_t i) const { return history_[i].token; }
  // Codes of an AUDIO_OUT position [num_codebooks].
  std::span<const int32_t> audio_codes(size_t i) const;
  const Lfm25AudioModel& model() const { return model_; }
  // The backbone caches, for parity tests.
  const Lfm2State& backbone_state() const { return state_; }
  // Word timing: the backbone records every later position's attention onto the history positions
  // [first, first + n) (Lfm2State::StartProbe, rows from first + n on), until StopAttentionProbe or Reset.
  Status StartAttentionProbe(size_t first, size_t n) {
    return state_.StartProbe(static_cast<int64_t>(first), n, static_cast<int64_t>(first + n));
  }
  void StopAttentionProbe() { state_.StopProbe(); }
  // Seconds of speech one AUDIO_IN position stands for: the encoder's 8× subsampling of the mel hop.
  double seconds_per_audio_in() const {
    return 8.0 * model_.mel_config().hop_length / model_.mel_config().sample_rate;
  }

  // Empties the history and the caches (a new conversation).
  void Reset();

 private:
  friend Status StepSessions(std::span<Lfm25Session* const>, Lfm25Worker&, ThreadTeam&);
  struct Position {
    Modality modality;
    int32_t token;  // TEXT: the id; AUDIO_OUT: frame index in audio_out_; AUDIO_IN: row index in audio_in_
  };
  struct Generation {
    bool active = false;
    GenerationMode mode = GenerationMode::kSequential;
    int max_new = 0;
    int steps = 0;
    Modality modality = Modality::kText;
    int left = 0;  // items left in the current interleaved slot
    bool text_done = false;
    GenerationSink* sink = nullptr;
    GenerationResult result;
    Status status;
  };
  Lfm25Session(const Lfm25AudioModel& model, Lfm2State state, Sampler text, Sampler audio,
               const SessionOptions& options);
  Status CheckRoom(size_t more) const;
  Status Embed(const Position& p, float* out) const;
  Status AppendFrame(std::span<const int32_t> codes);
  // Feeds positions [cached_, end) through the backbone in passes of the worker's rows; the last row of
  // each pass final-normed into the worker's h_ (every row into `sink`, when given).
  Status Feed(size_t end, ThreadTeam& team, TraceSink* sink);
  bool TakeCancel() { return cancel_.exchange(false, std::memory_order_relaxed); }
  void Finish(Status status);
  // Ends the generation as cancelled if Cancel() was called since the last check.
  bool StopIfCancelled();
  // Applies a sampled text token / audio frame to the generation state.
  void OnText(int32_t id);
  void OnFrame();

  const Lfm25AudioModel& model_;
  std::shared_ptr<Lfm25Worker> worker_;
  Lfm2State state_;
  Sampler text_sampler_;
  Sampler audio_sampler_;
  Rng rng_;
  uint64_t seed_ = 0;
  size_t context_ = 0;
  size_t prefill_chunk_ = 0;
  std::vector<Position> history_;
  std::vector<int32_t> audio_out_;  // [frames, num_codebooks]
  std::vector<float> audio_in_;     // [rows, H] encoder embeddings of the audio-in positions
  size_t cached_ = 0;               // history positions already in the backbone cache
  std::vector<int32_t> frame_;      // [num_codebooks] the frame being sampled
  Generation gen_;
  StageTimings timings_;
  std::atomic<bool> cancel_{false};
};

// Advances every session that is generating by one item, all in one batched
// step: their uncached positions run through the backbone together (prefill
// and decode rows mixed, in passes of up to the worker's max_rows), the text
// sessions' logits in one head pass, the audio sessions' frames in one
// depthformer pass. Each session's output is bit-identical to running it
// alone. Sessions not generating are skipped; a session whose sink fails stops
// with that status (generation_status()), the others go on. Fails (changing
// nothing) only when the batch itself is invalid: more sessions than the
// worker takes, a session twice, or a session of another model.
Status StepSessions(std::span<Lfm25Session* const> sessions, Lfm25Worker& worker, ThreadTeam& team);

}  // namespace lfmvox
