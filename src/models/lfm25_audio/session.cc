#include "models/lfm25_audio/session.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "base/clock.h"
#include "base/memory_budget.h"
#include "blocks/weights.h"
#include "models/lfm25_audio/gguf_release.h"
#include "threading/stage_policy.h"
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
  auto m = std::unique_ptr<Lfm25AudioModel>(new Lfm25AudioModel());
  std::string where = "loading " + dir, tok_path;
  std::optional<Lfm25GgufModel> gguf;
  if (LooksLikeGgufRelease(dir)) {
    LFM_ASSIGN_OR_RETURN(Lfm25GgufFiles files, FindLfm25GgufRelease(dir));
    LFM_ASSIGN_OR_RETURN(Lfm25GgufModel g, OpenLfm25GgufRelease(files));
    gguf.emplace(std::move(g));
    where = "loading " + gguf->where;
    tok_path = gguf->where + " (tokenizer.ggml.*)";
    LFM_ASSIGN_OR_RETURN(m->config_,
                         Lfm25AudioConfig::FromJson(gguf->config, gguf->where + " (GGUF metadata)"));
    m->ckpt_.emplace(std::move(*gguf->weights));
    Result<Tokenizer> t = Tokenizer::FromVocab(gguf->vocab);
    if (!t.ok()) return t.status().WithContext(where);
    m->tokenizer_.emplace(std::move(t).value());
  } else {
    if (!fs::is_directory(dir, ec))
      return NotFound(dir + " is not a directory (pass the model's snapshot folder or its GGUF files)");
    LFM_ASSIGN_OR_RETURN(m->config_, Lfm25AudioConfig::Load(dir + "/config.json"));
    LFM_ASSIGN_OR_RETURN(Checkpoint ck, Checkpoint::Open(dir));
    m->ckpt_.emplace(std::move(ck));
    tok_path = dir + "/tokenizer.json";
    Result<Tokenizer> t = Tokenizer::LoadFile(tok_path);
    if (!t.ok()) return t.status().WithContext(where);
    m->tokenizer_.emplace(std::move(t).value());
  }
  if (options.check_weights) LFM_RETURN_IF_ERROR(CheckWeightsFinite(*m->ckpt_).WithContext(where));
  if (options.weights) {
    LFM_ASSIGN_OR_RETURN(Checkpoint q, QuantizeCheckpoint(std::move(*m->ckpt_), *options.weights));
    m->ckpt_.emplace(std::move(q));
  }
  // A snapshot holds every stage; a GGUF set may lack the mmproj (no speech in) or the vocoder (no
  // speech out), and then loads without that stage (FindLfm25GgufRelease).
  const bool has_depth = !gguf || gguf->has_depthformer, has_encoder = !gguf || gguf->has_encoder;
  const std::string dir_name = gguf ? fs::path(gguf->where).parent_path().string() : dir;
  {
    Result<Lfm2Backbone> b = Lfm2Backbone::Load(*m->ckpt_, m->config_.lfm, m->config_.codebooks, !gguf);
    if (!b.ok()) return b.status().WithContext(where);
    m->backbone_.emplace(std::move(b).value());
  }
  if (has_depth) {
    Result<Depthformer> d = Depthformer::Load(*m->ckpt_, m->config_.depthformer, m->config_.lfm.hidden_size);
    if (!d.ok()) return d.status().WithContext(where);
    m->depth_.emplace(std::move(d).value());
    if (m->depth_->config().codebook_vocab != m->backbone_->audio_vocab()) {
      return InvalidArgument(StrFormat("%s: the depthformer has %d codes per codebook but audio_embedding %d",
                                       where.c_str(), m->depth_->config().codebook_vocab,
                                       m->backbone_->audio_vocab()));
    }
  } else {
    m->speech_out_missing_ = dir_name +
                             " has no vocoder-*.gguf (the depthformer and audio embeddings); speech output "
                             "needs it: download it with the backbone";
  }
  if (has_encoder) {
    Result<AudioEncoder> e = AudioEncoder::Load(*m->ckpt_, m->config_.encoder, m->config_.lfm.hidden_size);
    if (!e.ok()) return e.status().WithContext(where);
    m->encoder_.emplace(std::move(e).value());
  } else {
    m->speech_in_missing_ = dir_name +
                            " has no mmproj-*.gguf (the audio encoder); speech input (transcription, "
                            "spoken questions) needs it: download it with the backbone";
  }
  LFM_RETURN_IF_ERROR(m->LoadStoredMelTables().WithContext(where));
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
  if (options.load_detokenizer && m->speech_out_missing_.empty()) {
    if (gguf && !gguf->detokenizer) {
      m->speech_out_missing_ = dir_name +
                               " has no tokenizer-*.gguf (the detokenizer: audio codes to speech); speech "
                               "output needs it: download it with the vocoder";
    } else if (gguf) {
      LFM_ASSIGN_OR_RETURN(
          Lfm25DetokenizerConfig dc,
          Lfm25DetokenizerConfig::FromJson(gguf->detokenizer_config, gguf->where + " (GGUF metadata)"));
      Checkpoint dck = std::move(*gguf->detokenizer);
      if (options.check_weights) LFM_RETURN_IF_ERROR(CheckWeightsFinite(dck).WithContext(where));
      if (options.weights) {
        LFM_ASSIGN_OR_RETURN(dck, QuantizeCheckpoint(std::move(dck), *options.weights));
      }
      LFM_ASSIGN_OR_RETURN(m->detok_, Lfm25Detokenizer::Load(std::move(dc), std::move(dck), gguf->where));
    } else if (!fs::is_directory(dir + "/audio_detokenizer", ec)) {
      m->speech_out_missing_ = dir +
                               " has no audio_detokenizer/ folder (the LFM2.5 speech decoder); speech output "
                               "needs it: download the whole model snapshot";
    } else {
      const std::string ddir = dir + "/audio_detokenizer";
      LFM_ASSIGN_OR_RETURN(Lfm25DetokenizerConfig dc, Lfm25DetokenizerConfig::Load(ddir + "/config.json"));
      LFM_ASSIGN_OR_RETURN(Checkpoint dck, Checkpoint::Open(ddir));
      if (options.check_weights) LFM_RETURN_IF_ERROR(CheckWeightsFinite(dck).WithContext(where));
      if (options.weights) {
        LFM_ASSIGN_OR_RETURN(dck, QuantizeCheckpoint(std::move(dck), *options.weights));
      }
      LFM_ASSIGN_OR_RETURN(m->detok_, Lfm25Detokenizer::Load(std::move(dc), std::move(dck), ddir));
    }
    if (m->detok_ && m->detok_->config().num_codebooks != m->config_.codebooks) {
      return InvalidArgument(where + ": the detokenizer's codebook count differs from the model's");
    }
  } else if (!options.load_detokenizer && m->speech_out_missing_.empty()) {
    m->speech_out_missing_ = "the model was loaded without its speech decoder (load_detokenizer = false)";
  }
  return m;
}

