// The LFM3-Audio family behind the public API (src/api/family.h): its model and sessions (session.h:
// text turns, TTS, the interleaved turn, batched steps), the bridge from generated frames to the
// streaming LiquidCodec decoder (codec.h; every speaking session's frame of a step in one codec pass),
// the codec alone behind DetokenizerModel, and the registry entry that claims its files. Compiled into
// the API library (lfmvox_family in CMakeLists.txt), not into lfmvox_lfm3.
// No oracle covers the backbone; what is verified is listed in this folder's README.
#include <algorithm>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/engine_core.h"
#include "api/family.h"
#include "base/clock.h"
#include "blocks/weights.h"
#include "models/lfm3_audio/codec.h"
#include "models/lfm3_audio/session.h"
#include "threading/thread_team.h"

namespace lfmvox {
namespace {

// TTS voices: "{Language} female|male" becomes spec §4's task prompt "Perform TTS in {Language} using a
// {female|male} voice." (the language is an English name, anything else is passed as written); a voice
// starting with "Perform " is taken as the whole task prompt.
const std::vector<std::string> kVoices = {"American English female", "American English male"};
const std::string kDefaultVoice = "American English female";
// LFM3's chat system prompt is not public (spec §9.9); this is LFM2.5-Audio's interleaved one.
const std::string kChatSystemPrompt = "Respond with interleaved text and audio.";

Result<std::string> TtsTaskPrompt(std::string_view voice) {
  if (voice.starts_with("Perform ")) return std::string(voice);
  for (std::string_view gender : {"female", "male"}) {
    const size_t n = gender.size();
    if (voice.size() > n + 1 && voice.ends_with(gender) && voice[voice.size() - n - 1] == ' ') {
      const std::string_view language = voice.substr(0, voice.size() - n - 1);
      return "Perform TTS in " + std::string(language) + " using a " + std::string(gender) + " voice.";
    }
  }
  return InvalidArgument("voice \"" + std::string(voice) +
                         "\" is not \"{Language} female\" or \"{Language} male\" (e.g. \"" + kDefaultVoice +
                         "\"), nor a whole task prompt starting with \"Perform \"");
}

Status NoAudioInput() {
  return Unimplemented(
      "LFM3-Audio takes no speech input in lfmvox: its causal audio encoder is not specified far enough to "
      "build (spec LFM3_AUDIO.md §3.2, §9.8: the downsampler's activations and conv types, the 4096 -> 768 "
      "linear, the projector mlp.* layout); use text turns");
}

// Turns generated items into the caller's callbacks. A speech frame waits in `frame_` until the step is
// over, when the family's Step decodes every session's frame in one batched codec pass (Deliver).
class Bridge final : public Lfm3Sink {
 public:
  Bridge(const Lfm3AudioModel& model, const OutputCallbacks& out, Lfm3CodecState* codec,
         std::vector<float>& pcm, std::vector<int32_t>& frame)
      : model_(model), text_(model.tokenizer()), out_(out), codec_(codec), pcm_(pcm), frame_(frame) {
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
    if (end_of_audio) return FlushSpeech();  // the EOS frame is never decoded: the stretch ends
    std::copy(codes.begin(), codes.end(), frame_.begin());
    pending_ = true;
    return Status::Ok();
  }

  bool TakePending() { return std::exchange(pending_, false); }
  Status Deliver(size_t n) {
    LFM_RETURN_IF_ERROR(CheckFiniteOutput({pcm_.data(), n}, "the decoded speech"));
    samples_ += n;
    return n ? out_.on_pcm({pcm_.data(), n}) : Status::Ok();
  }
  // Ends the current stretch of speech: the codec's tail, then a fresh stream.
  Status FlushSpeech() {
    if (!out_.on_pcm || codec_->frames() == 0) return Status::Ok();
    const auto t0 = std::chrono::steady_clock::now();
    LFM_ASSIGN_OR_RETURN(const size_t n, Flush(model_.codec(), *codec_, pcm_));
    codec_ms_ += MsSince(t0);
    return Deliver(n);
  }

  // The codec's wall time for this generation (the batched pass charged whole to each session).
  void AddCodecMs(double ms) { codec_ms_ += ms; }
  double codec_ms() const { return codec_ms_; }

