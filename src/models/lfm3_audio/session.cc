#include "models/lfm3_audio/session.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/memory_budget.h"
#include "blocks/weights.h"
#include "io/json_config.h"
#include "threading/thread_team.h"

namespace lfmvox {

namespace fs = std::filesystem;

// --- Model --------------------------------------------------------------------

Result<std::unique_ptr<Lfm3AudioModel>> Lfm3AudioModel::Load(const std::string& dir, bool check_weights) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return NotFound(dir + " is not a directory (pass the model's folder)");
  const std::string cfg_path = dir + "/config.json", where = "loading " + dir;
  LFM_ASSIGN_OR_RETURN(nlohmann::json cfg, ReadJsonFile(cfg_path));
  auto m = std::unique_ptr<Lfm3AudioModel>(new Lfm3AudioModel());
  LFM_ASSIGN_OR_RETURN(m->config_, Lfm3Config::FromJson(cfg, cfg_path));
  if (!m->config_.has_backbone) {
    return Unimplemented(
        cfg_path +
        " holds LFM3-Audio's speech output only (no \"lfm\" backbone section): lfmvox decodes "
        "its speech (DetokenizerModel, `lfmvox detokenize`), but a model to converse with "
        "needs the backbone too");
  }
  LFM_ASSIGN_OR_RETURN(m->sampling_, Lfm3AudioSampling::FromJson(cfg, cfg_path));
  LFM_ASSIGN_OR_RETURN(Checkpoint ck, Checkpoint::Open(dir));
  if (check_weights) LFM_RETURN_IF_ERROR(CheckWeightsFinite(ck).WithContext(where));
  m->ckpt_.emplace(std::move(ck));
  {
    Result<Lfm3Backbone> b = Lfm3Backbone::Load(*m->ckpt_, m->config_.backbone);
    if (!b.ok()) return b.status().WithContext(where);
    m->backbone_ = std::move(b).value();
  }
  {
    Result<Lfm3DepthDecoder> d = Lfm3DepthDecoder::Load(*m->ckpt_, m->config_);
    if (!d.ok()) return d.status().WithContext(where);
    m->depth_ = std::move(d).value();
  }
  {
    LFM_ASSIGN_OR_RETURN(Checkpoint cck, Checkpoint::Open(dir));
    Result<std::unique_ptr<Lfm3Codec>> c = Lfm3Codec::Load(m->config_, std::move(cck), dir);
    if (!c.ok()) return c.status().WithContext(where);
    m->codec_ = std::move(c).value();
  }
  const std::string tok_path = dir + "/tokenizer.json";
  {
    Result<Tokenizer> t = Tokenizer::LoadFile(tok_path);
    if (!t.ok()) return t.status().WithContext(where);
    m->tokenizer_.emplace(std::move(t).value());
  }
  // The turn's control tokens by name; the two the interleaved turn needs may be absent (then it is
  // never entered), the chat template's and <|audio_start|> may not.
  auto id = [&](const char* name) { return m->tokenizer_->TokenId(name).value_or(-1); };
  Lfm3TurnTokens& t = m->tokens_;
  t.audio_start = id("<|audio_start|>");
  t.mixed_start = id("<|mixed_start|>");
  t.text_end = id("<|text_end|>");
  t.im_end = id("<|im_end|>");
  t.eos = m->config_.backbone.eos_token_id;
  for (const char* name : {"<|im_start|>", "<|im_end|>", "<|audio_start|>"}) {
    if (id(name) < 0) {
      return NotFound(
          StrFormat("%s has no %s token; is it the LFM3-Audio tokenizer?", tok_path.c_str(), name));
    }
  }
  const int V = m->backbone_.vocab();
  for (int32_t x : {id("<|im_start|>"), t.audio_start, t.mixed_start, t.text_end, t.im_end}) {
    if (x >= V) {
      return InvalidArgument(StrFormat(
          "%s: special token id %d is beyond the backbone's %d embeddings; the tokenizer does not belong to "
          "these weights",
          where.c_str(), x, V));
    }
  }
  if (m->depth_.text_hidden() != m->backbone_.hidden()) {
    return InvalidArgument(StrFormat("%s: the depth decoder reads %d-wide states but the backbone is %d wide",
                                     where.c_str(), m->depth_.text_hidden(), m->backbone_.hidden()));
  }
  return m;
}