// A filterbank or window a projector file stores (preprocessor.featurizer.fb / .window, NeMo's buffer
// names), [n_mels, bins] (a leading 1 allowed, or transposed) and [win_length], checked against the
// config's by LogMelFrontEnd::Create.
Status Lfm25AudioModel::LoadStoredMelTables() {
  const LogMelConfig& c = config_.preprocessor;
  const size_t mels = static_cast<size_t>(c.n_mels), bins = static_cast<size_t>(c.n_fft / 2 + 1);
  for (const auto& [name, out] : {std::pair{"preprocessor.featurizer.fb", &stored_fb_},
                                  std::pair{"preprocessor.featurizer.window", &stored_window_}}) {
    if (!ckpt_->Has(name)) continue;
    LFM_ASSIGN_OR_RETURN(TensorView t, ckpt_->Get(name));
    AlignedBuffer<float> v;
    LFM_RETURN_IF_ERROR(LoadF32(*ckpt_, name, t.shape, &v));
    out->assign(v.data(), v.data() + v.size());
    const bool transposed = out == &stored_fb_ && t.shape.rank == 2 && mels != bins &&
                            t.shape[0] == static_cast<int64_t>(bins) &&
                            t.shape[1] == static_cast<int64_t>(mels);
    if (transposed) {
      for (size_t b = 0; b < bins; ++b)
        for (size_t i = 0; i < mels; ++i) (*out)[i * bins + b] = v[b * mels + i];
    }
  }
  if (stored_fb_.empty() && stored_window_.empty()) return Status::Ok();
  return LogMelFrontEnd::Create(c, stored_mel_tables()).status();
}

// --- Worker -------------------------------------------------------------------

