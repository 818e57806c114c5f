// lfmvox public API.
//
// Models hold weights: loaded once, immutable, shared by every stream and
// thread. Streams (conversations, detokenizer streams) hold all per-stream
// state, sized once at creation; their hot calls allocate nothing. Errors come
// back as Status / Result with a message that says what to fix; the library
// never prints, exits, aborts or throws on bad input.
//
// Thread safety, per type:
//   DetokenizerModel, AudioModel: immutable after Load; any number of threads
//     may use one model (and create streams from it) at the same time.
//   DetokenizerStream, Conversation: one thread at a time (calls on one object
//     must not overlap; moving it between threads between calls is fine).
//     Different streams of one model run concurrently without locking.
//   The option and summary structs are plain values.
//
// A C API over the same objects is in lfmvox/lfmvox_c.h.
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
#include "lfmvox/version.h"
#include "lfmvox/visibility.h"

LFMVOX_API_BEGIN
namespace lfmvox {

// The version of the library linked ("MAJOR.MINOR.PATCH"; static storage). LFMVOX_VERSION_STRING
// (lfmvox/version.h) is that of the headers compiled against.
const char* Version();

// The LFM2.5-Audio detokenizer: audio codes (8 per 80 ms frame) → 24 kHz PCM.
// Immutable once loaded; shared by any number of threads and streams.
// ---------------------------------------------------------------------------
// The engine: one thread pool and the scratch of one step, created once and
// shared by every conversation and stream that uses it. Conversations of one
// engine are advanced together: Engine::Step runs one batched step for all of
// them (their backbone rows, text heads and audio frames in shared passes);
// the output of each is bit-identical to running it alone.
// Thread safety: an Engine may be used from any number of threads; its steps
// run one at a time (a Conversation::Generate in one thread and another in a
// second thread interleave step by step).

struct EngineOptions {
  int threads = 1;               // the pool, the calling thread included
  size_t max_batch = 8;          // conversations one Step takes at once
  size_t prefill_rows = 128;     // backbone rows one pass takes over all conversations
  double max_clip_seconds = 60;  // the longest audio clip AddAudio takes (sizes the encoder's scratch)
};

class Conversation;
struct ModelOptions;

class Engine {
 public:
  static Result<std::shared_ptr<Engine>> Create(const EngineOptions& options = {});
  ~Engine();
  const EngineOptions& options() const;

  // Advances every given conversation that is generating (BeginGenerate) by
  // one item — a text token or an audio frame, delivered to its callbacks —
  // in one batched step per model, and returns how many are still
  // generating. Conversations not generating are skipped. Each must have been
  // created on this engine.
  Result<size_t> Step(std::span<Conversation* const> conversations);

  struct Impl;  // library-internal

