#include "models/lfm25_audio/session.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "threading/thread_team.h"

namespace lfmvox {

namespace fs = std::filesystem;

namespace {

Result<int32_t> Special(const Tokenizer& tok, const char* name, const std::string& path) {
  std::optional<int32_t> id = tok.TokenId(name);
  if (!id)
    return NotFound(StrFormat("%s has no %s token; is it the LFM2.5-Audio tokenizer?", path.c_str(), name));
  return *id;
}

}  // namespace

Result<std::unique_ptr<Lfm25AudioModel>> Lfm25AudioModel::Load(const std::string& dir,
                                                               const ModelLoadOptions& options) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return NotFound(dir + " is not a directory (pass the model's snapshot folder)");
  auto m = std::unique_ptr<Lfm25AudioModel>(new Lfm25AudioModel());
  LFM_ASSIGN_OR_RETURN(m->config_, Lfm25AudioConfig::Load(dir + "/config.json"));
  LFM_ASSIGN_OR_RETURN(Checkpoint ck, Checkpoint::Open(dir));
  m->ckpt_.emplace(std::move(ck));
  const std::string where = "loading " + dir;
  {
    Result<Lfm2Backbone> b = Lfm2Backbone::Load(*m->ckpt_, m->config_.lfm, m->config_.codebooks);
    if (!b.ok()) return b.status().WithContext(where);
    m->backbone_.emplace(std::move(b).value());
  }
  {
    Result<Depthformer> d = Depthformer::Load(*m->ckpt_, m->config_.depthformer, m->config_.lfm.hidden_size);
    if (!d.ok()) return d.status().WithContext(where);
    m->depth_.emplace(std::move(d).value());
  }
  if (m->depth_->config().codebook_vocab != m->backbone_->audio_vocab()) {
    return InvalidArgument(StrFormat("%s: the depthformer has %d codes per codebook but audio_embedding %d",
                                     where.c_str(), m->depth_->config().codebook_vocab,
                                     m->backbone_->audio_vocab()));
  }
  {
    Result<AudioEncoder> e = AudioEncoder::Load(*m->ckpt_, m->config_.encoder, m->config_.lfm.hidden_size);
    if (!e.ok()) return e.status().WithContext(where);
    m->encoder_.emplace(std::move(e).value());
  }
  const std::string tok_path = dir + "/tokenizer.json";
  {
    Result<Tokenizer> t = Tokenizer::LoadFile(tok_path);
    if (!t.ok()) return t.status().WithContext(where);
    m->tokenizer_.emplace(std::move(t).value());
  }
  SpecialTokens& s = m->special_;
  LFM_ASSIGN_OR_RETURN(s.start_of_text, Special(*m->tokenizer_, "<|startoftext|>", tok_path));
  LFM_ASSIGN_OR_RETURN(s.im_start, Special(*m->tokenizer_, "<|im_start|>", tok_path));
  LFM_ASSIGN_OR_RETURN(s.im_end, Special(*m->tokenizer_, "<|im_end|>", tok_path));
  LFM_ASSIGN_OR_RETURN(s.audio_start, Special(*m->tokenizer_, "<|audio_start|>", tok_path));
  LFM_ASSIGN_OR_RETURN(s.text_end, Special(*m->tokenizer_, "<|text_end|>", tok_path));
  // The end-of-audio code is the extra row after the codec's codes in every
  // depth table (liquid-audio tests c_0 == 2048 with 2049-row tables).
  s.end_of_audio = m->backbone_->audio_vocab() - 1;
  for (int32_t id : {s.start_of_text, s.im_start, s.im_end, s.audio_start, s.text_end}) {
    if (id >= m->backbone_->vocab()) {
      return InvalidArgument(
          StrFormat("%s: special token id %d is beyond the model's %d embeddings; the tokenizer "
                    "does not belong to these weights",
                    where.c_str(), id, m->backbone_->vocab()));
    }
  }
  if (options.load_detokenizer) {
    if (!fs::is_directory(dir + "/audio_detokenizer", ec)) {
      return NotFound(where +
                      ": there is no audio_detokenizer/ folder (the LFM2.5 speech decoder); download the "
                      "whole model snapshot");
    }
    LFM_ASSIGN_OR_RETURN(m->detok_, Lfm25Detokenizer::Load(dir + "/audio_detokenizer"));
    if (m->detok_->config().num_codebooks != m->config_.codebooks) {
      return InvalidArgument(where + ": the detokenizer's codebook count differs from the model's");
    }
  }
  return m;
}