Lfm25Worker::Lfm25Worker(const Lfm25AudioModel& model, const WorkerOptions& options, Lfm2Scratch backbone,
                         std::optional<DepthformerScratch> depth)
    : model_(model), options_(options), backbone_(std::move(backbone)), depth_(std::move(depth)) {}

Lfm25Worker::~Lfm25Worker() = default;

Result<std::unique_ptr<Lfm25Worker>> Lfm25Worker::Create(const Lfm25AudioModel& model,
                                                         const WorkerOptions& o) {
  const Lfm2Config& c = model.config().lfm;
  if (o.max_batch < 1 || o.max_batch > 1024) return InvalidArgument("max_batch must be in [1, 1024]");
  if (o.max_rows < 1 || o.max_rows > 4096) return InvalidArgument("max_rows must be in [1, 4096]");
  if (o.max_context < 1 || o.max_context > static_cast<size_t>(c.max_positions)) {
    return InvalidArgument(StrFormat("the context must be in [1, %d] positions", c.max_positions));
  }
  if (o.threads < 1 || o.threads > kMaxThreads) {
    return InvalidArgument(StrFormat("threads must be in [1, %d]", kMaxThreads));
  }
  if (!(o.max_clip_seconds > 0 && o.max_clip_seconds <= 3600)) {
    return InvalidArgument("max_clip_seconds must be in (0, 3600]");
  }
  const Lfm2Stack& stack = model.backbone().stack();
  // A query sees at most the context (full attention) or the window (sliding attention).
  const size_t max_keys = std::max(o.max_context, static_cast<size_t>(c.sliding_window) + o.max_rows);
  LFM_ASSIGN_OR_RETURN(Lfm2Scratch backbone, Lfm2Scratch::Create(stack, o.max_rows, max_keys, o.threads));
  std::optional<DepthformerScratch> depth;
  if (model.has_depthformer()) {
    LFM_ASSIGN_OR_RETURN(DepthformerScratch d,
                         DepthformerScratch::Create(model.depthformer(), o.max_batch, o.threads));
    depth.emplace(std::move(d));
  }
  auto w = std::unique_ptr<Lfm25Worker>(new Lfm25Worker(model, o, std::move(backbone), std::move(depth)));
  const size_t H = static_cast<size_t>(c.hidden_size), B = o.max_batch;
  w->x_.Reset(o.max_rows * H);
  w->h_.Reset(B * H);
  w->ht_.Reset(B * H);
  w->logits_.Reset(B * static_cast<size_t>(model.backbone().vocab()));
  for (auto* v : {&w->feeding_, &w->text_, &w->audio_}) v->reserve(B);
  w->states_.reserve(B);
  w->rows_.reserve(B);
  w->slot_.reserve(B);
  w->requests_.reserve(B);
  LFM_ASSIGN_OR_RETURN(LogMelFrontEnd mel,
                       LogMelFrontEnd::Create(model.mel_config(), model.stored_mel_tables()));
  w->mel_.emplace(std::move(mel));
  const size_t max_frames =
      w->mel_->NumFrames(static_cast<size_t>(o.max_clip_seconds * model.mel_config().sample_rate));
  if (model.has_encoder()) {
    LFM_ASSIGN_OR_RETURN(w->enc_, EncoderScratch::Create(model.encoder(), max_frames, o.threads));
    w->clip_.Reset(ConformerConfig::SubsampledFrames(max_frames) * H);
  }
  return w;
}

size_t Lfm25Worker::bytes() const {
  return backbone_.bytes() + (depth_ ? depth_->bytes() : 0) +
         (x_.size() + h_.size() + ht_.size() + logits_.size() + clip_.size()) * sizeof(float);
}

// --- Session ------------------------------------------------------------------

Lfm25Session::Lfm25Session(const Lfm25AudioModel& model, Lfm2State state, Sampler text, Sampler audio,
                           const SessionOptions& options)
    : model_(model),
      worker_(options.worker),
      state_(std::move(state)),
      text_sampler_(std::move(text)),
      audio_sampler_(std::move(audio)),
      rng_(options.seed),
      seed_(options.seed),
      context_(options.context),
      prefill_chunk_(options.prefill_chunk) {}

