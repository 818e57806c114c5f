// The LFM2.5-Audio family behind the public API (src/api/family.h): its model, its sessions,
// its official prompts and sampling settings, the bridge from generated audio frames to the
// streaming speech codec, the detokenizer on its own, and the registry entry that claims its files.
// LFM2-Audio-1.5B, the earlier release, is the same model with Kyutai's Mimi as its codec (no
// audio_detokenizer/; spec LFM2_AUDIO.md): its own TTS prompt, Mimi streams per session.
// Compiled into the API library (lfmvox_family in CMakeLists.txt), not into lfmvox_lfm25.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/engine_core.h"
#include "api/family.h"
#include "api/word_timing.h"
#include "base/clock.h"
#include "blocks/sampling.h"
#include "blocks/weights.h"
#include "codecs/mimi/mimi_decoder.h"
#include "models/lfm25_audio/gguf_release.h"
#include "models/lfm25_audio/session.h"
#include "threading/thread_team.h"

namespace lfmvox {
namespace {

namespace fs = std::filesystem;

// The model's speech codec: LFM2.5's detokenizer (one batched pass for every speaking session), or
// LFM2-Audio-1.5B's Mimi (a stream per session, stepped in turn); neither when the files lack both.
struct SpeechCodec {
  const Lfm25AudioModel* model = nullptr;
  const MimiDecoder* mimi = nullptr;  // only without a detokenizer

  const Lfm25Detokenizer* detok() const { return model->detokenizer(); }
  bool present() const { return detok() != nullptr || mimi != nullptr; }
  // Without a codec loaded, the published detokenizer's (24 kHz, 80 ms frames), so that durations of
  // codes still read right.
  int sample_rate() const {
    return detok() ? detok()->config().sample_rate : mimi ? mimi->config().sample_rate : 24000;
  }
  int samples_per_frame() const {
    return detok() ? detok()->config().samples_per_frame()
           : mimi  ? static_cast<int>(mimi->samples_per_frame())
                   : 1920;
  }
  int codebook_size() const {
    return detok() ? detok()->config().codebook_size : static_cast<int>(mimi->codebook_size());
  }
  int num_codebooks() const {
    return detok() ? detok()->config().num_codebooks : static_cast<int>(mimi->codebooks());
  }
  // OK when speech can be produced: the depthformer and a codec; else what to add.
  Status CanSpeak() const {
    if (!model->has_depthformer()) return NotFound(model->speech_out_missing());
    if (present()) return Status::Ok();
    return NotFound(model->speech_out_missing() + " (or, for LFM2-Audio-1.5B, Kyutai's Mimi checkpoint " +
                    kMimiCheckpointName + " beside the weights)");
  }
};

// LFM2-Audio-1.5B's TTS system prompt (liquid-audio's initial README): "Perform TTS." alone, or with a
// free-text voice on a second line; a whole "Perform TTS ..." prompt is taken as it is. It was never
// trained on LFM2.5's four preset voices, so those are refused rather than sent.
Result<std::string> Lfm2TtsTask(std::string_view voice) {
  if (voice.empty()) return std::string("Perform TTS.");
  if (voice.starts_with("Perform TTS")) return std::string(voice);
  for (const std::string& v : Lfm25TtsVoices()) {
    if (voice == v) {
      return InvalidArgument(
          "LFM2-Audio-1.5B has no preset voice \"" + v +
          "\" (that is LFM2.5-Audio's); describe the voice in words, e.g. \"A male speaker delivers his "
          "lines with a low-pitched voice and an animated tone.\", or give none");
    }
  }
  return "Perform TTS.\nUse the following voice: " + std::string(voice);
}

// The liquid-audio README's prompts.
const std::string kAsrSystemPrompt = "Perform ASR.";
const std::string kChatSystemPrompt = "Respond with interleaved text and audio.";
const std::string kDefaultVoice = "US female";

Sampling ToSampling(const SamplingParams& p) { return {p.temperature, p.top_k}; }

// Turns generated items into the caller's callbacks. Speech frames are not
// decoded here: the frame waits in `pending` until the step is over, when the
// family's Step decodes every session's frame in one batched detokenizer pass
// (Deliver), so sessions share that pass too (a Mimi stream steps each session's frame).
class Bridge final : public GenerationSink {
 public:
  Bridge(const SpeechCodec& codec, const OutputCallbacks& out, Lfm25DetokenizerState* detok, MimiState* mimi,
         std::vector<float>& pcm, std::vector<int32_t>& clamped)
      : codec_(codec),
        text_(codec.model->tokenizer()),
        out_(out),
        detok_(detok),
        mimi_(mimi),
        pcm_(pcm),
        clamped_(clamped) {
    piece_.reserve(256);
  }