Lfm25Session::Lfm25Session(const Lfm25AudioModel& model, Lfm2State state, DepthformerState depth,
                           Sampler text, Sampler audio, const SessionOptions& options)
    : model_(model),
      state_(std::move(state)),
      depth_(std::move(depth)),
      text_sampler_(std::move(text)),
      audio_sampler_(std::move(audio)),
      rng_(options.seed),
      seed_(options.seed),
      context_(options.context) {}

Result<std::unique_ptr<Lfm25Session>> Lfm25Session::Create(const Lfm25AudioModel& model,
                                                           const SessionOptions& options) {
  const Lfm2Config& c = model.config().lfm;
  if (options.context < 1 || options.context > static_cast<size_t>(c.max_positions)) {
    return InvalidArgument(StrFormat("context must be in [1, %d] positions", c.max_positions));
  }
  if (options.prefill_chunk < 1 || options.prefill_chunk > 4096) {
    return InvalidArgument("prefill_chunk must be in [1, 4096]");
  }
  LFM_ASSIGN_OR_RETURN(Lfm2State state, Lfm2State::Create(model.backbone().stack(), options.prefill_chunk,
                                                          options.context, options.threads));
  LFM_ASSIGN_OR_RETURN(DepthformerState depth,
                       DepthformerState::Create(model.depthformer(), options.threads));
  LFM_ASSIGN_OR_RETURN(
      Sampler text, Sampler::Create(SamplingParams::Greedy(), static_cast<size_t>(model.backbone().vocab())));
  LFM_ASSIGN_OR_RETURN(Sampler audio, Sampler::Create(SamplingParams::Greedy(),
                                                      static_cast<size_t>(model.backbone().audio_vocab())));
  auto s = std::unique_ptr<Lfm25Session>(new Lfm25Session(model, std::move(state), std::move(depth),
                                                          std::move(text), std::move(audio), options));
  const size_t H = static_cast<size_t>(c.hidden_size);
  s->x_.Reset(options.prefill_chunk * H);
  s->h_.Reset(H);
  s->logits_.Reset(static_cast<size_t>(model.backbone().vocab()));
  s->frame_.resize(static_cast<size_t>(model.config().codebooks));
  LFM_ASSIGN_OR_RETURN(LogMelFrontEnd mel, LogMelFrontEnd::Create(model.mel_config()));
  s->mel_.emplace(std::move(mel));
  if (!(options.max_clip_seconds > 0 && options.max_clip_seconds <= 3600)) {
    return InvalidArgument("max_clip_seconds must be in (0, 3600]");
  }
  const size_t max_frames =
      s->mel_->NumFrames(static_cast<size_t>(options.max_clip_seconds * model.mel_config().sample_rate));
  LFM_ASSIGN_OR_RETURN(s->enc_, EncoderScratch::Create(model.encoder(), max_frames, options.threads));
  // The history never outgrows the context, so it never reallocates while generating.
  s->history_.reserve(options.context);
  s->audio_out_.reserve(options.context * s->frame_.size());
  return s;
}

std::span<const int32_t> Lfm25Session::audio_codes(size_t i) const {
  const size_t C = frame_.size();
  return {audio_out_.data() + static_cast<size_t>(history_[i].token) * C, C};
}