 private:
  friend class Conversation;
  friend class DetokenizerStream;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class DetokenizerModel {
 public:
  // The speech decoder (codes → PCM) of the model in `model_dir`: LFM2.5-Audio's
  // detokenizer (the model directory as downloaded, holding audio_detokenizer/,
  // that folder itself, or Liquid's GGUF release), or an LFM3-Audio codec.
  // Of `options`, check_weights applies (the decoder alone has no load-time
  // conversion: `weights` must be empty).
  static Result<std::shared_ptr<const DetokenizerModel>> Load(const std::string& model_dir,
                                                              const ModelOptions& options);
  static Result<std::shared_ptr<const DetokenizerModel>> Load(const std::string& model_dir);
  ~DetokenizerModel();

  int sample_rate() const;
  int num_codebooks() const;      // codes per frame
  int codebook_size() const;      // valid codes are [0, codebook_size)
  int samples_per_frame() const;  // PCM samples per code frame (1920 = 80 ms)
  int tail_samples() const;       // samples Flush emits at the end of a stream

  struct Impl;  // library-internal

 private:
  friend class DetokenizerStream;
  explicit DetokenizerModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct StreamOptions {
  int threads = 1;                 // without an engine: the stream's own pool (the caller is one of them)
  size_t max_frames_per_call = 1;  // frames one Step decodes in a single pass
  std::shared_ptr<Engine> engine = nullptr;  // the engine whose pool runs the stream; null: a private one
};

// One audio stream (a turn of speech). Push frames as they are produced; the
// PCM that became final is written straight into the caller's span. A stream
// of N frames yields N·samples_per_frame() samples in all: the first Push
// tail_samples() fewer than its frames' share, Flush those tail_samples().
// One thread at a time; it keeps its model alive.
class DetokenizerStream {
 public:
  static Result<std::unique_ptr<DetokenizerStream>> Create(std::shared_ptr<const DetokenizerModel> model,
                                                           const StreamOptions& options = {});
  ~DetokenizerStream();

  // codes: frame-major [frames, num_codebooks]. pcm must hold
  // frames·samples_per_frame() floats. Returns the samples written (the first
  // frame of a stream yields tail_samples() fewer).
  Result<size_t> Step(std::span<const int32_t> codes, std::span<float> pcm);
  Result<size_t> Push(std::span<const int32_t> codes, std::span<float> pcm) { return Step(codes, pcm); }
  // Writes the last tail_samples() samples and ends the stream.
  Result<size_t> Flush(std::span<float> pcm);
  // Starts a new stream, as if freshly created.
  void Reset();

  const DetokenizerModel& model() const;

  struct Impl;  // library-internal

 private:
  explicit DetokenizerStream(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// ---------------------------------------------------------------------------
// Speech and text models: text and speech in, text and speech out.

class AudioModel;

// temperature ≤ 0 or top_k == 1: greedy (the first maximal logit).
struct Sampling {
  float temperature = 0;
  int top_k = 0;  // 0: no top-k cut
};

// A generated word and where it was heard (GenerateOptions::word_timestamps).
struct WordTiming {
  std::string text;  // the word without its leading space; punctuation stays with the word it follows
  double start = 0;  // seconds from the start of the audio clip the words transcribe
  double end = 0;    // ≥ start
};

struct GenerateOptions {
  GenerationMode mode = GenerationMode::kSequential;
  int max_new_tokens = 512;  // text tokens and audio frames together
  Sampling text;             // default: greedy
  Sampling audio;            // default: greedy; see the presets below
  // Word timestamps (ASR; LFM2.5-Audio): GenerateSummary::words gets each generated word and where it lies
  // in the last audio clip added before this generation (AddAudio / AddAudioFile). The times come from the
  // backbone's attention of each generated token onto the clip's positions (summed over its attention
  // layers and heads), aligned by dynamic time warping as Whisper's word timestamps are: approximate, at
  // the encoder's 80 ms a position, and unverified on trained weights (no reference exists here). Costs
  // about heads × clip positions dot products per attention layer and token. A conversation without such
  // a clip, or a family without it (LFM3-Audio), fails Generate.
  bool word_timestamps = false;

  // The model family's official settings for each task (for LFM2.5-Audio,
  // the liquid-audio README's): text is greedy in all of them.
  //   ForTts: sequential, audio temperature 0.8, top-k 64, 1024 items (~80 s).
  //   ForSpeechToSpeech: interleaved, audio temperature 1.0, top-k 4, 512 items.
  //   ForAsr: sequential, greedy, 512 items.
  static GenerateOptions ForTts(const AudioModel& model);
  static GenerateOptions ForSpeechToSpeech(const AudioModel& model);
  static GenerateOptions ForAsr(const AudioModel& model);
};

// Streaming output. Any callback may be empty. A non-OK return stops
// generation; Generate then returns that status.
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
  bool cancelled = false;     // stopped by Cancel()
  // This generation's stages, and the encoder's time for the audio added since the last generation.
  StageTimings timings;
  // With GenerateOptions::word_timestamps: the generated words in order (see WordTiming).
  std::vector<WordTiming> words;
};

// What a conversation does when its context fills.
enum class ContextPolicy {
  // Nothing is dropped: a generation that runs out of room stops with summary.context_full, and a piece
  // that does not fit is an error.
  kStop,
  // Endless conversations: before each turn starts (StartTurn) and before each generation
  // (BeginGenerate), when fewer than context_reserve positions are free, the oldest whole turns after the
  // first one (the system prompt) are dropped until that many are free; the last two turns (the one
  // being built and the one before it, the question being answered) are never dropped. The caches are then
  // rebuilt by prefilling the kept history again on the next step, so the
  // conversation continues exactly as a fresh one given that history would (its sampling RNG goes on).
  // LFM2.5-Audio only (LFM3-Audio: Conversation::Create fails with this policy).
  kDropOldest,
};

struct ConversationOptions {
  int threads = 1;        // without an engine: the threads of its private engine
  size_t context = 4096;  // positions kept (text tokens, audio frames in and out)
  ContextPolicy context_policy = ContextPolicy::kStop;
  // kDropOldest: positions to keep free at each turn start and generation (0: half the context). A
  // generation longer than this may still stop with context_full, so keep it ≥ max_new_tokens plus a
  // user turn.
  size_t context_reserve = 0;
  uint64_t seed = 0;             // sampling seed: the same seed gives the same output
  double max_clip_seconds = 60;  // without an engine: the longest audio clip one AddAudio call takes
  // The engine that runs this conversation (and batches it with the engine's
  // others); null: a private engine of `threads` threads.
  std::shared_ptr<Engine> engine = nullptr;
};

// How much of its context a conversation holds (Conversation::context_stats).
struct ContextStats {
  size_t positions = 0;         // history positions now
  size_t context = 0;           // the most it holds
  size_t state_bytes = 0;       // bytes of its history and caches (bounded by the context)
  uint64_t dropped_turns = 0;   // turns ContextPolicy::kDropOldest dropped so far
  size_t cached_positions = 0;  // of positions, those already through the backbone (a generation, Prefill)
};

// A speech/text model's weights, tokenizer and speech decoder. The family is
// chosen from the files (config.json): LFM2.5-Audio or LFM3-Audio. Immutable once
// loaded; shared by any number of threads and conversations.
struct ModelOptions {
  // Quantize the float matrices at load time: "f16", "bf16", "q8_0" or
  // "q4_0" ("" keeps every tensor as stored). The per-tensor rules are
  // `lfmvox quantize`'s; it costs a pass over the weights at load and their
  // quantized size in memory (on top of the mapped file, whose pages the OS
  // may drop); a GGUF file of that type loads without either.
  std::string weights{};
  // Scan every weight for NaN and ±inf at load (each float, each block
  // scale) and fail naming the first bad tensor and element. It reads the
  // whole file once (bench_lfm25 --load measures it); false skips it, for
  // files known to be good.
  bool check_weights = true;
};

class AudioModel {
 public:
  // `model_dir`: a Hugging Face snapshot as downloaded (for LFM2.5-Audio-1.5B:
  // config.json, model.safetensors or its sharded index, tokenizer.json,
  // audio_detokenizer/). Everything is validated; a missing file or tensor is
  // an error that names it, a config of another family an error naming it.
  // Also Liquid's GGUF release: its folder, or one of its files.
  static Result<std::shared_ptr<const AudioModel>> Load(const std::string& model_dir,
                                                        const ModelOptions& options = {});
  ~AudioModel();

  std::string_view family() const;  // "LFM2.5-Audio", "LFM2-Audio" (Mimi as its codec) or "LFM3-Audio"
  int sample_rate() const;          // of the speech it produces (24000)
  int num_codebooks() const;        // audio codes per frame (8)
  int audio_vocab() const;          // valid audio codes are [0, audio_vocab()), end-of-audio included
  int samples_per_frame() const;    // PCM samples one audio frame decodes to (1920 = 80 ms)
  // What the loaded files allow. A GGUF set may be partial: the backbone and mmproj alone transcribe
  // (llama.cpp's two files), without the mmproj it speaks but does not listen. OK, or an error naming
  // the file to add; a call that needs the missing part fails with the same error.
  Status CanListen() const;  // speech in: AddAudio, ASR, spoken questions
  Status CanSpeak() const;   // speech out: StartSpeech, interleaved answers, PCM
  // The voices StartSpeech takes (LFM2.5-Audio: "US male", "US female",
  // "UK male", "UK female"; LFM3-Audio: "American English female", ...,
  // any "{Language} female|male", or a whole "Perform TTS ..." task prompt;
  // LFM2-Audio: none, StartSpeech takes a description of the voice in words,
  // "" for the model's own, or a whole "Perform TTS ..." prompt);
  // the first of them is not the default, see default_voice().
  const std::vector<std::string>& voices() const;
  // "US female"; LFM3-Audio "American English female"; LFM2-Audio "".
  const std::string& default_voice() const;
  // The system prompt StartChat uses when given none.
  const std::string& default_system_prompt() const;
  // Text of a token id (special tokens included), for display.
  std::string TokenText(int32_t id) const;
  // Whether `id` is a control token (<|im_end|>, <|audio_start|>, ...) that a
  // transcript or a chat display leaves out.
  bool IsSpecialToken(int32_t id) const;

  struct Impl;  // library-internal

 private:
  friend class Conversation;
  friend class Engine;
  friend struct GenerateOptions;
  explicit AudioModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The four LFM2.5-Audio TTS voices; prefer AudioModel::voices().
const std::vector<std::string>& Lfm25Voices();

// One conversation: its history, caches and speech decoder. One thread at a
// time; it keeps its model alive.
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
  // [frames, num_codebooks] codes of earlier speech, each in [0, audio_vocab).
  Status AddAudioOut(std::span<const int32_t> frames);
  // Speech in: an audio file (WAV, FLAC, Ogg Vorbis/Opus, MP3, AIFF through
  // libsndfile; M4A/AAC, WebM/Opus and the rest of what FFmpeg decodes; found
  // from the content; mixed to mono by the mean of its channels, resampled to
  // 16 kHz), or samples in memory
  // (interleaved [frames, channels] floats at `sample_rate`).
  Status AddAudioFile(const std::string& path);
  Status AddAudio(std::span<const float> samples, int sample_rate, int channels = 1);
  Status EndTurn();  // <|im_end|>\n

  // Whole prompts, as the family's official examples build them.
  // TTS: the prompt for `text` in `voice` (one of AudioModel::voices()),
  // ending with the assistant's turn opening; then Generate with
  // GenerateOptions::ForTts. An empty or all-whitespace text is an error.
  Status StartSpeech(std::string_view voice, std::string_view text);
  // ASR: begins the conversation with the official ASR system turn
  // (LFM2.5-Audio: "Perform ASR.") and opens the user's turn. Then add the
  // speech (AddAudioFile / AddAudio), EndTurn(), StartTurn("assistant") and
  // Generate with GenerateOptions::ForAsr.
  Status StartAsr();
  // Chat: begins the conversation with a system turn holding `system`
  // (empty: AudioModel::default_system_prompt()), closed. Then one
  // StartTurn("user") ... EndTurn(), StartTurn("assistant"), Generate
  // (GenerateOptions::ForSpeechToSpeech), EndTurn() per exchange.
  Status StartChat(std::string_view system = {});

  // A prompt as JSON: a list of segments, each an object with one key:
  //   {"text": "..."}            tokenized on its own (AddText)
  //   {"ids": [1, 6, ...]}       token ids (AddTokens)
  //   {"audio_out": [[c0..c7], ...]}  frames of exactly num_codebooks codes
  //                              in [0, audio_vocab) (AddAudioOut)
  //   {"audio": "file.wav"}      speech in (AddAudioFile); a relative path is
  //                              taken relative to `base_dir` (the file's
  //                              folder for AddPromptFile)
  // Anything else is an error naming the segment; segments before it stay added.
  Status AddPromptJson(std::string_view json, const std::string& base_dir = ".");
  Status AddPromptFile(const std::string& path);

  // Generates the assistant's output; each item is appended to the history.
  // Speech is decoded as it is produced when on_pcm is set; the decoder
  // starts fresh at every call.
  Result<GenerateSummary> Generate(const GenerateOptions& options, const OutputCallbacks& out);

  // The same, step by step, for a caller that batches conversations (a
  // server): BeginGenerate arms the generation, each Engine::Step advances it
  // by one item, and FinishGenerate (once generating() is false, or to stop
  // early) flushes the speech decoder and returns the summary. `out` is copied.
  Status BeginGenerate(const GenerateOptions& options, const OutputCallbacks& out);
  bool generating() const;
  Result<GenerateSummary> FinishGenerate();

  // Runs the backbone now over what was added since the last Generate or
  // Prefill (all of it but the last position, which the next Generate feeds),
  // so that the next Generate has that much less to do before its first item.
  // For a live conversation: call it while waiting for the user (after
  // StartChat and StartTurn("user"), after a reply's EndTurn), not on the way
  // to an answer. What Generate produces is the same either way, bit for bit.
  // An error while generating; Cancel() stops it (kCancelled; what ran stays).
  Status Prefill();

  // Thread-safe: asks a running Generate, AddAudio, Prefill or step to stop at
  // its next check (between encoder layers, backbone passes and items). A
  // generation stops with summary.cancelled; AddAudio and Prefill return a
  // kCancelled status.
  void Cancel();

  // Barge-in: keeps only the first `samples` PCM samples' worth of the speech
  // the last Generate produced (whole 80 ms frames, rounded up) and drops
  // everything generated after them, so the model remembers only what the
  // listener heard. More samples than were produced is an error. Then EndTurn
  // closes the turn as usual.
  Status TruncateSpeech(size_t samples);

  void Reset();  // a new, empty conversation

  ContextStats context_stats() const;

  const AudioModel& model() const;

  struct Impl;  // library-internal

 private:
  friend class Engine;
  explicit Conversation(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// ---------------------------------------------------------------------------
// Long-form TTS: text of any length, spoken sentence by sentence.

struct SpeakOptions {
  size_t max_segment_bytes = 300;  // a sentence longer than this is cut at commas, then spaces
  // At each join between segments: the last fade_seconds of the segment before fade out linearly to 0,
  // then gap_seconds of silence, then the next segment's first fade_seconds fade in from 0. The first
  // segment's start and the last one's end are left as generated.
  double fade_seconds = 0.005;
  double gap_seconds = 0.12;
  // Called after each sentence with the sentences spoken so far and their total (for a progress line;
  // the library prints nothing).
  std::function<void(size_t done, size_t total)> on_progress{};
};

struct SpeakSummary {
  size_t segments = 0;             // sentences spoken
  size_t pcm_samples = 0;          // samples delivered to on_pcm (gaps included)
  size_t unfinished_segments = 0;  // those that hit max_new_tokens or the context before their end
  bool cancelled = false;          // Cancel() stopped it (the segments after were not spoken)
  StageTimings timings;            // summed over the segments
};

// The sentences SpeakText speaks (SplitSentences in text/sentence_split.h: '.', '!', '?', ';', line
// breaks and 。！？； end a sentence, abbreviations, initials and numbers do not; pieces longer than
// max_segment_bytes are cut at commas, else spaces). Invalid UTF-8 is an error naming its byte.
Result<std::vector<std::string>> SplitSentences(std::string_view text, size_t max_segment_bytes = 300);

// Speaks `text` in `voice` as one continuous stream: each sentence is its own TTS prompt on a fresh
// conversation (conversation.Reset(), then StartSpeech(voice, sentence), then Generate(options)), so the
// context never fills however long the text, every sentence has the same voice prompt, and with the
// same seed the first sentence's speech is exactly that of speaking it alone (up to its fade-out). Each
// sentence's detokenizer stream is flushed at its end; the joins get the fade and gap of `speak`. on_pcm gets
// the whole stream (on_text and on_audio_frame each segment's items). Text with nothing to speak is an error.
Result<SpeakSummary> SpeakText(Conversation& conversation, std::string_view voice, std::string_view text,
                               const GenerateOptions& options, const OutputCallbacks& out,
                               const SpeakOptions& speak = {});

// Writes a model as Liquid's four-file GGUF release (backbone, mmproj-,
// vocoder-, tokenizer-<name>-<TYPE>.gguf) into out_dir, from a Hugging Face
// snapshot. `type` is "f32", "f16", "bf16", "q8_0" or "q4_0"; per-tensor
// rules follow llama.cpp's converter and llama-quantize (norms and
// convolution taps F32; with q4_0 the tied token embedding is Q6_K; the
// README lists them). `keep_f32`: globs on the GGUF tensor names to keep in
// F32 anyway (e.g. "a.blk.*.conv_pw*"; one that names no tensor is an error).
// The backbone file loads in llama.cpp too, and every `model_dir` of this API
// accepts out_dir (or one of its files).
struct QuantizeResult {
  std::vector<std::string> files;  // the paths written
};
Result<QuantizeResult> QuantizeModel(const std::string& model_dir, const std::string& out_dir,
                                     const std::string& type, const std::vector<std::string>& keep_f32 = {});

}  // namespace lfmvox
LFMVOX_API_END