// The bytes a session of `context` positions will hold, summed from the config before anything is allocated:
// its state (K/V caches, conv states, history and audio codes), and with a private worker the step scratch
// that grows with the context (attention scores, logits, activations). Checked against the memory budget, so
// a context the machine cannot hold is refused with the sizes instead of failing an allocation halfway.
Status CheckSessionBudget(const Lfm25AudioModel& model, const SessionOptions& o) {
  const Lfm2Config& c = model.config().lfm;
  const Lfm2Stack& stack = model.backbone().stack();
  const AttentionShape a = stack.attention_shape();
  const double H = c.hidden_size, KV = static_cast<double>(a.kv_dim()),
               rows = static_cast<double>(o.prefill_chunk);
  const double ctx = static_cast<double>(o.context), f = sizeof(float);
  double kv = 0, conv = 0;
  for (LayerKind k : c.layers) {
    if (k == LayerKind::kConv) {
      conv += (c.conv_kernel - 1) * H * f;
    } else {
      const double capacity = k == LayerKind::kSlidingAttention ? c.sliding_window - 1 + rows : ctx;
      kv += 2 * capacity * KV * f;
    }
  }
  // Per position: its (modality, token) entry, up to a frame of audio codes out, up to a row of encoder
  // embeddings in.
  const double history = ctx * (2 * sizeof(int32_t) + model.config().codebooks * f + H * f);
  double scratch = 0;
  if (o.worker == nullptr) {
    const double keys = std::max(ctx, c.sliding_window + rows);
    const double Q = static_cast<double>(a.q_dim()), F = c.ffn_dim;
    scratch = (rows * (2 * H + std::max({3 * H, Q, F}) + std::max({H, Q, F}) + 2 * KV + a.head_dim) +
               keys * o.threads + rows * H + 2 * H + model.backbone().vocab()) *
              f;
  }
  const double total = kv + conv + history + scratch;
  const size_t limit = MemoryBudgetBytes();
  if (total <= static_cast<double>(limit)) return Status::Ok();
  return OutOfRange(StrFormat(
      "a conversation of %zu positions needs %s (K/V caches %s, conv states %s, history %s, step scratch "
      "%s), "
      "more than the memory limit of %s (the machine's memory, or LFMVOX_MEMORY_LIMIT); lower the context "
      "(ConversationOptions::context, --context N)",
      o.context, FormatBytes(total).c_str(), FormatBytes(kv).c_str(), FormatBytes(conv).c_str(),
      FormatBytes(history).c_str(), FormatBytes(scratch).c_str(),
      FormatBytes(static_cast<double>(limit)).c_str()));
}

Result<std::unique_ptr<Lfm25Session>> Lfm25Session::Create(const Lfm25AudioModel& model,
                                                           const SessionOptions& options) {
  const Lfm2Config& c = model.config().lfm;
  if (options.context < 1 || options.context > static_cast<size_t>(c.max_positions)) {
    return InvalidArgument(StrFormat("context must be in [1, %d] positions", c.max_positions));
  }
  if (options.prefill_chunk < 1 || options.prefill_chunk > 4096) {
    return InvalidArgument("prefill_chunk must be in [1, 4096]");
  }
  LFM_RETURN_IF_ERROR(CheckSessionBudget(model, options));
  SessionOptions o = options;
  if (o.worker == nullptr) {
    LFM_ASSIGN_OR_RETURN(std::unique_ptr<Lfm25Worker> w,
                         Lfm25Worker::Create(model, {.max_batch = 1,
                                                     .max_rows = options.prefill_chunk,
                                                     .max_context = options.context,
                                                     .threads = options.threads,
                                                     .max_clip_seconds = options.max_clip_seconds}));
    o.worker = std::move(w);
  } else if (&o.worker->model_ != &model || o.worker->options().max_context < o.context) {
    return InvalidArgument("the shared worker was made for another model or a shorter context");
  }
  LFM_ASSIGN_OR_RETURN(Lfm2State state,
                       Lfm2State::Create(model.backbone().stack(), options.prefill_chunk, options.context));
  LFM_ASSIGN_OR_RETURN(
      Sampler text, Sampler::Create(SamplingParams::Greedy(), static_cast<size_t>(model.backbone().vocab())));
  LFM_ASSIGN_OR_RETURN(Sampler audio, Sampler::Create(SamplingParams::Greedy(),
                                                      static_cast<size_t>(model.backbone().audio_vocab())));
  auto s = std::unique_ptr<Lfm25Session>(
      new Lfm25Session(model, std::move(state), std::move(text), std::move(audio), o));
  s->frame_.resize(static_cast<size_t>(model.config().codebooks));
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
  TakeCancel();
  if (!model_.has_encoder()) return NotFound(model_.speech_in_missing());
  Lfm25Worker& w = *worker_;
  const auto t0 = std::chrono::steady_clock::now();
  LFM_RETURN_IF_ERROR(w.mel_->ComputeFromAudio(audio, &w.features_));
  const size_t F = w.features_.frames;
  if (F > w.enc_->max_frames()) {
    return OutOfRange(
        StrFormat("the clip has %zu mel frames (%.1f s); this session takes clips of up to %zu "
                  "(raise max_clip_seconds)",
                  F, static_cast<double>(audio.frames()) / audio.sample_rate, w.enc_->max_frames()));
  }
  const size_t E = ConformerConfig::SubsampledFrames(F);  // = mel2emb_len(F) = ceil(F / 8)
  LFM_RETURN_IF_ERROR(CheckRoom(E));
  if (sink)
    sink->Record("mel", w.features_.mel.data(), static_cast<size_t>(model_.mel_config().n_mels), F, F);
  const size_t H = static_cast<size_t>(model_.config().lfm.hidden_size);
  LFM_RETURN_IF_ERROR(
      model_.encoder().Encode(w.features_.mel.data(), F, w.clip_.data(), *w.enc_, team, sink, &cancel_));
  timings_.encoder_ms += MsSince(t0);
  return AppendAudioIn({w.clip_.data(), E * H});
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
  TakeCancel();
  if (history_.empty()) return InvalidArgument("the conversation is empty; append a prompt first");
  LFM_RETURN_IF_ERROR(Feed(history_.size(), team, sink));
  return static_cast<const float*>(worker_->h_.data());
}