  Status OnText(int32_t id) override {
    if (!out_.on_text) return Status::Ok();
    piece_.clear();
    text_.Push(id, &piece_);
    return out_.on_text(id, piece_);
  }

  Status OnAudioFrame(std::span<const int32_t> codes, bool end_of_audio) override {
    if (out_.on_audio_frame) LFM_RETURN_IF_ERROR(out_.on_audio_frame(codes, end_of_audio));
    if (!out_.on_pcm) return Status::Ok();
    if (!codec_.present()) return codec_.CanSpeak();
    // The detokenizer's stream ends with the stretch of speech; Mimi's lasts the turn (the official
    // demo decodes a whole assistant turn in one streaming context).
    if (end_of_audio) return FlushSpeech();
    // A non-final frame may still carry the end-of-audio code on codebooks
    // 1..7; neither codec has a row for it (liquid-audio's decode would
    // raise, Mimi's would crash). Like the ONNX port, decode it as the last
    // real code, so that every frame is 80 ms of speech (the LFM2-Audio demo
    // skips such a frame instead).
    const int32_t last = codec_.codebook_size() - 1;
    for (size_t k = 0; k < codes.size(); ++k) clamped_[k] = std::min(codes[k], last);
    pending_ = true;
    return Status::Ok();
  }

  // The frame of this step to decode, if any (taken: the next call returns false).
  bool TakePending() { return std::exchange(pending_, false); }
  // The samples the batched pass wrote for this session's frame.
  Status Deliver(size_t n) {
    LFM_RETURN_IF_ERROR(CheckFiniteOutput({pcm_.data(), n}, "the decoded speech"));
    samples_ += n;
    return n ? out_.on_pcm({pcm_.data(), n}) : Status::Ok();
  }

  // Ends the current stretch of speech: the detokenizer's tail, then a fresh stream.
  Status FlushSpeech() {
    if (!out_.on_pcm || detok_ == nullptr || detok_->frames() == 0) return Status::Ok();
    const auto t0 = std::chrono::steady_clock::now();
    LFM_ASSIGN_OR_RETURN(const size_t n, Flush(*codec_.detok(), *detok_, pcm_));
    detokenizer_ms_ += MsSince(t0);
    return Deliver(n);
  }

  // The detokenizer's wall time for this generation (the batched pass charged whole to each session).
  void AddDetokenizerMs(double ms) { detokenizer_ms_ += ms; }
  double detokenizer_ms() const { return detokenizer_ms_; }

  size_t samples() const { return samples_; }
  std::span<const int32_t> frame() const { return clamped_; }
  std::span<float> pcm() { return pcm_; }
  Lfm25DetokenizerState* detok() { return detok_; }
  MimiState* mimi() { return mimi_; }

 private:
  const SpeechCodec& codec_;
  Tokenizer::StreamDecoder text_;
  const OutputCallbacks& out_;
  Lfm25DetokenizerState* detok_;
  MimiState* mimi_;
  std::vector<float>& pcm_;
  std::vector<int32_t>& clamped_;
  std::string piece_;
  bool pending_ = false;
  size_t samples_ = 0;
  double detokenizer_ms_ = 0;
};

class Lfm25FamilySession;

// The engine's worker for this model: the step scratch every session shares.
class Lfm25FamilyWorker final : public FamilyWorker {
 public:
  Lfm25FamilyWorker(std::shared_ptr<Lfm25Worker> w, std::optional<Lfm25DetokenizerScratch> d,
                    std::optional<MimiScratch> m, size_t max_batch)
      : worker(std::move(w)), detok(std::move(d)), mimi(std::move(m)) {
    sessions.reserve(max_batch);
    speaking.reserve(max_batch);
    requests.reserve(max_batch);
  }
  std::shared_ptr<Lfm25Worker> worker;           // backbone, head, depthformer and encoder scratch
  std::optional<Lfm25DetokenizerScratch> detok;  // one frame per session, max_batch sessions (none
                                                 // without a detokenizer)
  std::optional<MimiScratch> mimi;               // one frame of one stream (Mimi's codec only)
  std::vector<Lfm25Session*> sessions;           // one step's batch
  std::vector<Lfm25FamilySession*> speaking;     // those with a frame to decode
  std::vector<Lfm25DetokenizerRequest> requests;
};

class Lfm25FamilySession final : public FamilySession {
 public:
  Lfm25FamilySession(const SpeechCodec& codec, EngineCore& core, std::shared_ptr<FamilyWorker> worker)
      : model_(*codec.model), codec_(codec), core_(core), worker_(std::move(worker)) {}