// --- Worker -------------------------------------------------------------------

Lfm3Worker::Lfm3Worker(const Lfm3AudioModel& model, const Lfm3WorkerOptions& options, Lfm3Scratch backbone,
                       Lfm3DepthScratch depth)
    : model_(model), options_(options), backbone_(std::move(backbone)), depth_(std::move(depth)) {}

Result<std::unique_ptr<Lfm3Worker>> Lfm3Worker::Create(const Lfm3AudioModel& model,
                                                       const Lfm3WorkerOptions& o) {
  const Lfm3BackboneConfig& c = model.config().backbone;
  if (o.max_batch < 1 || o.max_batch > 1024) return InvalidArgument("max_batch must be in [1, 1024]");
  if (o.max_rows < 1 || o.max_rows > 4096) return InvalidArgument("max_rows must be in [1, 4096]");
  if (o.max_context < 1 || o.max_context > static_cast<size_t>(c.max_positions)) {
    return InvalidArgument(StrFormat("the context must be in [1, %d] positions", c.max_positions));
  }
  if (o.threads < 1 || o.threads > kMaxThreads) {
    return InvalidArgument(StrFormat("threads must be in [1, %d]", kMaxThreads));
  }
  const Lfm3Stack& stack = model.backbone().stack();
  // A query sees at most the context (full causal layers) or its window's carried rows and the call's.
  size_t max_keys = stack.has_full_causal() ? o.max_context : 1;
  if (c.sliding_window > 0)
    max_keys = std::max(max_keys, static_cast<size_t>(c.sliding_window) - 1 + o.max_rows);
  LFM_ASSIGN_OR_RETURN(Lfm3Scratch backbone, Lfm3Scratch::Create(stack, o.max_rows, max_keys, o.threads));
  LFM_ASSIGN_OR_RETURN(Lfm3DepthScratch depth,
                       Lfm3DepthScratch::Create(model.depth(), o.max_batch, o.threads));
  auto w = std::unique_ptr<Lfm3Worker>(new Lfm3Worker(model, o, std::move(backbone), std::move(depth)));
  const size_t H = static_cast<size_t>(model.backbone().hidden()), B = o.max_batch;
  w->x_.Reset(o.max_rows * H);
  w->h_.Reset(B * H);
  w->ht_.Reset(B * H);
  w->logits_.Reset(B * static_cast<size_t>(model.backbone().vocab()));
  for (auto* v : {&w->feeding_, &w->text_, &w->audio_}) v->reserve(B);
  w->states_.reserve(B);
  w->rows_.reserve(B);
  w->slot_.reserve(B);
  w->audio_h_.reserve(B);
  w->audio_states_.reserve(B);
  return w;
}

// --- Session ------------------------------------------------------------------

Lfm3Session::Lfm3Session(const Lfm3AudioModel& model, Lfm3State state, Lfm3DepthState depth, Sampler text,
                         const Lfm3SessionOptions& options)
    : model_(model),
      state_(std::move(state)),
      depth_(std::move(depth)),
      text_sampler_(std::move(text)),
      text_rng_(options.seed),
      turn_(model.tokens(), model.config().interleaved_n_text, model.config().interleaved_n_audio),
      seed_(options.seed),
      context_(options.context),
      prefill_chunk_(options.prefill_chunk) {}