  size_t samples() const { return samples_; }
  std::span<const int32_t> frame() const { return frame_; }
  std::span<float> pcm() { return {pcm_.data(), model_.codec().samples_per_frame()}; }
  Lfm3CodecState* codec() { return codec_; }

 private:
  const Lfm3AudioModel& model_;
  Tokenizer::StreamDecoder text_;
  const OutputCallbacks& out_;
  Lfm3CodecState* codec_;
  std::vector<float>& pcm_;
  std::vector<int32_t>& frame_;
  std::string piece_;
  bool pending_ = false;
  size_t samples_ = 0;
  double codec_ms_ = 0;
};

class Lfm3FamilySession;

// The engine's worker for this model: the step scratch every session shares.
class Lfm3FamilyWorker final : public FamilyWorker {
 public:
  Lfm3FamilyWorker(std::unique_ptr<Lfm3Worker> w, Lfm3CodecScratch c, size_t max_batch)
      : worker(std::move(w)), codec(std::move(c)) {
    sessions.reserve(max_batch);
    speaking.reserve(max_batch);
    requests.reserve(max_batch);
  }
  std::unique_ptr<Lfm3Worker> worker;  // backbone, head and depth-decoder scratch
  Lfm3CodecScratch codec;              // one frame per session, max_batch sessions
  std::vector<Lfm3Session*> sessions;
  std::vector<Lfm3FamilySession*> speaking;
  std::vector<Lfm3CodecRequest> requests;
};

class Lfm3FamilySession final : public FamilySession {
 public:
  Lfm3FamilySession(const Lfm3AudioModel& model, EngineCore& core, std::shared_ptr<FamilyWorker> worker,
                    Lfm3CodecState codec)
      : model_(model), core_(core), worker_(std::move(worker)), codec_(std::move(codec)) {}

  static Result<std::unique_ptr<FamilySession>> Create(const Lfm3AudioModel& model,
                                                       const ConversationOptions& options, EngineCore& core,
                                                       std::shared_ptr<FamilyWorker> worker) {
    if (options.context_policy != ContextPolicy::kStop) {
      return Unimplemented(
          "LFM3-Audio conversations take only ContextPolicy::kStop (drop_oldest is LFM2.5-Audio's)");
    }
    LFM_ASSIGN_OR_RETURN(Lfm3CodecState codec, Lfm3CodecState::Create(model.codec(), 1));
    auto s = std::make_unique<Lfm3FamilySession>(model, core, std::move(worker), std::move(codec));
    LFM_ASSIGN_OR_RETURN(s->session_, Lfm3Session::Create(model, {.context = options.context,
                                                                  .prefill_chunk = core.options.prefill_rows,
                                                                  .seed = options.seed}));
    s->pcm_.resize(std::max(model.codec().samples_per_frame(), model.codec().tail_samples()));
    s->frame_.resize(static_cast<size_t>(model.config().n_codebooks));
    return std::unique_ptr<FamilySession>(std::move(s));
  }

  Status Begin() override { return session_->StartConversation(); }
  Status StartTurn(std::string_view role) override { return session_->StartTurn(role); }
  Status AddText(std::string_view utf8) override { return session_->AppendText(utf8); }
  Status AddTokens(std::span<const int32_t> ids) override { return session_->AppendTokens(ids); }
  Status AddAudioOut(std::span<const int32_t> frames) override { return session_->AppendAudioOut(frames); }
  Status AddAudio(const AudioBuffer&) override { return NoAudioInput(); }
  Status EndTurn() override { return session_->EndTurn(); }
  Status StartSpeech(std::string_view voice, std::string_view text) override {
    LFM_ASSIGN_OR_RETURN(const std::string task, TtsTaskPrompt(voice));
    return session_->AppendTtsPrompt(task, text);
  }
  Status StartAsr() override { return NoAudioInput(); }