Status Lfm25Session::CheckRoom(size_t more) const {
  if (history_.size() + more > context_) {
    return OutOfRange(
        StrFormat("the conversation needs %zu positions but the context holds %zu; start a new "
                  "conversation or create the session with a larger context",
                  history_.size() + more, context_));
  }
  return Status::Ok();
}

Status Lfm25Session::AppendTokens(std::span<const int32_t> ids) {
  LFM_RETURN_IF_ERROR(CheckRoom(ids.size()));
  for (int32_t id : ids) {
    if (id < 0 || id >= model_.backbone().vocab()) {
      return InvalidArgument(
          StrFormat("token id %d is outside the model's vocabulary [0, %d)", id, model_.backbone().vocab()));
    }
  }
  for (int32_t id : ids) history_.push_back({Modality::kText, id});
  return Status::Ok();
}

Status Lfm25Session::AppendText(std::string_view utf8) {
  LFM_ASSIGN_OR_RETURN(std::vector<int32_t> ids, model_.tokenizer().Encode(utf8));
  return AppendTokens(ids);
}

Status Lfm25Session::AppendFrame(std::span<const int32_t> codes) {
  history_.push_back({Modality::kAudioOut, static_cast<int32_t>(audio_out_.size() / frame_.size())});
  audio_out_.insert(audio_out_.end(), codes.begin(), codes.end());
  return Status::Ok();
}

Status Lfm25Session::AppendAudioOut(std::span<const int32_t> frames) {
  const size_t C = frame_.size();
  if (frames.size() % C != 0) {
    return InvalidArgument(
        StrFormat("audio-out history holds %zu codes, not a multiple of %zu", frames.size(), C));
  }
  LFM_RETURN_IF_ERROR(CheckRoom(frames.size() / C));
  for (int32_t c : frames) {
    if (c < 0 || c >= model_.backbone().audio_vocab()) {
      return InvalidArgument(
          StrFormat("audio code %d is outside [0, %d)", c, model_.backbone().audio_vocab()));
    }
  }
  for (size_t f = 0; f < frames.size(); f += C) LFM_RETURN_IF_ERROR(AppendFrame(frames.subspan(f, C)));
  return Status::Ok();
}

Status Lfm25Session::AppendAudioIn(std::span<const float> embeddings) {
  const size_t H = static_cast<size_t>(model_.config().lfm.hidden_size);
  if (embeddings.size() % H != 0) {
    return InvalidArgument(
        StrFormat("audio-in embeddings hold %zu values, not rows of %zu", embeddings.size(), H));
  }
  const size_t rows = embeddings.size() / H;
  LFM_RETURN_IF_ERROR(CheckRoom(rows));
  for (float v : embeddings) {
    if (!std::isfinite(v)) return InvalidArgument("audio-in embeddings hold NaN or infinity");
  }
  const size_t first = audio_in_.size() / H;
  audio_in_.insert(audio_in_.end(), embeddings.begin(), embeddings.end());
  for (size_t r = 0; r < rows; ++r) history_.push_back({Modality::kAudioIn, static_cast<int32_t>(first + r)});
  return Status::Ok();
}

Status Lfm25Session::AppendAudio(const AudioBuffer& audio, ThreadTeam& team, TraceSink* sink) {
  LFM_RETURN_IF_ERROR(mel_->ComputeFromAudio(audio, &features_));
  const size_t F = features_.frames;
  if (F > enc_->max_frames()) {
    return OutOfRange(
        StrFormat("the clip has %zu mel frames (%.1f s); this session takes clips of up to %zu "
                  "(raise max_clip_seconds)",
                  F, static_cast<double>(audio.frames()) / audio.sample_rate, enc_->max_frames()));
  }
  const size_t E = ConformerConfig::SubsampledFrames(F);  // = mel2emb_len(F) = ceil(F / 8)
  LFM_RETURN_IF_ERROR(CheckRoom(E));
  if (sink) sink->Record("mel", features_.mel.data(), static_cast<size_t>(model_.mel_config().n_mels), F, F);
  const size_t H = static_cast<size_t>(model_.config().lfm.hidden_size);
  clip_.resize(E * H);
  LFM_RETURN_IF_ERROR(model_.encoder().Encode(features_.mel.data(), F, clip_.data(), *enc_, team, sink));
  return AppendAudioIn(clip_);
}