Result<std::unique_ptr<Lfm3Session>> Lfm3Session::Create(const Lfm3AudioModel& model,
                                                         const Lfm3SessionOptions& o) {
  const int max_positions = model.config().backbone.max_positions;
  if (o.context < 1 || o.context > static_cast<size_t>(max_positions)) {
    return InvalidArgument(StrFormat(
        "context must be in [1, %d] positions (config.json's max_position_embeddings)", max_positions));
  }
  if (o.prefill_chunk < 1 || o.prefill_chunk > 4096)
    return InvalidArgument("prefill_chunk must be in [1, 4096]");
  const size_t rows = std::min(o.prefill_chunk, o.context);
  // The conversation's bytes, from the config, before anything is allocated, so a context the machine cannot
  // hold is refused up front: K/V caches and conv states, and the history of positions and audio codes
  // reserved below.
  const double state_bytes = Lfm3State::PlannedBytes(model.backbone().stack(), rows, o.context);
  const double history_bytes =
      static_cast<double>(o.context) *
      (sizeof(Position) + static_cast<double>(model.config().n_codebooks) * sizeof(int32_t));
  LFM_RETURN_IF_ERROR(CheckMemoryBudget(
      state_bytes + history_bytes, StrFormat("a conversation of %zu positions", o.context),
      StrFormat("K/V caches and conv states %s, history %s; lower the context: ConversationOptions::context, "
                "--context N",
                FormatBytes(state_bytes).c_str(), FormatBytes(history_bytes).c_str())));
  LFM_ASSIGN_OR_RETURN(Lfm3State state, Lfm3State::Create(model.backbone().stack(), rows, o.context));
  LFM_ASSIGN_OR_RETURN(Lfm3DepthState depth, Lfm3DepthState::Create(model.depth(), model.sampling(), o.seed));
  LFM_ASSIGN_OR_RETURN(
      Sampler text, Sampler::Create(SamplingParams::Greedy(), static_cast<size_t>(model.backbone().vocab())));
  auto s = std::unique_ptr<Lfm3Session>(
      new Lfm3Session(model, std::move(state), std::move(depth), std::move(text), o));
  // The history never outgrows the context, so it never reallocates while generating.
  s->history_.reserve(o.context);
  s->frames_.reserve(o.context * static_cast<size_t>(model.config().n_codebooks));
  return s;
}

std::span<const int32_t> Lfm3Session::frame_codes(size_t i) const {
  const size_t C = static_cast<size_t>(model_.config().n_codebooks);
  return {frames_.data() + static_cast<size_t>(history_[i].index) * C, C};
}

bool Lfm3Session::end_of_audio_frame(size_t i) const {
  if (!history_[i].frame) return false;
  const std::span<const int32_t> c = frame_codes(i);
  return std::find(c.begin(), c.end(), model_.depth().eos()) != c.end();
}

Status Lfm3Session::CheckRoom(size_t more) const {
  if (history_.size() + more > context_) {
    return OutOfRange(
        StrFormat("the conversation needs %zu positions but the context holds %zu; start a new "
                  "conversation or create it with a larger context",
                  history_.size() + more, context_));
  }
  return Status::Ok();
}

Status Lfm3Session::AppendTokens(std::span<const int32_t> ids) {
  if (gen_.active) return InvalidArgument("the conversation is generating; finish the generation first");
  LFM_RETURN_IF_ERROR(CheckRoom(ids.size()));
  const int V = model_.backbone().vocab();
  for (int32_t id : ids) {
    if (id < 0 || id >= V) {
      return InvalidArgument(StrFormat("token id %d is outside the model's vocabulary [0, %d)", id, V));
    }
  }
  for (int32_t id : ids) history_.push_back({false, id});
  return Status::Ok();
}

Status Lfm3Session::AppendText(std::string_view utf8) {
  LFM_ASSIGN_OR_RETURN(std::vector<int32_t> ids, model_.tokenizer().Encode(utf8));
  return AppendTokens(ids);
}

void Lfm3Session::AppendFrame(std::span<const int32_t> codes) {
  const size_t C = static_cast<size_t>(model_.config().n_codebooks);
  history_.push_back({true, static_cast<int32_t>(frames_.size() / C)});
  frames_.insert(frames_.end(), codes.begin(), codes.end());
}

Status Lfm3Session::AppendAudioOut(std::span<const int32_t> frames) {
  if (gen_.active) return InvalidArgument("the conversation is generating; finish the generation first");
  const size_t C = static_cast<size_t>(model_.config().n_codebooks);
  if (frames.size() % C != 0) {
    return InvalidArgument(StrFormat("audio-out history holds %zu codes, not a multiple of the %zu codebooks",
                                     frames.size(), C));
  }
  LFM_RETURN_IF_ERROR(CheckRoom(frames.size() / C));
  const int V = model_.depth().codebook_size();
  for (int32_t c : frames) {
    if (c < 0 || c >= V) return InvalidArgument(StrFormat("audio code %d is outside [0, %d)", c, V));
  }
  for (size_t f = 0; f < frames.size(); f += C) AppendFrame(frames.subspan(f, C));
  return Status::Ok();
}