  static Result<std::unique_ptr<FamilySession>> Create(const SpeechCodec& codec,
                                                       const ConversationOptions& options, EngineCore& core,
                                                       std::shared_ptr<FamilyWorker> worker) {
    const Lfm25AudioModel& model = *codec.model;
    auto* w = static_cast<Lfm25FamilyWorker*>(worker.get());
    auto s = std::make_unique<Lfm25FamilySession>(codec, core, worker);
    SessionOptions so;
    so.threads = core.options.threads;
    so.context = options.context;
    so.prefill_chunk = core.options.prefill_rows;
    so.seed = options.seed;
    so.worker = w->worker;
    LFM_ASSIGN_OR_RETURN(s->session_, Lfm25Session::Create(model, so));
    s->policy_ = options.context_policy;
    s->reserve_ =
        std::min(options.context_reserve ? options.context_reserve : options.context / 2, options.context);
    if (const Lfm25Detokenizer* detok = codec.detok()) {
      LFM_ASSIGN_OR_RETURN(Lfm25DetokenizerState state, Lfm25DetokenizerState::Create(*detok, 1));
      s->detok_.emplace(std::move(state));
    } else if (codec.mimi != nullptr) {
      LFM_ASSIGN_OR_RETURN(MimiState state, MimiState::Create(*codec.mimi, 1, MimiWindow::kStreaming));
      s->mimi_.emplace(std::move(state));
    }
    if (codec.present()) {
      s->pcm_.resize(static_cast<size_t>(codec.samples_per_frame()));
      s->clamped_.resize(static_cast<size_t>(codec.num_codebooks()));
    }
    return std::unique_ptr<FamilySession>(std::move(s));
  }

  Status Begin() override { return session_->StartConversation(); }
  Status StartTurn(std::string_view role) override {
    LFM_RETURN_IF_ERROR(MakeRoom());
    return session_->StartTurn(role);
  }
  Status AddText(std::string_view utf8) override { return session_->AppendText(utf8); }
  Status AddTokens(std::span<const int32_t> ids) override { return session_->AppendTokens(ids); }
  Status AddAudioOut(std::span<const int32_t> frames) override { return session_->AppendAudioOut(frames); }
  Status AddAudio(const AudioBuffer& audio) override { return session_->AppendAudio(audio, core_.team); }
  Status EndTurn() override { return session_->EndTurn(); }
  Status StartSpeech(std::string_view voice, std::string_view text) override {
    LFM_RETURN_IF_ERROR(codec_.CanSpeak());
    if (codec_.mimi == nullptr) return session_->AppendTtsPrompt(voice, text);
    LFM_ASSIGN_OR_RETURN(const std::string task, Lfm2TtsTask(voice));
    if (session_->positions() == 0) LFM_RETURN_IF_ERROR(session_->StartConversation());
    LFM_RETURN_IF_ERROR(session_->StartTurn("system"));
    LFM_RETURN_IF_ERROR(session_->AppendText(task));
    LFM_RETURN_IF_ERROR(session_->EndTurn());
    LFM_RETURN_IF_ERROR(session_->StartTurn("user"));
    LFM_RETURN_IF_ERROR(session_->AppendText(text));
    LFM_RETURN_IF_ERROR(session_->EndTurn());
    return session_->StartTurn("assistant");
  }
  // The LFM2.5-Audio README's ASR prompt, up to the user's speech.
  Status StartAsr() override {
    LFM_RETURN_IF_ERROR(session_->StartConversation());
    LFM_RETURN_IF_ERROR(session_->StartTurn("system"));
    LFM_RETURN_IF_ERROR(session_->AppendText(kAsrSystemPrompt));
    LFM_RETURN_IF_ERROR(session_->EndTurn());
    return session_->StartTurn("user");
  }

