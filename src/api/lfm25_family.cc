// The LFM2.5-Audio family behind the public API: its model, its sessions,
// its official prompts and sampling settings, and the bridge from generated
// audio frames to the streaming detokenizer.
#include <algorithm>
#include <string>
#include <vector>

#include "api/family.h"
#include "blocks/sampling.h"
#include "models/lfm25_audio/session.h"
#include "threading/thread_team.h"

namespace lfmvox {
namespace {

// The liquid-audio README's prompts.
const std::string kAsrSystemPrompt = "Perform ASR.";
const std::string kChatSystemPrompt = "Respond with interleaved text and audio.";
const std::string kDefaultVoice = "US female";

Sampling ToSampling(const SamplingParams& p) { return {p.temperature, p.top_k}; }

// Turns generated items into the caller's callbacks, decoding speech on the way.
class Bridge final : public GenerationSink {
 public:
  Bridge(const Tokenizer& tok, const OutputCallbacks& out, Lfm25DetokenizerSession* detok, ThreadTeam& team,
         std::vector<float>& pcm, std::vector<int32_t>& clamped, int codebook_size)
      : text_(tok),
        out_(out),
        detok_(detok),
        team_(team),
        pcm_(pcm),
        clamped_(clamped),
        codebook_size_(codebook_size) {
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
    if (end_of_audio) return FlushSpeech();
    // A non-final frame may still carry the end-of-audio code on codebooks
    // 1..7; the detokenizer has no row for it (liquid-audio's decode would
    // raise). Like the ONNX port, decode it as the last real code.
    for (size_t k = 0; k < codes.size(); ++k) clamped_[k] = std::min(codes[k], codebook_size_ - 1);
    LFM_ASSIGN_OR_RETURN(const size_t n, detok_->Decode(clamped_, pcm_, team_));
    samples_ += n;
    return n ? out_.on_pcm({pcm_.data(), n}) : Status::Ok();
  }

  // Ends the current stretch of speech: the detokenizer's tail, then a fresh stream.
  Status FlushSpeech() {
    if (!out_.on_pcm || detok_->frames_decoded() == 0) return Status::Ok();
    LFM_ASSIGN_OR_RETURN(const size_t n, detok_->Flush(pcm_));
    samples_ += n;
    return n ? out_.on_pcm({pcm_.data(), n}) : Status::Ok();
  }

  size_t samples() const { return samples_; }

 private:
  Tokenizer::StreamDecoder text_;
  const OutputCallbacks& out_;
  Lfm25DetokenizerSession* detok_;
  ThreadTeam& team_;
  std::vector<float>& pcm_;
  std::vector<int32_t>& clamped_;
  int codebook_size_;
  std::string piece_;
  size_t samples_ = 0;
};

class Lfm25FamilySession final : public FamilySession {
 public:
  Lfm25FamilySession(const Lfm25AudioModel& model, int threads) : model_(model), team_(threads) {}

  static Result<std::unique_ptr<FamilySession>> Create(const Lfm25AudioModel& model,
                                                       const ConversationOptions& options) {
    auto s = std::make_unique<Lfm25FamilySession>(model, options.threads);
    SessionOptions so;
    so.threads = options.threads;
    so.context = options.context;
    so.seed = options.seed;
    so.max_clip_seconds = options.max_clip_seconds;
    LFM_ASSIGN_OR_RETURN(s->session_, Lfm25Session::Create(model, so));
    const Lfm25Detokenizer* detok = model.detokenizer();
    LFM_ASSIGN_OR_RETURN(s->detok_, Lfm25DetokenizerSession::Create(*detok, 1, options.threads));
    s->pcm_.resize(static_cast<size_t>(detok->config().samples_per_frame()));
    s->clamped_.resize(static_cast<size_t>(detok->config().num_codebooks));
    return std::unique_ptr<FamilySession>(std::move(s));
  }