  Status BeginGenerate(const GenerateOptions& options, const OutputCallbacks& out) override {
    if (session_->generating()) return InvalidArgument("this conversation is already generating");
    if (options.word_timestamps) {
      return Unimplemented("word timestamps need speech input, which LFM3-Audio does not take in lfmvox");
    }
    Lfm3GenerationOptions o;
    o.interleaved = options.mode == GenerationMode::kInterleaved;
    o.max_new = options.max_new_tokens;
    o.text = SamplingParams{options.text.temperature, options.text.top_k, 1.0f, 0};
    o.audio_temperature = options.audio.temperature;
    o.audio_top_k = options.audio.top_k;
    out_ = out;
    lfmvox::Reset(codec_);  // every assistant turn starts a fresh speech stream
    bridge_.emplace(model_, out_, &codec_, pcm_, frame_);
    const size_t start = session_->positions();
    Status s = session_->BeginGeneration(o, *bridge_);
    if (!s.ok()) {
      bridge_.reset();
      return s;
    }
    turn_start_ = start;
    return Status::Ok();
  }

  bool generating() const override { return session_->generating(); }
  Status Prefill() override {
    return session_->PrefillAhead(*static_cast<Lfm3FamilyWorker*>(worker_.get())->worker, core_.team);
  }

  Result<GenerateSummary> FinishGenerate() override {
    if (!bridge_) return InvalidArgument("FinishGenerate without BeginGenerate");
    if (session_->generating()) {  // stopped early: a step of its own ends it as cancelled
      session_->Cancel();
      Lfm3Session* self[1] = {session_.get()};
      LFM_RETURN_IF_ERROR(
          StepLfm3Sessions(self, *static_cast<Lfm3FamilyWorker*>(worker_.get())->worker, core_.team));
    }
    Status flushed = bridge_->FlushSpeech();
    const size_t samples = bridge_->samples();
    StageTimings timings = session_->TakeTimings();
    timings.detokenizer_ms = bridge_->codec_ms();
    bridge_.reset();
    LFM_RETURN_IF_ERROR(session_->generation_status());
    LFM_RETURN_IF_ERROR(flushed);
    const Lfm3GenerationResult& r = session_->generation();
    GenerateSummary s;
    s.text_tokens = r.text_tokens;
    s.audio_frames = r.audio_frames;
    s.pcm_samples = samples;
    s.ended = r.ended;
    s.context_full = r.context_full;
    s.cancelled = r.cancelled;
    s.timings = timings;
    return s;
  }

  void Cancel() override { session_->Cancel(); }

  // Keeps the frames of the last turn the listener heard (the last one in part) and drops the rest.
  Status TruncateSpeech(size_t samples) override {
    if (session_->generating())
      return InvalidArgument("TruncateSpeech while generating; FinishGenerate first");
    const size_t spf = model_.codec().samples_per_frame();
    const size_t keep = (samples + spf - 1) / spf;
    size_t frames = 0, cut = session_->positions();
    for (size_t i = std::min(turn_start_, session_->positions()); i < session_->positions(); ++i) {
      if (!session_->is_frame(i) || session_->end_of_audio_frame(i)) continue;  // EOS frames are no speech
      if (frames == keep && cut == session_->positions()) cut = i;
      ++frames;
    }
    if (keep > frames) {
      return OutOfRange(StrFormat(
          "%zu samples (%.0f ms) were asked to be kept, but the last turn's speech is %zu frames (%.0f ms)",
          samples, 1000.0 * static_cast<double>(samples) / model_.codec().config().sample_rate, frames,
          1000.0 * static_cast<double>(frames * spf) / model_.codec().config().sample_rate));
    }
    return session_->Truncate(cut);
  }

  void Reset() override {
    session_->Reset();
    lfmvox::Reset(codec_);
    turn_start_ = 0;
  }

  // state_bytes is not counted for this family (0); positions never pass the context (kStop).
  ContextStats context_stats() const override {
    return {.positions = session_->positions(),
            .context = session_->context(),
            .cached_positions = session_->cached_positions()};
  }

  Lfm3Session* session() { return session_.get(); }
  Bridge* bridge() { return bridge_ ? &*bridge_ : nullptr; }