  Status BeginGenerate(const GenerateOptions& options, const OutputCallbacks& out) override {
    if (session_->generating()) return InvalidArgument("this conversation is already generating");
    GenerationOptions o;
    o.mode = options.mode;
    o.max_new_tokens = options.max_new_tokens;
    o.text = SamplingParams{options.text.temperature, options.text.top_k, 1.0f, 0};
    o.audio = SamplingParams{options.audio.temperature, options.audio.top_k, 1.0f, 0};
    LFM_RETURN_IF_ERROR(MakeRoom());
    out_ = out;
    // Every assistant turn starts a fresh speech stream.
    if (detok_) detok_->Reset();
    if (mimi_) MimiReset(*mimi_);
    bridge_.emplace(codec_, out_, detok_ ? &*detok_ : nullptr, mimi_ ? &*mimi_ : nullptr, pcm_, clamped_);
    turn_start_ = session_->positions();
    session_->StopAttentionProbe();
    clip_n_ = 0;
    Status s = options.word_timestamps ? StartWordTiming() : Status::Ok();
    if (s.ok()) s = session_->BeginGeneration(o, *bridge_);
    if (!s.ok()) {
      session_->StopAttentionProbe();
      bridge_.reset();
    }
    return s;
  }

  bool generating() const override { return session_->generating(); }
  Status Prefill() override { return session_->PrefillAhead(core_.team); }

  Result<GenerateSummary> FinishGenerate() override {
    if (!bridge_) return InvalidArgument("FinishGenerate without BeginGenerate");
    if (session_->generating()) {  // stopped early: no more steps for this turn
      session_->Cancel();
      Lfm25Session* self[1] = {session_.get()};
      auto* w = static_cast<Lfm25FamilyWorker*>(worker_.get());
      LFM_RETURN_IF_ERROR(StepSessions(self, *w->worker, core_.team));
    }
    Status flushed = bridge_->FlushSpeech();
    const size_t samples = bridge_->samples();
    StageTimings timings = session_->TakeTimings();
    timings.detokenizer_ms = bridge_->detokenizer_ms();
    bridge_.reset();
    LFM_RETURN_IF_ERROR(session_->generation_status());
    LFM_RETURN_IF_ERROR(flushed);
    const GenerationResult& r = session_->generation();
    GenerateSummary s;
    s.text_tokens = r.text_tokens;
    s.audio_frames = r.audio_frames;
    s.pcm_samples = samples;
    s.ended = r.ended;
    s.context_full = r.context_full;
    s.cancelled = r.cancelled;
    s.timings = timings;
    if (clip_n_ != 0) {
      Result<std::vector<WordTiming>> words = Words();
      session_->StopAttentionProbe();
      clip_n_ = 0;
      if (!words.ok()) return words.status();
      s.words = std::move(words).value();
    }
    return s;
  }

  void Cancel() override { session_->Cancel(); }

  Status TruncateSpeech(size_t samples) override {
    if (session_->generating())
      return InvalidArgument("TruncateSpeech while generating; FinishGenerate first");
    const size_t spf = static_cast<size_t>(codec_.samples_per_frame());
    const size_t keep = (samples + spf - 1) / spf;  // frames the listener heard (the last one in part)
    size_t frames = 0, cut = session_->positions();
    for (size_t i = std::min(turn_start_, session_->positions()); i < session_->positions(); ++i) {
      if (session_->modality(i) != Modality::kAudioOut) continue;
      const bool eoa = session_->audio_codes(i)[0] == model_.special().end_of_audio;
      if (eoa) continue;  // the end-of-audio frame is not speech
      if (frames == keep && cut == session_->positions()) cut = i;
      ++frames;
    }
    if (keep > frames) {
      return OutOfRange(
          StrFormat("%zu samples (%.0f ms) were asked to be kept, but the last turn's speech is %zu "
                    "frames (%.0f ms)",
                    samples, 1000.0 * static_cast<double>(samples) / codec_.sample_rate(), frames,
                    80.0 * static_cast<double>(frames)));
    }
    return session_->Truncate(cut);
  }

  void Reset() override {
    session_->Reset();
    if (detok_) detok_->Reset();
    if (mimi_) MimiReset(*mimi_);
    turn_start_ = 0;
  }

  ContextStats context_stats() const override {
    return {.positions = session_->positions(),
            .context = session_->context(),
            .state_bytes =
                session_->state_bytes() + turns_.capacity() * sizeof(size_t) + (mimi_ ? mimi_->bytes() : 0),
            .dropped_turns = dropped_,
            .cached_positions = session_->cached_positions()};
  }