Status Lfm25Session::StartConversation() {
  const int32_t bos = model_.special().start_of_text;
  return AppendTokens({&bos, 1});
}

Status Lfm25Session::StartTurn(std::string_view role) {
  return AppendText("<|im_start|>" + std::string(role) + "\n");
}

Status Lfm25Session::EndTurn() {
  // A sequential turn already ends with the <|im_end|> it generated.
  const bool closed = !history_.empty() && history_.back().modality == Modality::kText &&
                      history_.back().token == model_.special().im_end;
  return AppendText(closed ? "\n" : "<|im_end|>\n");
}

const std::vector<std::string>& Lfm25TtsVoices() {
  static const std::vector<std::string> kVoices = {"US male", "US female", "UK male", "UK female"};
  return kVoices;
}

Status Lfm25Session::AppendTtsPrompt(std::string_view voice, std::string_view text) {
  const auto& voices = Lfm25TtsVoices();
  if (std::find(voices.begin(), voices.end(), voice) == voices.end()) {
    std::string list;
    for (const auto& v : voices) list += (list.empty() ? "\"" : ", \"") + v + "\"";
    return InvalidArgument("unknown voice \"" + std::string(voice) + "\"; the voices are " + list);
  }
  if (history_.empty()) LFM_RETURN_IF_ERROR(StartConversation());
  LFM_RETURN_IF_ERROR(StartTurn("system"));
  LFM_RETURN_IF_ERROR(AppendText("Perform TTS. Use the " + std::string(voice) + " voice."));
  LFM_RETURN_IF_ERROR(EndTurn());
  LFM_RETURN_IF_ERROR(StartTurn("user"));
  LFM_RETURN_IF_ERROR(AppendText(text));
  LFM_RETURN_IF_ERROR(EndTurn());
  return StartTurn("assistant");
}

Status Lfm25Session::Embed(const Position& p, float* out) const {
  switch (p.modality) {
    case Modality::kText:
      return model_.backbone().EmbedToken(p.token, out);
    case Modality::kAudioOut: {
      const size_t C = frame_.size();
      return model_.backbone().EmbedAudioFrame({audio_out_.data() + static_cast<size_t>(p.token) * C, C},
                                               out);
    }
    case Modality::kAudioIn: {
      const size_t H = static_cast<size_t>(model_.config().lfm.hidden_size);
      std::copy_n(audio_in_.data() + static_cast<size_t>(p.token) * H, H, out);
      return Status::Ok();
    }
  }
  return Internal("unknown modality");
}

Result<const float*> Lfm25Session::Prefill(ThreadTeam& team, TraceSink* sink) {
  if (history_.empty()) return InvalidArgument("the conversation is empty; append a prompt first");
  const size_t H = static_cast<size_t>(model_.config().lfm.hidden_size);
  const Lfm2Stack& stack = model_.backbone().stack();
  while (cached_ < history_.size()) {
    const size_t n = std::min(state_.max_rows(), history_.size() - cached_);
    for (size_t r = 0; r < n; ++r) LFM_RETURN_IF_ERROR(Embed(history_[cached_ + r], x_.data() + r * H));
    if (sink) sink->Record("in_emb", x_.data(), n, H, H);
    LFM_RETURN_IF_ERROR(Lfm2Forward(stack, state_, x_.data(), n, team, sink));
    if (sink) {  // every row's final norm, for parity with last_hidden traces
      Lfm2FinalNorm(stack, x_.data(), n, x_.data());
      sink->Record("last_hidden", x_.data(), n, H, H);
    } else {
      Lfm2FinalNorm(stack, x_.data() + (n - 1) * H, 1, x_.data() + (n - 1) * H);
    }
    std::copy_n(x_.data() + (n - 1) * H, H, h_.data());
    cached_ += n;
  }
  return static_cast<const float*>(h_.data());
}