 private:
  const Lfm3AudioModel& model_;
  EngineCore& core_;
  std::shared_ptr<FamilyWorker> worker_;  // the engine's worker, kept alive while the session is
  std::unique_ptr<Lfm3Session> session_;
  Lfm3CodecState codec_;          // the speech decoder's stream
  std::vector<float> pcm_;        // [max(samples_per_frame, tail)] one frame's (or the tail's) PCM
  std::vector<int32_t> frame_;    // [C] the frame waiting for the step's codec pass
  OutputCallbacks out_;           // the running generation's callbacks
  std::optional<Bridge> bridge_;  // items → callbacks and speech, for the running generation
  size_t turn_start_ = 0;         // history position where the last generation began
};

class Lfm3FamilyModel final : public FamilyModel {
 public:
  explicit Lfm3FamilyModel(std::unique_ptr<Lfm3AudioModel> m) : m_(std::move(m)) {}

  std::string_view family() const override { return "LFM3-Audio"; }
  int sample_rate() const override { return m_->codec().config().sample_rate; }
  int num_codebooks() const override { return m_->config().n_codebooks; }
  int audio_vocab() const override { return m_->config().codebook_size; }
  int samples_per_frame() const override { return static_cast<int>(m_->codec().samples_per_frame()); }
  Status CanListen() const override { return NoAudioInput(); }
  Status CanSpeak() const override { return Status::Ok(); }
  const std::vector<std::string>& voices() const override { return kVoices; }
  const std::string& default_voice() const override { return kDefaultVoice; }
  const std::string& default_system_prompt() const override { return kChatSystemPrompt; }

  // Text greedy (spec §7.1); audio the files' draw (their repetition penalty always applies).
  GenerateOptions Preset(Task task) const override {
    GenerateOptions o;
    o.text = {0.0f, 0};
    o.audio = {m_->sampling().temperature, m_->sampling().top_k};
    o.mode = task == Task::kSpeechToSpeech ? GenerationMode::kInterleaved : GenerationMode::kSequential;
    o.max_new_tokens = task == Task::kTts ? 1024 : 512;
    return o;
  }

  std::string TokenText(int32_t id) const override { return m_->tokenizer().Decode({&id, 1}); }
  bool IsSpecialToken(int32_t id) const override { return m_->tokenizer().IsSpecialToken(id); }

  Result<std::shared_ptr<FamilyWorker>> CreateWorker(const EngineOptions& o) const override {
    LFM_ASSIGN_OR_RETURN(
        std::unique_ptr<Lfm3Worker> w,
        Lfm3Worker::Create(*m_, {.max_batch = o.max_batch,
                                 .max_rows = o.prefill_rows,
                                 .max_context = static_cast<size_t>(m_->config().backbone.max_positions),
                                 .threads = o.threads}));
    LFM_ASSIGN_OR_RETURN(Lfm3CodecScratch c,
                         Lfm3CodecScratch::Create(m_->codec(), 1, o.max_batch, o.threads));
    return std::shared_ptr<FamilyWorker>(
        std::make_shared<Lfm3FamilyWorker>(std::move(w), std::move(c), o.max_batch));
  }

  Result<std::unique_ptr<FamilySession>> CreateSession(const ConversationOptions& options, EngineCore& core,
                                                       std::shared_ptr<FamilyWorker> worker) const override {
    return Lfm3FamilySession::Create(*m_, options, core, std::move(worker));
  }

  Status Step(std::span<FamilySession* const> sessions, FamilyWorker& worker,
              ThreadTeam& team) const override {
    auto& w = static_cast<Lfm3FamilyWorker&>(worker);
    w.sessions.clear();
    for (FamilySession* s : sessions) w.sessions.push_back(static_cast<Lfm3FamilySession*>(s)->session());
    LFM_RETURN_IF_ERROR(StepLfm3Sessions(w.sessions, *w.worker, team));
    // The frames of this step, decoded together: one codec pass for every speaking session.
    w.speaking.clear();
    w.requests.clear();
    for (FamilySession* fs : sessions) {
      auto* s = static_cast<Lfm3FamilySession*>(fs);
      Bridge* b = s->bridge();
      if (b == nullptr || !b->TakePending()) continue;
      w.speaking.push_back(s);
      w.requests.push_back({b->codec(), b->frame(), b->pcm(), 0});
    }
    if (w.requests.empty()) return Status::Ok();
    const auto t0 = std::chrono::steady_clock::now();
    if (Status st = StepStreams(m_->codec(), w.requests, w.codec, team); !st.ok()) {
      for (Lfm3FamilySession* s : w.speaking) s->session()->Abort(st);
      return Status::Ok();
    }
    const double codec_ms = MsSince(t0);
    for (Lfm3FamilySession* s : w.speaking) s->bridge()->AddCodecMs(codec_ms);
    for (size_t i = 0; i < w.speaking.size(); ++i) {
      Status st = w.speaking[i]->bridge()->Deliver(w.requests[i].written);
      if (!st.ok()) w.speaking[i]->session()->Abort(std::move(st));
    }
    return Status::Ok();
  }