  Lfm25Session* session() { return session_.get(); }
  Bridge* bridge() { return bridge_ ? &*bridge_ : nullptr; }

 private:
  const Lfm25AudioModel& model_;
  const SpeechCodec& codec_;
  EngineCore& core_;
  std::shared_ptr<FamilyWorker> worker_;  // the engine's worker, kept alive while the session is
  std::unique_ptr<Lfm25Session> session_;
  std::optional<Lfm25DetokenizerState> detok_;  // the speech decoder's stream (LFM2.5)
  std::optional<MimiState> mimi_;               // or Mimi's (LFM2-Audio)
  std::vector<float> pcm_;                      // [samples_per_frame] one frame's PCM
  std::vector<int32_t> clamped_;  // [num_codebooks] a frame's codes as the detokenizer takes them
  OutputCallbacks out_;           // the running generation's callbacks
  std::optional<Bridge> bridge_;  // items → callbacks and speech, for the running generation
  size_t turn_start_ = 0;         // history position where the last generation began
  // Word timing (GenerateOptions::word_timestamps): the audio clip's history positions
  // [clip_first_, clip_first_ + clip_n_); clip_n_ = 0 when off.
  size_t clip_first_ = 0, clip_n_ = 0;

  // The last run of AUDIO_IN positions before the turn, probed from here on.
  Status StartWordTiming() {
    size_t end = turn_start_;
    while (end > 0 && session_->modality(end - 1) != Modality::kAudioIn) --end;
    size_t first = end;
    while (first > 0 && session_->modality(first - 1) == Modality::kAudioIn) --first;
    if (first == end) {
      return InvalidArgument(
          "word_timestamps needs speech in the conversation (AddAudio or AddAudioFile) before Generate");
    }
    LFM_RETURN_IF_ERROR(session_->StartAttentionProbe(first, end - first));
    clip_first_ = first;
    clip_n_ = end - first;
    return Status::Ok();
  }

  // The generated tokens of the turn, each with the probe row of the position that predicted it.
  Result<std::vector<WordTiming>> Words() const {
    const Lfm2State& st = session_->backbone_state();
    const std::span<const float> rows = st.probe_rows();
    const size_t F = clip_n_, from = clip_first_ + clip_n_;
    std::vector<AlignedToken> tokens;
    std::vector<float> att;
    Tokenizer::StreamDecoder text(model_.tokenizer());
    for (size_t i = std::max(turn_start_, from + 1); i < session_->positions(); ++i) {
      if (session_->modality(i) != Modality::kText) continue;
      const size_t row = i - 1 - from;         // the position before the token predicted it
      if ((row + 1) * F > rows.size()) break;  // not run (a generation that stopped before its step)
      const int32_t id = session_->token(i);
      tokens.push_back({text.Push(id), model_.tokenizer().IsSpecialToken(id)});
      att.insert(att.end(), rows.begin() + static_cast<std::ptrdiff_t>(row * F),
                 rows.begin() + static_cast<std::ptrdiff_t>((row + 1) * F));
    }
    const double fs = session_->seconds_per_audio_in();
    return WordsFromAttention(std::move(att), F, tokens, fs, fs * static_cast<double>(F));
  }

  // ContextPolicy::kDropOldest: while fewer than reserve_ positions are free, drops the oldest whole
  // turns after the first (the system prompt), never the last two (the turn being built and the one
  // before it: the question being answered).
  Status MakeRoom() {
    if (policy_ != ContextPolicy::kDropOldest) return Status::Ok();
    const size_t n = session_->positions(), context = session_->context();
    if (context - n >= reserve_) return Status::Ok();
    turns_.clear();  // where each turn starts: its <|im_start|>
    for (size_t i = 0; i < n; ++i) {
      if (session_->modality(i) == Modality::kText && session_->token(i) == model_.special().im_start) {
        turns_.push_back(i);
      }
    }
    if (turns_.size() < 4) return Status::Ok();  // the first turn and the last two: nothing to drop
    size_t last = 1;                             // turns_[1, last) are dropped
    while (last < turns_.size() - 2 && context - (n - (turns_[last] - turns_[1])) < reserve_) ++last;
    if (last == 1) return Status::Ok();
    LFM_RETURN_IF_ERROR(session_->DropPositions(turns_[1], turns_[last]));
    dropped_ += last - 1;
    turn_start_ = 0;  // TruncateSpeech's turn is gone from the old numbering
    return Status::Ok();
  }