Status Lfm25Session::PrefillAhead(ThreadTeam& team) {
  TakeCancel();
  if (gen_.active) return InvalidArgument("the conversation is generating; prefill before or after it");
  return history_.size() > cached_ + 1 ? Feed(history_.size() - 1, team, nullptr) : Status::Ok();
}

Status Lfm25Session::Feed(size_t end, ThreadTeam& team, TraceSink* sink) {
  Lfm25Worker& w = *worker_;
  const size_t H = static_cast<size_t>(model_.config().lfm.hidden_size);
  const Lfm2Stack& stack = model_.backbone().stack();
  float* x = w.x_.data();  // [n, H]
  while (cached_ < end) {
    if (TakeCancel()) return Cancelled("the prefill was cancelled");
    const size_t n = std::min({state_.max_rows(), w.options_.max_rows, end - cached_});
    for (size_t r = 0; r < n; ++r) LFM_RETURN_IF_ERROR(Embed(history_[cached_ + r], x + r * H));
    if (sink) sink->Record("in_emb", x, n, H, H);
    const StageTimer timer(w.prefill_mode_, team, static_cast<double>(n));  // parallel or inline, by measure
    LFM_RETURN_IF_ERROR(Lfm2Forward(stack, state_, x, n, w.backbone_, team, sink));
    if (sink) {  // every row's final norm, for parity with last_hidden traces
      Lfm2FinalNorm(stack, x, n, x);
      sink->Record("last_hidden", x, n, H, H);
    } else {
      Lfm2FinalNorm(stack, x + (n - 1) * H, 1, x + (n - 1) * H);
    }
    std::copy_n(x + (n - 1) * H, H, w.h_.data());
    cached_ += n;
  }
  return Status::Ok();
}

Status Lfm25Session::Truncate(size_t positions) {
  if (gen_.active) return InvalidArgument("Truncate while generating; cancel or finish the generation first");
  if (positions > history_.size()) {
    return OutOfRange(StrFormat("cannot keep %zu positions of a history of %zu", positions, history_.size()));
  }
  // The audio tables keep only what the kept positions refer to (they are appended in order).
  size_t frames = 0, rows = 0;
  for (size_t i = 0; i < positions; ++i) {
    if (history_[i].modality == Modality::kAudioOut) frames = static_cast<size_t>(history_[i].token) + 1;
    if (history_[i].modality == Modality::kAudioIn) rows = static_cast<size_t>(history_[i].token) + 1;
  }
  history_.resize(positions);
  audio_out_.resize(frames * frame_.size());
  audio_in_.resize(rows * static_cast<size_t>(model_.config().lfm.hidden_size));
  if (cached_ > positions) {
    // Conv histories cannot be rolled back: rebuild the caches from the kept history.
    state_.Reset();
    cached_ = 0;
  }
  return Status::Ok();
}