Status Lfm3Session::StartConversation() {
  const int32_t bos = model_.bos();
  return AppendTokens({&bos, 1});
}

Status Lfm3Session::StartTurn(std::string_view role) {
  return AppendText("<|im_start|>" + std::string(role) + "\n");
}

Status Lfm3Session::EndTurn() {
  // A turn that ended itself with <|im_end|> gets only the newline.
  const bool closed =
      !history_.empty() && !history_.back().frame && history_.back().index == model_.tokens().im_end;
  return AppendText(closed ? "\n" : "<|im_end|>\n");
}

Status Lfm3Session::AppendTtsPrompt(std::string_view task, std::string_view text) {
  if (history_.empty()) LFM_RETURN_IF_ERROR(StartConversation());
  LFM_RETURN_IF_ERROR(StartTurn("system"));
  LFM_RETURN_IF_ERROR(AppendText(task));
  LFM_RETURN_IF_ERROR(EndTurn());
  LFM_RETURN_IF_ERROR(StartTurn("user"));
  LFM_RETURN_IF_ERROR(AppendText(text));
  LFM_RETURN_IF_ERROR(EndTurn());
  LFM_RETURN_IF_ERROR(StartTurn("assistant"));
  const int32_t audio_start = model_.tokens().audio_start;
  return AppendTokens({&audio_start, 1});
}

Status Lfm3Session::Embed(const Position& p, float* out) const {
  if (!p.frame) return model_.backbone().EmbedToken(p.index, out);
  const size_t C = static_cast<size_t>(model_.config().n_codebooks);
  const std::span<const int32_t> codes{frames_.data() + static_cast<size_t>(p.index) * C, C};
  if (std::find(codes.begin(), codes.end(), model_.depth().eos()) != codes.end()) {
    model_.depth().EosRow(out);  // an end-of-audio frame feeds the all-EOS row, as the loop does
    return Status::Ok();
  }
  return model_.depth().FrameRow(codes, out);
}

Status Lfm3Session::Truncate(size_t positions) {
  if (gen_.active) return InvalidArgument("Truncate while generating; cancel or finish the generation first");
  if (positions > history_.size()) {
    return OutOfRange(StrFormat("cannot keep %zu positions of a history of %zu", positions, history_.size()));
  }
  size_t frames = 0;
  for (size_t i = 0; i < positions; ++i) {
    if (history_[i].frame) frames = static_cast<size_t>(history_[i].index) + 1;
  }
  history_.resize(positions);
  frames_.resize(frames * static_cast<size_t>(model_.config().n_codebooks));
  if (cached_ > positions) {
    // Conv histories cannot be rolled back: rebuild the caches from the kept history.
    state_.Reset();
    cached_ = 0;
  }
  return Status::Ok();
}

void Lfm3Session::Reset() {
  history_.clear();
  frames_.clear();
  cached_ = 0;
  state_.Reset();
  depth_.Reset(seed_);
  text_rng_ = Rng(seed_);
  gen_ = Generation{};
}

// --- Generation ---------------------------------------------------------------

Status Lfm3Session::BeginGeneration(const Lfm3GenerationOptions& o, Lfm3Sink& sink) {
  if (o.max_new < 0) return InvalidArgument("max_new_tokens must be >= 0");
  if (gen_.active) return InvalidArgument("this session is already generating");
  if (history_.empty()) return InvalidArgument("the conversation is empty; append a prompt first");
  const Lfm3TurnTokens& tok = model_.tokens();
  const bool ends_mixed = !history_.back().frame && history_.back().index == tok.mixed_start;
  if (o.interleaved && !ends_mixed && tok.mixed_start < 0) {
    return NotFound("the interleaved turn starts with <|mixed_start|>, which the tokenizer lacks");
  }
  // The slot rules from the input's last item: a token picks the mode; a speech frame (not the end of
  // audio) continues speech, as after <|audio_start|>.
  int32_t last = history_.back().frame ? -1 : history_.back().index;
  if (history_.back().frame && !end_of_audio_frame(history_.size() - 1)) last = tok.audio_start;
  if (o.interleaved) last = tok.mixed_start;
  Lfm3Turn turn = turn_;
  LFM_RETURN_IF_ERROR(turn.Start(last));
  if (o.interleaved && !ends_mixed) LFM_RETURN_IF_ERROR(CheckRoom(1));
  // Samplers are rebuilt only when the settings change (never per item).
  const SamplingParams& tp = text_sampler_.params();
  if (tp.temperature != o.text.temperature || tp.top_k != o.text.top_k ||
      tp.repetition_penalty != o.text.repetition_penalty || tp.penalty_window != o.text.penalty_window) {
    LFM_ASSIGN_OR_RETURN(text_sampler_, Sampler::Create(o.text, text_sampler_.max_vocab()));
  }
  LFM_RETURN_IF_ERROR(depth_.SetDraw(o.audio_temperature, o.audio_top_k));
  if (o.interleaved && !ends_mixed) history_.push_back({false, tok.mixed_start});
  turn_ = turn;
  TakeCancel();
  gen_ = Generation{};
  gen_.active = true;
  gen_.max_new = o.max_new;
  gen_.sink = &sink;
  return Status::Ok();
}