  ContextPolicy policy_ = ContextPolicy::kStop;
  size_t reserve_ = 0;
  uint64_t dropped_ = 0;
  std::vector<size_t> turns_;  // MakeRoom's scratch
};

class Lfm25FamilyModel final : public FamilyModel {
 public:
  Lfm25FamilyModel(std::unique_ptr<Lfm25AudioModel> m, std::unique_ptr<MimiDecoder> mimi)
      : m_(std::move(m)), mimi_(std::move(mimi)), codec_{m_.get(), mimi_.get()} {}

  // LFM2-Audio-1.5B is the one of the two whose codec is Mimi.
  std::string_view family() const override { return mimi_ ? "LFM2-Audio" : "LFM2.5-Audio"; }
  int sample_rate() const override { return codec_.sample_rate(); }
  int num_codebooks() const override { return m_->config().codebooks; }
  int audio_vocab() const override { return m_->backbone().audio_vocab(); }
  int samples_per_frame() const override { return codec_.samples_per_frame(); }
  Status CanListen() const override {
    return m_->has_encoder() ? Status::Ok() : NotFound(m_->speech_in_missing());
  }
  Status CanSpeak() const override { return codec_.CanSpeak(); }
  // LFM2-Audio has no preset voices: a free-text description, or none (Lfm2TtsTask).
  const std::vector<std::string>& voices() const override {
    static const std::vector<std::string> kNone;
    return mimi_ ? kNone : Lfm25TtsVoices();
  }
  const std::string& default_voice() const override {
    static const std::string kModelsOwn;
    return mimi_ ? kModelsOwn : kDefaultVoice;
  }
  const std::string& default_system_prompt() const override { return kChatSystemPrompt; }

  // The liquid-audio README's settings (src/blocks/sampling.h holds the numbers).
  GenerateOptions Preset(Task task) const override {
    GenerateOptions o;
    o.text = ToSampling(SamplingParams::Greedy());
    switch (task) {
      case Task::kTts:
        o.mode = GenerationMode::kSequential;
        o.max_new_tokens = 1024;
        o.audio = ToSampling(SamplingParams::Lfm25TtsAudio());
        break;
      case Task::kSpeechToSpeech:
        o.mode = GenerationMode::kInterleaved;
        o.max_new_tokens = 512;
        o.audio = ToSampling(SamplingParams::Lfm25InterleavedAudio());
        break;
      case Task::kAsr:
        o.mode = GenerationMode::kSequential;
        o.max_new_tokens = 512;
        o.audio = ToSampling(SamplingParams::Greedy());
        break;
    }
    return o;
  }

  std::string TokenText(int32_t id) const override { return m_->tokenizer().Decode({&id, 1}); }
  bool IsSpecialToken(int32_t id) const override { return m_->tokenizer().IsSpecialToken(id); }

  Result<std::shared_ptr<FamilyWorker>> CreateWorker(const EngineOptions& o) const override {
    LFM_ASSIGN_OR_RETURN(
        std::unique_ptr<Lfm25Worker> w,
        Lfm25Worker::Create(*m_, {.max_batch = o.max_batch,
                                  .max_rows = o.prefill_rows,
                                  .max_context = static_cast<size_t>(m_->config().lfm.max_positions),
                                  .threads = o.threads,
                                  .max_clip_seconds = o.max_clip_seconds}));
    std::optional<Lfm25DetokenizerScratch> d;
    if (m_->detokenizer() != nullptr) {
      LFM_ASSIGN_OR_RETURN(Lfm25DetokenizerScratch ds,
                           Lfm25DetokenizerScratch::Create(*m_->detokenizer(), 1, o.max_batch, o.threads));
      d.emplace(std::move(ds));
    }
    std::optional<MimiScratch> ms;
    if (mimi_) {
      LFM_ASSIGN_OR_RETURN(MimiScratch x, MimiScratch::Create(*mimi_, 1, o.threads));
      ms.emplace(std::move(x));
    }
    return std::shared_ptr<FamilyWorker>(std::make_shared<Lfm25FamilyWorker>(
        std::shared_ptr<Lfm25Worker>(std::move(w)), std::move(d), std::move(ms), o.max_batch));
  }