Status Lfm25Session::DropPositions(size_t begin, size_t end) {
  if (gen_.active) return InvalidArgument("DropPositions while generating; finish the generation first");
  if (begin > end || end > history_.size()) {
    return OutOfRange(
        StrFormat("cannot drop positions [%zu, %zu) of a history of %zu", begin, end, history_.size()));
  }
  if (begin == end) return Status::Ok();
  // The kept positions' audio rows and frames, moved down in order (the tables are appended in order).
  const size_t C = frame_.size();
  const size_t H = static_cast<size_t>(model_.config().lfm.hidden_size);
  size_t frames = 0, rows = 0, kept = 0;
  for (size_t i = 0; i < history_.size(); ++i) {
    if (i >= begin && i < end) continue;
    Position p = history_[i];
    const size_t from = static_cast<size_t>(p.token);
    if (p.modality == Modality::kAudioOut) {
      std::copy_n(audio_out_.begin() + static_cast<std::ptrdiff_t>(from * C), C,
                  audio_out_.begin() + static_cast<std::ptrdiff_t>(frames * C));
      p.token = static_cast<int32_t>(frames++);
    } else if (p.modality == Modality::kAudioIn) {
      std::copy_n(audio_in_.begin() + static_cast<std::ptrdiff_t>(from * H), H,
                  audio_in_.begin() + static_cast<std::ptrdiff_t>(rows * H));
      p.token = static_cast<int32_t>(rows++);
    }
    history_[kept++] = p;
  }
  history_.resize(kept);
  audio_out_.resize(frames * C);
  audio_in_.resize(rows * H);
  state_.Reset();  // the kept history is re-prefilled on the next step
  cached_ = 0;
  return Status::Ok();
}

size_t Lfm25Session::state_bytes() const {
  return history_.capacity() * sizeof(Position) +
         (audio_out_.capacity() + frame_.capacity()) * sizeof(int32_t) +
         audio_in_.capacity() * sizeof(float) + state_.state_bytes();
}

Status Lfm25Session::DropTrailingAudioOut(size_t frames) {
  size_t seen = 0, cut = history_.size();
  for (size_t i = history_.size(); i-- > 0 && seen < frames;) {
    if (history_[i].modality == Modality::kAudioOut) {
      ++seen;
      cut = i;
    }
  }
  if (seen < frames) {
    return OutOfRange(StrFormat("the history holds %zu audio-out frames; cannot drop %zu", seen, frames));
  }
  return Truncate(frames == 0 ? history_.size() : cut);
}

// --- Generation ---------------------------------------------------------------

Status Lfm25Session::BeginGeneration(const GenerationOptions& o, GenerationSink& sink) {
  if (o.max_new_tokens < 0) return InvalidArgument("max_new_tokens must be >= 0");
  if (gen_.active) return InvalidArgument("this session is already generating");
  // Interleaved turns speak; a sequential one finds out when it samples <|audio_start|> (OnText).
  if (o.mode == GenerationMode::kInterleaved && !model_.has_depthformer())
    return NotFound(model_.speech_out_missing());
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
  TakeCancel();
  gen_ = Generation{};
  gen_.active = true;
  gen_.mode = o.mode;
  gen_.max_new = o.max_new_tokens;
  gen_.left = model_.config().interleaved_n_text;
  gen_.sink = &sink;
  // A sequential turn whose prompt already ends in <|audio_start|> (the
  // model's own switch to speech, given by the caller) continues with audio,
  // as it would after generating that token.
  if (o.mode == GenerationMode::kSequential && !history_.empty() &&
      history_.back().modality == Modality::kText && history_.back().token == model_.special().audio_start) {
    if (!model_.has_depthformer()) {
      gen_.active = false;
      return NotFound(model_.speech_out_missing());
    }
    gen_.modality = Modality::kAudioOut;
  }
  return Status::Ok();
}

bool Lfm25Session::StopIfCancelled() {
  if (!TakeCancel()) return false;
  gen_.result.cancelled = true;
  Finish(Status::Ok());
  return true;
}

void Lfm25Session::Finish(Status status) {
  gen_.active = false;
  if (gen_.status.ok()) gen_.status = std::move(status);
}