Result<GenerationResult> Lfm25Session::Generate(const GenerationOptions& o, GenerationSink& sink,
                                                ThreadTeam& team) {
  if (o.max_new_tokens < 0) return InvalidArgument("max_new_tokens must be >= 0");
  // Samplers are rebuilt only when the settings change (never per item).
  auto same = [](const SamplingParams& a, const SamplingParams& b) {
    return a.temperature == b.temperature && a.top_k == b.top_k &&
           a.repetition_penalty == b.repetition_penalty && a.penalty_window == b.penalty_window;
  };
  if (!same(text_sampler_.params(), o.text)) {
    LFM_ASSIGN_OR_RETURN(text_sampler_, Sampler::Create(o.text, text_sampler_.max_vocab()));
  }
  if (!same(audio_sampler_.params(), o.audio)) {
    LFM_ASSIGN_OR_RETURN(audio_sampler_, Sampler::Create(o.audio, audio_sampler_.max_vocab()));
  }
  const SpecialTokens& sp = model_.special();
  const int n_text = model_.config().interleaved_n_text, n_audio = model_.config().interleaved_n_audio;
  const bool interleaved = o.mode == GenerationMode::kInterleaved;
  GenerationResult res;
  Modality modality = Modality::kText;
  int left = n_text;
  bool text_done = false;
  for (int step = 0; step < o.max_new_tokens; ++step) {
    // The item produced now must fit, and so must its feed on the next step.
    if (history_.size() + 1 > context_) {
      res.context_full = true;
      break;
    }
    --left;
    LFM_ASSIGN_OR_RETURN(const float* h, Prefill(team));
    if (modality == Modality::kText) {
      model_.backbone().TextLogits(h, logits_.data(), team);
      LFM_ASSIGN_OR_RETURN(const int32_t id, text_sampler_.Sample(logits_.span(), rng_));
      if (id == sp.im_end && interleaved) {  // interleaved turns end without yielding <|im_end|>
        res.ended = true;
        break;
      }
      history_.push_back({Modality::kText, id});
      ++res.text_tokens;
      LFM_RETURN_IF_ERROR(sink.OnText(id));
      if (id == sp.im_end) {
        res.ended = true;
        break;
      }
      if (interleaved) {
        if (id == sp.text_end) text_done = true;
        if (left == 0 || text_done) {
          modality = Modality::kAudioOut;
          left = n_audio;
        }
      } else if (id == sp.audio_start) {
        modality = Modality::kAudioOut;
      }
    } else {
      LFM_RETURN_IF_ERROR(SampleAudioFrame(model_.depthformer(), depth_, h, audio_sampler_, rng_,
                                           frame_.data(), team, nullptr));
      if (interleaved && left == 0 && !text_done) {
        modality = Modality::kText;
        left = n_text;
      }
      const bool eoa = frame_[0] == sp.end_of_audio;
      if (eoa) {  // the official loop turns the whole frame into end-of-audio and goes back to text
        std::fill(frame_.begin(), frame_.end(), sp.end_of_audio);
        modality = Modality::kText;
      }
      LFM_RETURN_IF_ERROR(AppendFrame(frame_));
      ++res.audio_frames;
      LFM_RETURN_IF_ERROR(sink.OnAudioFrame(frame_, eoa));
    }
  }
  return res;
}

void Lfm25Session::Reset() {
  history_.clear();
  audio_out_.clear();
  audio_in_.clear();
  cached_ = 0;
  state_.Reset();
  rng_ = Rng(seed_);
}

}  // namespace lfmvox