bool Lfm3Session::StopIfCancelled() {
  if (!TakeCancel()) return false;
  gen_.result.cancelled = true;
  Finish(Status::Ok());
  return true;
}

void Lfm3Session::Finish(Status status) {
  gen_.active = false;
  if (gen_.status.ok()) gen_.status = std::move(status);
}

void Lfm3Session::OnText(int32_t id) {
  Result<bool> end = turn_.OnToken(id);
  if (!end.ok()) return Finish(end.status());
  history_.push_back({false, id});  // an ending token too: the history closes the turn with it
  ++gen_.result.text_tokens;
  if (Status s = gen_.sink->OnText(id); !s.ok()) return Finish(std::move(s));
  if (*end) {
    gen_.result.ended = true;
    Finish(Status::Ok());
  }
}

void Lfm3Session::OnFrame() {
  const bool eoa = depth_.end_of_audio();
  turn_.OnFrame(eoa);
  AppendFrame(depth_.codes());
  ++gen_.result.audio_frames;
  if (Status s = gen_.sink->OnAudioFrame(depth_.codes(), eoa); !s.ok()) Finish(std::move(s));
}

Status Lfm3Session::FitsWorker(const Lfm3Worker& w) const {
  if (&w.model_ != &model_) return InvalidArgument("a session of another model than the worker's");
  if (context_ > w.options_.max_context || prefill_chunk_ > w.options_.max_rows) {
    return InvalidArgument("a session's context or prefill chunk is larger than this worker was sized for");
  }
  return Status::Ok();
}

Status Lfm3Session::PrefillAhead(Lfm3Worker& w, ThreadTeam& team) {
  TakeCancel();
  if (gen_.active) return InvalidArgument("the conversation is generating; prefill before or after it");
  LFM_RETURN_IF_ERROR(FitsWorker(w));
  const Lfm3Stack& stack = model_.backbone().stack();
  const size_t H = static_cast<size_t>(model_.backbone().hidden());
  float* x = w.x_.data();
  for (const size_t end = history_.empty() ? 0 : history_.size() - 1; cached_ < end;) {
    if (TakeCancel()) return Cancelled("the prefill was cancelled");
    const size_t n = std::min({state_.max_rows(), w.options_.max_rows, end - cached_});
    for (size_t r = 0; r < n; ++r) LFM_RETURN_IF_ERROR(Embed(history_[cached_ + r], x + r * H));
    LFM_RETURN_IF_ERROR(Lfm3Forward(stack, state_, x, n, w.backbone_, team, nullptr));
    cached_ += n;
  }
  return Status::Ok();
}