 private:
  std::unique_ptr<Lfm3AudioModel> m_;
};

class Lfm3CodecStream final : public FamilyCodecStream {
 public:
  explicit Lfm3CodecStream(std::unique_ptr<Lfm3CodecSession> s) : s_(std::move(s)) {}
  Result<size_t> Step(std::span<const int32_t> codes, std::span<float> pcm, ThreadTeam& team) override {
    return s_->Step(codes, pcm, team);
  }
  Result<size_t> Flush(std::span<float> pcm) override { return s_->Flush(pcm); }
  void Reset() override { s_->Reset(); }

 private:
  std::unique_ptr<Lfm3CodecSession> s_;
};

class Lfm3FamilyCodec final : public FamilyCodec {
 public:
  explicit Lfm3FamilyCodec(std::unique_ptr<Lfm3Codec> c) : c_(std::move(c)) {}
  int sample_rate() const override { return c_->config().sample_rate; }
  int num_codebooks() const override { return static_cast<int>(c_->codebooks()); }
  // The end-of-audio code is never decoded: a stream takes [0, audio_eos).
  int codebook_size() const override { return c_->audio_eos(); }
  int samples_per_frame() const override { return static_cast<int>(c_->samples_per_frame()); }
  int tail_samples() const override { return static_cast<int>(c_->tail_samples()); }
  Result<std::unique_ptr<FamilyCodecStream>> CreateStream(size_t max_frames_per_call,
                                                          int max_threads) const override {
    LFM_ASSIGN_OR_RETURN(std::unique_ptr<Lfm3CodecSession> s,
                         Lfm3CodecSession::Create(*c_, max_frames_per_call, max_threads));
    return std::unique_ptr<FamilyCodecStream>(new Lfm3CodecStream(std::move(s)));
  }

 private:
  std::unique_ptr<Lfm3Codec> c_;
};

Result<std::unique_ptr<FamilyCodec>> LoadLfm3Codec(const std::string& dir, const ModelOptions& options) {
  LFM_ASSIGN_OR_RETURN(std::unique_ptr<Lfm3Codec> c,
                       Lfm3Codec::Load(dir, std::nullopt, options.check_weights));
  return std::unique_ptr<FamilyCodec>(new Lfm3FamilyCodec(std::move(c)));
}

Result<std::unique_ptr<FamilyModel>> LoadLfm3Model(const std::string& dir, const ModelOptions& options) {
  if (!options.weights.empty()) {
    return Unimplemented("weights \"" + options.weights +
                         "\": load-time conversion is not wired for LFM3-Audio models yet; load them as "
                         "stored (no --weights)");
  }
  LFM_ASSIGN_OR_RETURN(std::unique_ptr<Lfm3AudioModel> m, Lfm3AudioModel::Load(dir, options.check_weights));
  return std::unique_ptr<FamilyModel>(new Lfm3FamilyModel(std::move(m)));
}

// The LFM3 speech-output layout (lfm3_config.h): a "model_type" naming LFM3, or the "depth_decoder"
// and "codec" sections side by side.
bool ClaimsLfm3(const FamilyFiles& f) {
  if (f.config == nullptr || !f.config->is_object()) return false;
  const nlohmann::json& c = *f.config;
  const auto type = c.find("model_type");
  if (type != c.end() && type->is_string() && type->get<std::string>().starts_with("lfm3")) return true;
  return c.contains("depth_decoder") && c.contains("codec");
}

}  // namespace

extern const FamilyEntry k_lfm3_family;
const FamilyEntry k_lfm3_family = {"LFM3-Audio", "model_type \"lfm3_audio…\"", &ClaimsLfm3, &LoadLfm3Model,
                                   &LoadLfm3Codec};

}  // namespace lfmvox