  Result<std::unique_ptr<FamilySession>> CreateSession(const ConversationOptions& options, EngineCore& core,
                                                       std::shared_ptr<FamilyWorker> worker) const override {
    return Lfm25FamilySession::Create(codec_, options, core, std::move(worker));
  }

  Status Step(std::span<FamilySession* const> sessions, FamilyWorker& worker,
              ThreadTeam& team) const override {
    auto& w = static_cast<Lfm25FamilyWorker&>(worker);
    w.sessions.clear();
    for (FamilySession* s : sessions) w.sessions.push_back(static_cast<Lfm25FamilySession*>(s)->session());
    LFM_RETURN_IF_ERROR(StepSessions(w.sessions, *w.worker, team));
    // The frames of this step, decoded together: one detokenizer pass for every speaking session.
    w.speaking.clear();
    w.requests.clear();
    for (FamilySession* fs : sessions) {
      auto* s = static_cast<Lfm25FamilySession*>(fs);
      Bridge* b = s->bridge();
      if (b == nullptr || !b->TakePending()) continue;
      if (b->mimi() != nullptr) {  // Mimi: each stream its frame, in turn, on the shared scratch
        const auto t0 = std::chrono::steady_clock::now();
        Result<size_t> n = MimiStep(*mimi_, *b->mimi(), b->frame(), b->pcm(), *w.mimi, team);
        b->AddDetokenizerMs(MsSince(t0));
        Status st = n.ok() ? b->Deliver(*n) : n.status();
        if (!st.ok()) s->session()->Abort(std::move(st));
        continue;
      }
      w.speaking.push_back(s);
      w.requests.push_back({b->detok(), b->frame(), b->pcm(), 0});
    }
    if (w.requests.empty()) return Status::Ok();
    const auto t0 = std::chrono::steady_clock::now();
    if (Status st = StepStreams(*m_->detokenizer(), w.requests, *w.detok, team); !st.ok()) {
      for (Lfm25FamilySession* s : w.speaking) s->session()->Abort(st);
      return Status::Ok();
    }
    const double detok_ms = MsSince(t0);
    for (Lfm25FamilySession* s : w.speaking) s->bridge()->AddDetokenizerMs(detok_ms);
    for (size_t i = 0; i < w.speaking.size(); ++i) {
      Status st = w.speaking[i]->bridge()->Deliver(w.requests[i].written);
      if (!st.ok()) w.speaking[i]->session()->Abort(std::move(st));
    }
    return Status::Ok();
  }

 private:
  std::unique_ptr<Lfm25AudioModel> m_;
  std::unique_ptr<MimiDecoder> mimi_;  // LFM2-Audio's codec (only without a detokenizer)
  SpeechCodec codec_;                  // points into the two above
};

}  // namespace

const std::vector<std::string>& Lfm25Voices() { return Lfm25TtsVoices(); }

namespace {

Result<std::unique_ptr<FamilyModel>> LoadLfm25Family(const std::string& dir, const ModelOptions& options) {
  ModelLoadOptions o;
  o.check_weights = options.check_weights;
  if (!options.weights.empty()) {
    WeightFormat f;
    if (!ParseGgufWriteType(options.weights, &f)) {
      return InvalidArgument("weights \"" + options.weights +
                             "\" is not one of f16, bf16, q8_0, q4_0 (or empty: as stored)");
    }
    o.weights = f;
  }
  LFM_ASSIGN_OR_RETURN(std::unique_ptr<Lfm25AudioModel> m, Lfm25AudioModel::Load(dir, o));
  // No detokenizer: LFM2-Audio-1.5B's snapshot, whose codec is Kyutai's Mimi file beside the weights
  // (spec LFM2_AUDIO.md §1: the caller picks, the files decide; liquid-audio probes for both).
  std::unique_ptr<MimiDecoder> mimi;
  std::error_code ec;
  const fs::path folder = fs::is_directory(dir, ec) ? fs::path(dir) : fs::path(dir).parent_path();
  if (m->detokenizer() == nullptr && fs::is_regular_file(folder / kMimiCheckpointName, ec)) {
    LFM_ASSIGN_OR_RETURN(mimi,
                         MimiDecoder::Load((folder / kMimiCheckpointName).string(), options.check_weights));
    const int codes = m->backbone().audio_vocab() - 1;  // the end-of-audio row is no code
    if (static_cast<int>(mimi->codebooks()) != m->config().codebooks ||
        (codes > 0 && static_cast<int>(mimi->codebook_size()) != codes)) {
      return InvalidArgument(StrFormat(
          "%s: the Mimi checkpoint decodes %zu codebooks of %zu codes, but the model makes %d of %d",
          (folder / kMimiCheckpointName).string().c_str(), mimi->codebooks(), mimi->codebook_size(),
          m->config().codebooks, codes));
    }
  }
  return std::unique_ptr<FamilyModel>(new Lfm25FamilyModel(std::move(m), std::move(mimi)));
}

class Lfm25CodecStream final : public FamilyCodecStream {
 public:
  explicit Lfm25CodecStream(std::unique_ptr<Lfm25DetokenizerSession> s) : s_(std::move(s)) {}
  Result<size_t> Step(std::span<const int32_t> codes, std::span<float> pcm, ThreadTeam& team) override {
    return s_->Step(codes, pcm, team);
  }
  Result<size_t> Flush(std::span<float> pcm) override { return s_->Flush(pcm); }
  void Reset() override { s_->Reset(); }