// The official loop's text branch (liquid-audio `generate_sequential` / `_interleaved`).
void Lfm25Session::OnText(int32_t id) {
  const SpecialTokens& sp = model_.special();
  const bool interleaved = gen_.mode == GenerationMode::kInterleaved;
  if (id == sp.im_end && interleaved) {  // interleaved turns end without yielding <|im_end|>
    gen_.result.ended = true;
    return Finish(Status::Ok());
  }
  history_.push_back({Modality::kText, id});
  ++gen_.result.text_tokens;
  if (Status s = gen_.sink->OnText(id); !s.ok()) return Finish(std::move(s));
  if (id == sp.im_end) {
    gen_.result.ended = true;
    return Finish(Status::Ok());
  }
  if (interleaved) {
    if (id == sp.text_end) gen_.text_done = true;
    if (gen_.left == 0 || gen_.text_done) {
      gen_.modality = Modality::kAudioOut;
      gen_.left = model_.config().interleaved_n_audio;
    }
  } else if (id == sp.audio_start) {
    if (!model_.has_depthformer()) {
      return Finish(
          NotFound("the model began to speak (<|audio_start|>), but " + model_.speech_out_missing()));
    }
    gen_.modality = Modality::kAudioOut;
  }
}

// The audio branch, for the frame just sampled into frame_.
void Lfm25Session::OnFrame() {
  const SpecialTokens& sp = model_.special();
  if (gen_.mode == GenerationMode::kInterleaved && gen_.left == 0 && !gen_.text_done) {
    gen_.modality = Modality::kText;
    gen_.left = model_.config().interleaved_n_text;
  }
  const bool eoa = frame_[0] == sp.end_of_audio;
  if (eoa) {  // the official loop turns the whole frame into end-of-audio and goes back to text
    std::fill(frame_.begin(), frame_.end(), sp.end_of_audio);
    gen_.modality = Modality::kText;
  }
  (void)AppendFrame(frame_);
  ++gen_.result.audio_frames;
  if (Status s = gen_.sink->OnAudioFrame(frame_, eoa); !s.ok()) Finish(std::move(s));
}

Result<GenerationResult> Lfm25Session::Generate(const GenerationOptions& o, GenerationSink& sink,
                                                ThreadTeam& team) {
  LFM_RETURN_IF_ERROR(BeginGeneration(o, sink));
  Lfm25Session* self[1] = {this};
  while (gen_.active) LFM_RETURN_IF_ERROR(StepSessions(self, *worker_, team));
  LFM_RETURN_IF_ERROR(gen_.status);
  return gen_.result;
}