  Status Begin() override { return session_->StartConversation(); }
  Status StartTurn(std::string_view role) override { return session_->StartTurn(role); }
  Status AddText(std::string_view utf8) override { return session_->AppendText(utf8); }
  Status AddTokens(std::span<const int32_t> ids) override { return session_->AppendTokens(ids); }
  Status AddAudioOut(std::span<const int32_t> frames) override { return session_->AppendAudioOut(frames); }
  Status AddAudio(const AudioBuffer& audio) override { return session_->AppendAudio(audio, team_); }
  Status EndTurn() override { return session_->EndTurn(); }
  Status StartSpeech(std::string_view voice, std::string_view text) override {
    return session_->AppendTtsPrompt(voice, text);
  }
  // The LFM2.5-Audio README's ASR prompt, up to the user's speech.
  Status StartAsr() override {
    LFM_RETURN_IF_ERROR(session_->StartConversation());
    LFM_RETURN_IF_ERROR(session_->StartTurn("system"));
    LFM_RETURN_IF_ERROR(session_->AppendText(kAsrSystemPrompt));
    LFM_RETURN_IF_ERROR(session_->EndTurn());
    return session_->StartTurn("user");
  }

  Result<GenerateSummary> Generate(const GenerateOptions& options, const OutputCallbacks& out) override {
    GenerationOptions o;
    o.mode = options.mode;
    o.max_new_tokens = options.max_new_tokens;
    o.text = SamplingParams{options.text.temperature, options.text.top_k, 1.0f, 0};
    o.audio = SamplingParams{options.audio.temperature, options.audio.top_k, 1.0f, 0};
    detok_->Reset();  // every assistant turn starts a fresh speech stream
    Bridge bridge(model_.tokenizer(), out, detok_.get(), team_, pcm_, clamped_,
                  model_.detokenizer()->config().codebook_size);
    LFM_ASSIGN_OR_RETURN(GenerationResult r, session_->Generate(o, bridge, team_));
    LFM_RETURN_IF_ERROR(bridge.FlushSpeech());
    GenerateSummary s;
    s.text_tokens = r.text_tokens;
    s.audio_frames = r.audio_frames;
    s.pcm_samples = bridge.samples();
    s.ended = r.ended;
    s.context_full = r.context_full;
    return s;
  }

  void Reset() override {
    session_->Reset();
    detok_->Reset();
  }

 private:
  const Lfm25AudioModel& model_;
  ThreadTeam team_;
  std::unique_ptr<Lfm25Session> session_;
  std::unique_ptr<Lfm25DetokenizerSession> detok_;
  std::vector<float> pcm_;        // [samples_per_frame] one frame's PCM
  std::vector<int32_t> clamped_;  // [num_codebooks] a frame's codes as the detokenizer takes them
};

class Lfm25FamilyModel final : public FamilyModel {
 public:
  explicit Lfm25FamilyModel(std::unique_ptr<Lfm25AudioModel> m) : m_(std::move(m)) {}

  std::string_view family() const override { return "LFM2.5-Audio"; }
  int sample_rate() const override { return m_->detokenizer()->config().sample_rate; }
  int num_codebooks() const override { return m_->config().codebooks; }
  int audio_vocab() const override { return m_->backbone().audio_vocab(); }
  int samples_per_frame() const override { return m_->detokenizer()->config().samples_per_frame(); }
  const std::vector<std::string>& voices() const override { return Lfm25TtsVoices(); }
  const std::string& default_voice() const override { return kDefaultVoice; }
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

  Result<std::unique_ptr<FamilySession>> CreateSession(const ConversationOptions& options) const override {
    return Lfm25FamilySession::Create(*m_, options);
  }

 private:
  std::unique_ptr<Lfm25AudioModel> m_;
};

}  // namespace

const std::vector<std::string>& Lfm25Voices() { return Lfm25TtsVoices(); }

Result<std::unique_ptr<FamilyModel>> LoadLfm25Family(const std::string& dir) {
  LFM_ASSIGN_OR_RETURN(std::unique_ptr<Lfm25AudioModel> m, Lfm25AudioModel::Load(dir));
  return std::unique_ptr<FamilyModel>(new Lfm25FamilyModel(std::move(m)));
}

}  // namespace lfmvox
