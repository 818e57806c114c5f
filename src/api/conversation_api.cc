// The public LFM2.5-Audio API: ownership wrappers over the pipeline, plus the
// bridge from generated audio frames to the streaming detokenizer.
#include <algorithm>
#include <cmath>
#include <string>

#include "io/audio_file.h"
#include "lfmvox/lfmvox.h"
#include "models/lfm25_audio/session.h"
#include "threading/thread_team.h"

namespace lfmvox {

AudioModel::AudioModel(std::unique_ptr<Lfm25AudioModel> impl) : impl_(std::move(impl)) {}
AudioModel::~AudioModel() = default;

Result<std::shared_ptr<const AudioModel>> AudioModel::Load(const std::string& model_dir) {
  LFM_ASSIGN_OR_RETURN(std::unique_ptr<Lfm25AudioModel> m, Lfm25AudioModel::Load(model_dir));
  return std::shared_ptr<const AudioModel>(new AudioModel(std::move(m)));
}

int AudioModel::sample_rate() const { return impl_->detokenizer()->config().sample_rate; }

std::string AudioModel::TokenText(int32_t id) const { return impl_->tokenizer().Decode({&id, 1}); }

bool AudioModel::IsSpecialToken(int32_t id) const { return impl_->tokenizer().IsSpecialToken(id); }

const std::vector<std::string>& Lfm25Voices() { return Lfm25TtsVoices(); }

Conversation::~Conversation() = default;

Result<std::unique_ptr<Conversation>> Conversation::Create(std::shared_ptr<const AudioModel> model,
                                                           const ConversationOptions& options) {
  if (model == nullptr) return InvalidArgument("Conversation::Create needs a loaded model");
  if (options.threads < 1 || options.threads > 256) return InvalidArgument("threads must be in [1, 256]");
  auto c = std::unique_ptr<Conversation>(new Conversation());
  SessionOptions so;
  so.threads = options.threads;
  so.context = options.context;
  so.seed = options.seed;
  so.max_clip_seconds = options.max_clip_seconds;
  LFM_ASSIGN_OR_RETURN(c->session_, Lfm25Session::Create(model->impl(), so));
  const Lfm25Detokenizer* detok = model->impl().detokenizer();
  LFM_ASSIGN_OR_RETURN(c->detok_, Lfm25DetokenizerSession::Create(*detok, 1, options.threads));
  c->pcm_.resize(static_cast<size_t>(detok->config().samples_per_frame()));
  c->clamped_.resize(static_cast<size_t>(detok->config().num_codebooks));
  c->team_ = std::make_unique<ThreadTeam>(options.threads);
  c->model_ = std::move(model);
  return c;
}

Status Conversation::Begin() { return session_->StartConversation(); }
Status Conversation::StartTurn(std::string_view role) { return session_->StartTurn(role); }
Status Conversation::AddText(std::string_view utf8) { return session_->AppendText(utf8); }
Status Conversation::AddTokens(std::span<const int32_t> ids) { return session_->AppendTokens(ids); }
Status Conversation::AddAudioOut(std::span<const int32_t> frames) { return session_->AppendAudioOut(frames); }
Status Conversation::EndTurn() { return session_->EndTurn(); }

Status Conversation::AddAudioFile(const std::string& path) {
  LFM_ASSIGN_OR_RETURN(AudioBuffer audio, ReadAudioFile(path));
  return session_->AppendAudio(audio, *team_).WithContext(path);
}

Status Conversation::AddAudio(std::span<const float> samples, int sample_rate, int channels) {
  if (channels < 1 || channels > kMaxAudioChannels) return InvalidArgument("channels must be in [1, 64]");
  if (sample_rate < 1 || sample_rate > kMaxAudioSampleRate) {
    return InvalidArgument(
        StrFormat("sample rate %d Hz is not in [1, %d]", sample_rate, kMaxAudioSampleRate));
  }
  if (samples.empty() || samples.size() % static_cast<size_t>(channels) != 0) {
    return InvalidArgument("audio samples must be a non-empty whole number of frames");
  }
  for (float v : samples) {
    if (!std::isfinite(v)) return InvalidArgument("audio samples hold NaN or infinity");
  }
  AudioBuffer audio;
  audio.sample_rate = sample_rate;
  audio.channels = channels;
  audio.samples.assign(samples.begin(), samples.end());
  return session_->AppendAudio(audio, *team_);
}
void Conversation::Reset() {
  session_->Reset();
  detok_->Reset();
}

Status Conversation::StartSpeech(std::string_view voice, std::string_view text) {
  return session_->AppendTtsPrompt(voice, text);
}

namespace {

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

}  // namespace

Result<GenerateSummary> Conversation::Generate(const GenerateOptions& options, const OutputCallbacks& out) {
  GenerationOptions o;
  o.mode = options.mode;
  o.max_new_tokens = options.max_new_tokens;
  o.text = SamplingParams{options.text.temperature, options.text.top_k, 1.0f, 0};
  o.audio = SamplingParams{options.audio.temperature, options.audio.top_k, 1.0f, 0};
  detok_->Reset();  // every assistant turn starts a fresh speech stream
  Bridge bridge(model_->impl().tokenizer(), out, detok_.get(), *team_, pcm_, clamped_,
                model_->impl().detokenizer()->config().codebook_size);
  LFM_ASSIGN_OR_RETURN(GenerationResult r, session_->Generate(o, bridge, *team_));
  LFM_RETURN_IF_ERROR(bridge.FlushSpeech());
  GenerateSummary s;
  s.text_tokens = r.text_tokens;
  s.audio_frames = r.audio_frames;
  s.pcm_samples = bridge.samples();
  s.ended = r.ended;
  s.context_full = r.context_full;
  return s;
}

}  // namespace lfmvox