Status StepSessions(std::span<Lfm25Session* const> sessions, Lfm25Worker& w, ThreadTeam& team) {
  if (sessions.size() > w.options_.max_batch) {
    return OutOfRange(StrFormat("%zu sessions in one step exceed the worker's batch of %zu", sessions.size(),
                                w.options_.max_batch));
  }
  for (size_t i = 0; i < sessions.size(); ++i) {
    if (&sessions[i]->model_ != &w.model_) return InvalidArgument("a session of another model in this step");
    if (sessions[i]->context_ > w.options_.max_context) {
      return InvalidArgument("a session's context is longer than this worker was sized for");
    }
    for (size_t j = 0; j < i; ++j) {
      if (sessions[j] == sessions[i]) return InvalidArgument("a session appears twice in one step");
    }
  }
  const Lfm25AudioModel& model = w.model_;
  const Lfm2Stack& stack = model.backbone().stack();
  const size_t H = static_cast<size_t>(model.config().lfm.hidden_size);

  // 1. Who steps: the loop's own stopping rules, checked before the item.
  w.feeding_.clear();
  for (Lfm25Session* s : sessions) {
    Lfm25Session::Generation& g = s->gen_;
    if (!g.active) continue;
    if (s->StopIfCancelled()) continue;
    if (g.steps >= g.max_new) {
      s->Finish(Status::Ok());
    } else if (s->history_.size() + 1 > s->context_) {
      // The item produced now must fit, and so must its feed on the next step.
      g.result.context_full = true;
      s->Finish(Status::Ok());
    } else if (s->history_.empty()) {
      s->Finish(InvalidArgument("the conversation is empty; append a prompt first"));
    } else {
      ++g.steps;
      --g.left;
      w.feeding_.push_back(s);
    }
  }
  if (w.feeding_.empty()) return Status::Ok();

  // 2. Feed every uncached position, in passes that mix sessions (a prompt's prefill next to
  //    another session's one-row decode); a session's slot s takes row h_[s] once it is fed.
  const size_t B = w.feeding_.size();
  float* x = w.x_.data();  // [rows, H]
  for (bool more = true; more;) {
    more = false;
    w.states_.clear();
    w.rows_.clear();
    w.slot_.clear();
    size_t total = 0;
    for (size_t i = 0; i < B; ++i) {
      Lfm25Session* s = w.feeding_[i];
      const size_t left = s->history_.size() - s->cached_;
      if (left == 0 || !s->gen_.active) continue;
      if (s->StopIfCancelled()) continue;  // honoured between the passes of a long prefill too
      const size_t n = std::min({left, s->state_.max_rows(), w.options_.max_rows - total});
      if (n == 0) {
        more = true;  // no room left in this pass
        continue;
      }
      for (size_t r = 0; r < n; ++r) {
        if (Status st = s->Embed(s->history_[s->cached_ + r], x + (total + r) * H); !st.ok()) {
          s->Finish(std::move(st));
          break;
        }
      }
      if (!s->gen_.active) continue;
      w.states_.push_back(&s->state_);
      w.rows_.push_back(n);
      w.slot_.push_back(i);
      total += n;
      if (n < left) more = true;
    }
    if (total == 0) break;
    const auto t0 = std::chrono::steady_clock::now();
    {
      const StageTimer timer(w.step_mode_, team, static_cast<double>(total));  // parallel or inline
      LFM_RETURN_IF_ERROR(Lfm2Forward(stack, w.states_, w.rows_, x, w.backbone_, team, nullptr));
    }
    const double pass_ms = MsSince(t0);
    size_t row = 0;
    for (size_t j = 0; j < w.states_.size(); ++j) {
      Lfm25Session* s = w.feeding_[w.slot_[j]];
      ChargeBackbonePass(s->timings_, w.rows_[j], pass_ms);
      row += w.rows_[j];
      s->cached_ += w.rows_[j];
      if (s->cached_ == s->history_.size()) {  // fed: its last row is the state to sample from
        Lfm2FinalNorm(stack, x + (row - 1) * H, 1, w.h_.data() + w.slot_[j] * H);
      }
    }
  }

  // 3. Text sessions: one head pass over their hidden states (gathered), then each samples with
  //    its own sampler and RNG.
  w.text_.clear();
  w.audio_.clear();
  w.requests_.clear();
  for (size_t i = 0; i < B; ++i) {
    Lfm25Session* s = w.feeding_[i];
    if (!s->gen_.active) continue;
    if (s->gen_.modality == Modality::kText) {
      std::copy_n(w.h_.data() + i * H, H, w.ht_.data() + w.text_.size() * H);
      w.text_.push_back(s);
    } else {
      w.audio_.push_back(s);
      w.requests_.push_back({w.h_.data() + i * H, &s->audio_sampler_, &s->rng_, s->frame_.data()});
    }
  }
  const size_t V = static_cast<size_t>(model.backbone().vocab());
  if (!w.text_.empty()) {
    const auto t0 = std::chrono::steady_clock::now();
    model.backbone().TextLogits(w.ht_.data(), w.text_.size(), w.logits_.data(), team);
    const double head_ms = MsSince(t0);
    for (Lfm25Session* s : w.text_) s->timings_.backbone_step_ms += head_ms;
  }
  for (size_t t = 0; t < w.text_.size(); ++t) {
    Lfm25Session* s = w.text_[t];
    Result<int32_t> id = s->text_sampler_.Sample({w.logits_.data() + t * V, V}, s->rng_);
    if (!id.ok()) {
      s->Finish(id.status());
      continue;
    }
    s->OnText(*id);
  }

  // 4. Audio sessions: one depthformer pass for all their frames.
  if (!w.audio_.empty()) {
    const auto t0 = std::chrono::steady_clock::now();
    if (Status st = SampleAudioFrames(model.depthformer(), w.requests_, *w.depth_, team, nullptr); !st.ok()) {
      for (Lfm25Session* s : w.audio_) s->Finish(st);
      return Status::Ok();
    }
    const double depth_ms = MsSince(t0);
    for (Lfm25Session* s : w.audio_) {
      s->timings_.depth_ms += depth_ms;
      ++s->timings_.depth_frames;
    }
    for (Lfm25Session* s : w.audio_) s->OnFrame();
  }
  return Status::Ok();
}

void Lfm25Session::Reset() {
  history_.clear();
  audio_out_.clear();
  audio_in_.clear();
  cached_ = 0;
  state_.Reset();
  state_.StopProbe();
  rng_ = Rng(seed_);
  gen_ = Generation{};
}

}  // namespace lfmvox