Status StepLfm3Sessions(std::span<Lfm3Session* const> sessions, Lfm3Worker& w, ThreadTeam& team) {
  if (sessions.size() > w.options_.max_batch) {
    return OutOfRange(StrFormat("%zu sessions in one step exceed the worker's batch of %zu", sessions.size(),
                                w.options_.max_batch));
  }
  for (size_t i = 0; i < sessions.size(); ++i) {
    LFM_RETURN_IF_ERROR(sessions[i]->FitsWorker(w));
    for (size_t j = 0; j < i; ++j) {
      if (sessions[j] == sessions[i]) return InvalidArgument("a session appears twice in one step");
    }
  }
  const Lfm3AudioModel& model = w.model_;
  const Lfm3Stack& stack = model.backbone().stack();
  const size_t H = static_cast<size_t>(model.backbone().hidden());

  // 1. Who steps: the loop's own stopping rules, checked before the slot.
  w.feeding_.clear();
  for (Lfm3Session* s : sessions) {
    Lfm3Session::Generation& g = s->gen_;
    if (!g.active) continue;
    if (s->StopIfCancelled()) continue;
    if (g.steps >= g.max_new) {
      s->Finish(Status::Ok());
    } else if (s->history_.size() + 1 > s->context_) {
      g.result.context_full = true;  // the item produced now must fit, and so must its feed next step
      s->Finish(Status::Ok());
    } else {
      ++g.steps;
      w.feeding_.push_back(s);
    }
  }
  if (w.feeding_.empty()) return Status::Ok();

  // 2. Feed every uncached position, in passes that mix sessions (a prompt's prefill next to another
  //    session's one-row decode); session i's state lands in h_[i] once it is fed.
  const size_t B = w.feeding_.size();
  float* x = w.x_.data();
  for (bool more = true; more;) {
    more = false;
    w.states_.clear();
    w.rows_.clear();
    w.slot_.clear();
    size_t total = 0;
    for (size_t i = 0; i < B; ++i) {
      Lfm3Session* s = w.feeding_[i];
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
    LFM_RETURN_IF_ERROR(Lfm3Forward(stack, w.states_, w.rows_, x, w.backbone_, team, nullptr));
    const double pass_ms = MsSince(t0);
    size_t row = 0;
    for (size_t j = 0; j < w.states_.size(); ++j) {
      Lfm3Session* s = w.feeding_[w.slot_[j]];
      ChargeBackbonePass(s->timings_, w.rows_[j], pass_ms);
      row += w.rows_[j];
      s->cached_ += w.rows_[j];
      if (s->cached_ == s->history_.size()) {  // fed: its last row is the state the slot reads
        Lfm3FinalNorm(stack, x + (row - 1) * H, 1, w.h_.data() + w.slot_[j] * H);
      }
    }
  }

  // 3. Text slots: one head pass over their states (gathered), then each draws with its own sampler.
  w.text_.clear();
  w.audio_.clear();
  w.audio_h_.clear();
  w.audio_states_.clear();
  for (size_t i = 0; i < B; ++i) {
    Lfm3Session* s = w.feeding_[i];
    if (!s->gen_.active) continue;
    if (s->turn_.audio_slot()) {
      w.audio_.push_back(s);
      w.audio_h_.push_back(w.h_.data() + i * H);
      w.audio_states_.push_back(&s->depth_);
    } else {
      std::copy_n(w.h_.data() + i * H, H, w.ht_.data() + w.text_.size() * H);
      w.text_.push_back(s);
    }
  }
  const size_t V = static_cast<size_t>(model.backbone().vocab());
  if (!w.text_.empty()) {
    const auto t0 = std::chrono::steady_clock::now();
    model.backbone().TextLogits(w.ht_.data(), w.text_.size(), w.logits_.data(), team);
    const double head_ms = MsSince(t0);
    for (Lfm3Session* s : w.text_) s->timings_.backbone_step_ms += head_ms;
  }
  for (size_t t = 0; t < w.text_.size(); ++t) {
    Lfm3Session* s = w.text_[t];
    Result<int32_t> id = s->text_sampler_.Sample({w.logits_.data() + t * V, V}, s->text_rng_);
    if (!id.ok()) {
      s->Finish(id.status());
      continue;
    }
    s->OnText(*id);
  }

  // 4. Audio slots: one depth-decoder call for all their frames.
  if (!w.audio_.empty()) {
    const auto t0 = std::chrono::steady_clock::now();
    if (Status st = DecodeFrames(model.depth(), w.audio_h_, w.audio_states_, w.depth_, team, nullptr);
        !st.ok()) {
      for (Lfm3Session* s : w.audio_) s->Finish(st);
      return Status::Ok();
    }
    const double depth_ms = MsSince(t0);
    for (Lfm3Session* s : w.audio_) {
      s->timings_.depth_ms += depth_ms;
      ++s->timings_.depth_frames;
    }
    for (Lfm3Session* s : w.audio_) s->OnFrame();
  }
  return Status::Ok();
}

}  // namespace lfmvox