 private:
  std::unique_ptr<Lfm25DetokenizerSession> s_;
};

class Lfm25Codec final : public FamilyCodec {
 public:
  explicit Lfm25Codec(std::unique_ptr<Lfm25Detokenizer> d) : d_(std::move(d)) {}
  int sample_rate() const override { return d_->config().sample_rate; }
  int num_codebooks() const override { return d_->config().num_codebooks; }
  int codebook_size() const override { return d_->config().codebook_size; }
  int samples_per_frame() const override { return d_->config().samples_per_frame(); }
  int tail_samples() const override { return static_cast<int>(d_->tail_samples()); }
  Result<std::unique_ptr<FamilyCodecStream>> CreateStream(size_t max_frames_per_call,
                                                          int max_threads) const override {
    LFM_ASSIGN_OR_RETURN(std::unique_ptr<Lfm25DetokenizerSession> s,
                         Lfm25DetokenizerSession::Create(*d_, max_frames_per_call, max_threads));
    return std::unique_ptr<FamilyCodecStream>(new Lfm25CodecStream(std::move(s)));
  }

 private:
  std::unique_ptr<Lfm25Detokenizer> d_;
};

Result<std::unique_ptr<FamilyCodec>> LoadLfm25Codec(const std::string& dir, const ModelOptions& options) {
  LFM_ASSIGN_OR_RETURN(std::unique_ptr<Lfm25Detokenizer> d,
                       Lfm25Detokenizer::Load(dir, options.check_weights));
  return std::unique_ptr<FamilyCodec>(new Lfm25Codec(std::move(d)));
}

bool ListHas(const nlohmann::json& j, const char* key, const char* value) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return false;
  for (const auto& v : *it) {
    if (v.is_string() && v.get<std::string>() == value) return true;
  }
  return false;
}

// The architectures spellings of this family's config.json: the published snapshots' (LFM2.5-Audio-1.5B,
// LFM2-Audio-1.5B and -JP: the value llama.cpp's converters assert on), liquid-audio's Python class name
// (older conversions), and the detokenizer's own folder.
constexpr const char* kArchitectures[] = {"Lfm2AudioForConditionalGeneration", "LFM2AudioModel",
                                          "Lfm25AudioTokenizer"};

// Liquid's GGUF release (the files say what they are, with or without a config.json beside them);
// a config naming one of kArchitectures, or one without "architectures" that has liquid-audio's
// sections.
bool ClaimsLfm25(const FamilyFiles& f) {
  if (LooksLikeGgufRelease(f.dir)) return true;
  if (f.config == nullptr) return false;
  const nlohmann::json& c = *f.config;
  for (const char* a : kArchitectures)
    if (ListHas(c, "architectures", a)) return true;
  return !c.contains("architectures") && c.contains("lfm") && c.contains("depthformer");
}

}  // namespace

extern const FamilyEntry k_lfm25_family;
const FamilyEntry k_lfm25_family = {
    "LFM2.5-Audio",
    "architectures [\"Lfm2AudioForConditionalGeneration\"] or [\"LFM2AudioModel\"], or Liquid's GGUF files",
    &ClaimsLfm25, &LoadLfm25Family, &LoadLfm25Codec};

}  // namespace lfmvox
