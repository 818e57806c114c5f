#include "models/lfm3_audio/depth_decoder.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>

#include "blocks/weights.h"
#include "io/json_config.h"
#include "ops/ops.h"
#include "threading/thread_team.h"

namespace lfmvox {

namespace {

constexpr int kMaxWindow = 1 << 20;  // history frames; far beyond any release (4096), bounds the ring

// Forwards the stack's traces under "pass{p}/" (only when tracing: the name is formatted per call).
class PrefixSink : public TraceSink {
 public:
  PrefixSink(TraceSink* inner, size_t pass) : inner_(inner) {
    std::snprintf(prefix_, sizeof prefix_, "pass%zu/", pass);
  }
  void Record(std::string_view name, const float* data, size_t rows, size_t cols, size_t ld) override {
    std::string n(prefix_);
    n.append(name);
    inner_->Record(n, data, rows, cols, ld);
  }

 private:
  TraceSink* inner_;
  char prefix_[32];
};

void TracePass(TraceSink* sink, size_t pass, const char* what, const float* x, size_t rows, size_t cols) {
  if (sink == nullptr) return;
  char name[64];
  std::snprintf(name, sizeof name, "pass%zu/%s", pass, what);
  sink->Record(name, x, rows, cols, cols);
}

}  // namespace

// ---------------------------------------------------------------------------
// Sampling settings.

Status Lfm3AudioSampling::Validate() const {
  if (!std::isfinite(temperature)) return InvalidArgument("audio temperature must be a finite number");
  if (top_k < 0) return InvalidArgument(StrFormat("audio top_k = %d; use 0 for off", top_k));
  if (!(repetition_penalty > 0) || !std::isfinite(repetition_penalty)) {
    return InvalidArgument(StrFormat("audio repetition_penalty = %g; it must be a positive number (1 = off)",
                                     static_cast<double>(repetition_penalty)));
  }
  if (repetition_window < 0 || repetition_window > kMaxWindow) {
    return OutOfRange(
        StrFormat("audio repetition_window = %d is outside [0, %d]", repetition_window, kMaxWindow));
  }
  if (repetition_penalty != 1.0f && repetition_window == 0) {
    return InvalidArgument("an audio repetition_penalty other than 1 needs repetition_window > 0");
  }
  return Status::Ok();
}

Result<Lfm3AudioSampling> Lfm3AudioSampling::FromJson(const nlohmann::json& root, const std::string& where) {
  Lfm3AudioSampling s;
  LFM_RETURN_IF_ERROR(CheckObject(root, where));
  if (!HasKey(root, "generation")) return s;
  LFM_ASSIGN_OR_RETURN(const nlohmann::json* g, GetSection(root, "generation", where));
  const std::string w = where + " [generation]";
  LFM_RETURN_IF_ERROR(GetFloat(*g, "audio_temperature", w, false, 0.0, 1e4, &s.temperature));
  if (g->contains("audio_top_k") && (*g)["audio_top_k"].is_null()) {
    s.top_k = 0;  // null: no top-k (LFM3-Omni)
  } else {
    LFM_RETURN_IF_ERROR(GetInt(*g, "audio_top_k", w, false, 0, 1 << 30, &s.top_k));
  }
  LFM_RETURN_IF_ERROR(GetFloat(*g, "audio_repetition_penalty", w, false, 1e-6, 1e6, &s.repetition_penalty));
  LFM_RETURN_IF_ERROR(GetInt(*g, "audio_repetition_window", w, false, 0, kMaxWindow, &s.repetition_window));
  std::string order = "random";
  LFM_RETURN_IF_ERROR(GetString(*g, "maskgit_order", w, false, &order));
  if (order != "random" && order != "fixed") {
    return Unimplemented(w + ": \"maskgit_order\" = \"" + order +
                         "\" is not supported (only \"random\" or \"fixed\")");
  }
  s.fixed_order = order == "fixed";
  if (Status v = s.Validate(); !v.ok()) return Status(v.code(), w + ": " + v.message());
  return s;
}

// ---------------------------------------------------------------------------
// Weights.

Result<Lfm3DepthDecoder> Lfm3DepthDecoder::Load(const Checkpoint& ckpt, const Lfm3Config& config,
                                                std::optional<WeightFormat> matrices) {
  const Lfm3StackConfig& sc = config.depth.stack;
  if (config.n_codebooks < 1 || config.codebook_size < 1 || config.text_hidden < 1 || sc.hidden_size < 1) {
    return InvalidArgument("the LFM3 depth decoder config is incomplete; parse it with Lfm3Config::FromJson");
  }
  if (config.audio_eos < 0 || config.audio_eos >= config.codebook_size) {
    return InvalidArgument(StrFormat("audio_eos = %d is not a code of the %d-code codebooks",
                                     config.audio_eos, config.codebook_size));
  }
  if (sc.window != 0) {
    return InvalidArgument("the depth decoder's stack must be bidirectional (depth_decoder.window null)");
  }
  int sum = 0, max_pass = 0;
  for (int n : config.maskgit) {
    if (n < 1) return InvalidArgument("every maskgit pass must reveal at least one codebook");
    sum += n;
    max_pass = std::max(max_pass, n);
  }
  if (sum != config.n_codebooks) {
    return InvalidArgument(
        StrFormat("the maskgit passes reveal %d codebooks; the frame has %d", sum, config.n_codebooks));
  }
  const int64_t C = config.n_codebooks, V = config.codebook_size, D = sc.hidden_size, Ht = config.text_hidden;

  Lfm3DepthDecoder m;
  m.codebooks_ = config.n_codebooks;
  m.codebook_size_ = config.codebook_size;
  m.eos_ = config.audio_eos;
  m.text_hidden_ = config.text_hidden;
  m.width_ = sc.hidden_size;
  m.max_pass_ = max_pass;
  m.maskgit_ = config.maskgit;
  LFM_RETURN_IF_ERROR(LoadLinear(ckpt, "depth_decoder.depth_linear", C * D, Ht, true, &m.depth_linear_));
  LFM_RETURN_IF_ERROR(LoadF32(ckpt, "depth_decoder.mask_embedding", Shape{D}, &m.mask_));
  m.codebooks_t_.resize(static_cast<size_t>(C));
  for (int64_t i = 0; i < C; ++i) {
    Lfm3DepthCodebook& cb = m.codebooks_t_[static_cast<size_t>(i)];
    const std::string p = "depth_decoder.depth_embeddings." + std::to_string(i) + ".";
    LFM_ASSIGN_OR_RETURN(cb.embedding, LoadMatrix(ckpt, p + "embedding.weight", V, D));
    LFM_RETURN_IF_ERROR(
        LoadRmsNorm(ckpt, p + "embedding_norm.weight", D, config.depth.head_norm_eps, &cb.norm));
  }
  LFM_ASSIGN_OR_RETURN(m.stack_, Lfm3Stack::Load(ckpt, sc, "depth_decoder.model."));
  LFM_ASSIGN_OR_RETURN(m.codebook_embedding_, LoadMatrix(ckpt, "codebook_embedding.weight", C * V, Ht));
  if (matrices) {
    const WeightFormat f = *matrices;
    LFM_RETURN_IF_ERROR(m.stack_.ConvertMatrices(f, &m.converted_));
    std::vector<ops::Weight*> tables = {&m.depth_linear_.w, &m.codebook_embedding_};
    for (Lfm3DepthCodebook& cb : m.codebooks_t_) tables.push_back(&cb.embedding);
    for (ops::Weight* w : tables) {
      if (FormatRowBytes(f, w->cols) == 0) continue;  // not whole blocks: kept as stored
      LFM_ASSIGN_OR_RETURN(*w, ConvertMatrix(*w, f, &m.converted_));
    }
  }
  // Every pass runs the stack over all C slots of each stream (the last layer over the pass's n): many rows.
  LFM_RETURN_IF_ERROR(m.stack_.UseManyRowLayout(ckpt));
  return m;
}

size_t Lfm3DepthDecoder::weight_bytes() const {
  size_t n = depth_linear_.w.bytes() + maskgit_.size() * stack_.weight_bytes();
  for (const Lfm3DepthCodebook& cb : codebooks_t_) n += cb.embedding.bytes();
  // Revealed codes' rows enter the later passes: every codebook but the last pass's.
  const size_t revealed = static_cast<size_t>(codebooks_ - maskgit_.back());
  if (!codebooks_t_.empty()) n += revealed * codebooks_t_[0].embedding.row_bytes;
  return n;
}

Status Lfm3DepthDecoder::FrameRow(std::span<const int32_t> codes, float* row) const {
  if (codes.size() != static_cast<size_t>(codebooks_)) {
    return InvalidArgument(StrFormat("a frame has %d codes; got %zu", codebooks_, codes.size()));
  }
  for (size_t i = 0; i < codes.size(); ++i) {
    if (codes[i] < 0 || codes[i] >= codebook_size_) {
      return OutOfRange(StrFormat("code %d of codebook %zu is outside [0, %d)", codes[i], i, codebook_size_));
    }
  }
  std::fill(row, row + text_hidden_, 0.0f);
  for (size_t i = 0; i < codes.size(); ++i) {
    AccumulateRow(codebook_embedding_,
                  i * static_cast<size_t>(codebook_size_) + static_cast<size_t>(codes[i]), row);
  }
  return Status::Ok();
}

void Lfm3DepthDecoder::EosRow(float* row) const {
  std::fill(row, row + text_hidden_, 0.0f);
  for (size_t i = 0; i < static_cast<size_t>(codebooks_); ++i) {
    AccumulateRow(codebook_embedding_, i * static_cast<size_t>(codebook_size_) + static_cast<size_t>(eos_),
                  row);
  }
}

// ---------------------------------------------------------------------------
// Per-stream state.

Result<Lfm3DepthState> Lfm3DepthState::Create(const Lfm3DepthDecoder& model,
                                              const Lfm3AudioSampling& sampling, uint64_t seed) {
  LFM_RETURN_IF_ERROR(sampling.Validate());
  Lfm3DepthState s;
  s.model_ = &model;
  s.sampling_ = sampling;
  LFM_RETURN_IF_ERROR(s.MakeSampler());
  const size_t C = static_cast<size_t>(model.codebooks()), V = static_cast<size_t>(model.codebook_size());
  s.window_ = sampling.repetition_penalty != 1.0f ? static_cast<size_t>(sampling.repetition_window) : 0;
  if (s.window_ > 0) {
    s.ring_.Reset(s.window_ * C);
    s.counts_.Reset(C * V);
  }
  s.codes_.assign(C, -1);
  s.order_.assign(C, 0);
  s.revealed_.assign(C, 0);
  s.Reset(seed);
  return s;
}

Status Lfm3DepthState::MakeSampler() {
  // The penalty is applied from the counts; the Sampler does temperature, top-k and the draw.
  const SamplingParams p{sampling_.greedy() ? 0.0f : sampling_.temperature, sampling_.top_k, 1.0f, 0};
  LFM_ASSIGN_OR_RETURN(sampler_, Sampler::Create(p, static_cast<size_t>(model_->codebook_size())));
  draw_for_top1_ = !sampling_.greedy() && sampler_.params().greedy();
  return Status::Ok();
}

Status Lfm3DepthState::SetDraw(float temperature, int top_k) {
  if (temperature == sampling_.temperature && top_k == sampling_.top_k) return Status::Ok();
  Lfm3AudioSampling next = sampling_;
  next.temperature = temperature;
  next.top_k = top_k;
  LFM_RETURN_IF_ERROR(next.Validate());
  const Lfm3AudioSampling before = sampling_;
  sampling_ = next;
  if (Status st = MakeSampler(); !st.ok()) {
    sampling_ = before;
    return st;
  }
  return Status::Ok();
}

void Lfm3DepthState::Reset(uint64_t seed) {
  rng_ = Rng(seed);
  next_ = filled_ = 0;
  if (counts_.size()) std::fill(counts_.data(), counts_.data() + counts_.size(), uint32_t{0});
  std::fill(codes_.begin(), codes_.end(), -1);
  std::iota(order_.begin(), order_.end(), 0);
  end_of_audio_ = false;
}

Status Lfm3DepthState::PushHistory(std::span<const int32_t> codes) {
  const size_t C = codes_.size(), V = static_cast<size_t>(model_->codebook_size());
  if (codes.size() != C) return InvalidArgument(StrFormat("a frame has %zu codes; got %zu", C, codes.size()));
  for (size_t i = 0; i < C; ++i) {
    if (codes[i] < 0 || static_cast<size_t>(codes[i]) >= V) {
      return OutOfRange(StrFormat("history code %d of codebook %zu is outside [0, %zu)", codes[i], i, V));
    }
  }
  if (window_ == 0) {
    filled_ = 0;  // no penalty: nothing to remember
    return Status::Ok();
  }
  int32_t* slot = ring_.data() + next_ * C;  // [C]
  for (size_t i = 0; i < C; ++i) {
    if (filled_ == window_) --counts_[i * V + static_cast<size_t>(slot[i])];  // the oldest frame leaves
    slot[i] = codes[i];
    ++counts_[i * V + static_cast<size_t>(codes[i])];
  }
  next_ = (next_ + 1) % window_;
  filled_ = std::min(filled_ + 1, window_);
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// Scratch.

Result<Lfm3DepthScratch> Lfm3DepthScratch::Create(const Lfm3DepthDecoder& m, size_t max_batch,
                                                  int max_threads) {
  if (max_batch < 1) return InvalidArgument("Lfm3DepthScratch needs max_batch >= 1");
  if (max_threads < 1) return InvalidArgument("Lfm3DepthScratch needs max_threads >= 1");
  const size_t B = max_batch, C = static_cast<size_t>(m.codebooks()), D = static_cast<size_t>(m.width());
  const size_t P = static_cast<size_t>(m.max_pass()), V = static_cast<size_t>(m.codebook_size());
  Lfm3DepthScratch s;
  s.model_ = &m;
  s.max_batch_ = B;
  s.max_threads_ = max_threads;
  s.h_.Reset(B * static_cast<size_t>(m.text_hidden()));
  s.slots_.Reset(B * C * D);
  s.x_.Reset(B * C * D);
  s.head_.Reset(B * P * D);
  s.gather_.Reset(B * D);
  s.glogits_.Reset(B * V);
  s.logits_.Reset(B * P * V);
  s.rows_.assign(B, C);
  s.pick_.assign(B, 0);
  s.keep_.assign(B * P, 0);
  s.stack_states_.reserve(B);
  for (size_t b = 0; b < B; ++b) {
    LFM_ASSIGN_OR_RETURN(Lfm3State st, Lfm3State::Create(m.stack(), C));
    s.stack_states_.push_back(std::move(st));
  }
  s.state_ptrs_.resize(B);
  for (size_t b = 0; b < B; ++b) s.state_ptrs_[b] = &s.stack_states_[b];
  LFM_ASSIGN_OR_RETURN(s.stack_scratch_,
                       Lfm3Scratch::Create(m.stack(), B * C, s.stack_states_[0].max_keys(), max_threads));
  return s;
}

size_t Lfm3DepthScratch::bytes() const {
  return (h_.size() + slots_.size() + x_.size() + head_.size() + gather_.size() + glogits_.size() +
          logits_.size()) *
             sizeof(float) +
         stack_scratch_.bytes();
}

// ---------------------------------------------------------------------------
// One frame per stream.

Status DecodeFrames(const Lfm3DepthDecoder& m, std::span<const float* const> h,
                    std::span<Lfm3DepthState* const> states, Lfm3DepthScratch& st, ThreadTeam& team,
                    TraceSink* sink) {
  const size_t B = states.size();
  const size_t C = static_cast<size_t>(m.codebooks_), D = static_cast<size_t>(m.width_);
  const size_t V = static_cast<size_t>(m.codebook_size_), Ht = static_cast<size_t>(m.text_hidden_);
  if (st.model_ != &m)
    return InvalidArgument("this Lfm3DepthScratch was created for a different depth decoder");
  if (h.size() != B) {
    return InvalidArgument(StrFormat("%zu hidden states for %zu depth-decoder streams", h.size(), B));
  }
  if (team.size() > st.max_threads_) {
    return InvalidArgument(
        StrFormat("a team of %d threads exceeds the %d this Lfm3DepthScratch was sized for", team.size(),
                  st.max_threads_));
  }
  if (B == 0) return Status::Ok();
  if (B > st.max_batch_) {
    return OutOfRange(
        StrFormat("%zu streams in one call exceed the scratch's batch of %zu", B, st.max_batch_));
  }
  for (size_t b = 0; b < B; ++b) {
    if (h[b] == nullptr || states[b] == nullptr) {
      return InvalidArgument("a depth-decoder stream lacks its hidden state or its state");
    }
    if (states[b]->model_ != &m) {
      return InvalidArgument("an Lfm3DepthState was created for a different depth decoder");
    }
    for (size_t c = 0; c < b; ++c) {
      if (states[c] == states[b]) return InvalidArgument("one Lfm3DepthState appears twice in a call");
    }
  }

  // Slots: depth_linear over the gathered states.
  for (size_t b = 0; b < B; ++b) std::memcpy(st.h_.data() + b * Ht, h[b], Ht * sizeof(float));
  float* slots = st.slots_.data();  // [B·C, D]
  m.depth_linear_.Forward(st.h_.data(), B, Ht, slots, C * D, team);
  if (sink) sink->Record("slots", slots, B * C, D, D);

  // The order of each frame: fixed, or C−1 NextU64 draws for the shuffle.
  for (size_t b = 0; b < B; ++b) {
    Lfm3DepthState& s = *states[b];
    std::iota(s.order_.begin(), s.order_.end(), 0);
    if (!s.sampling_.fixed_order) {
      for (size_t i = C - 1; i >= 1; --i) {
        const size_t j = static_cast<size_t>(s.rng_.NextU64() % (i + 1));
        std::swap(s.order_[i], s.order_[j]);
      }
    }
    std::fill(s.revealed_.begin(), s.revealed_.end(), 0);
    std::fill(s.codes_.begin(), s.codes_.end(), -1);
  }

  float* x = st.x_.data();            // [B·C, D]
  float* head = st.head_.data();      // [B·n, D] this pass's head_norm rows, (stream, want) order
  float* logits = st.logits_.data();  // [B·n, V]
  size_t at = 0;
  for (size_t p = 0; p < m.maskgit_.size(); ++p) {
    const size_t n = static_cast<size_t>(m.maskgit_[p]);
    // The pass's input rows.
    for (size_t b = 0; b < B; ++b) {
      const Lfm3DepthState& s = *states[b];
      for (size_t i = 0; i < C; ++i) {
        float* xi = x + (b * C + i) * D;
        const float* si = slots + (b * C + i) * D;
        if (s.revealed_[i]) {
          std::memcpy(xi, si, D * sizeof(float));
          AccumulateRow(m.codebooks_t_[i].embedding, static_cast<size_t>(s.codes_[i]), xi);
        } else {
          ops::Add(si, m.mask_.data(), xi, D);
        }
      }
    }
    TracePass(sink, p, "in", x, B * C, D);

    // The bidirectional stack (it clears the states: fresh per pass), then its final norm. Unless the
    // scratch runs all rows, only the pass's codebooks leave the last layer (Lfm3ForwardKeep): row k of
    // x then holds keep_[k], each stream's wanted slots in ascending order.
    size_t kept = 0;
    if (!st.all_rows_) {
      for (size_t b = 0; b < B; ++b) {
        const Lfm3DepthState& s = *states[b];
        size_t* w = st.keep_.data() + b * n;
        for (size_t r = 0; r < n; ++r) w[r] = b * C + static_cast<size_t>(s.order_[at + r]);
        std::sort(w, w + n);
      }
      kept = B * n;
    }
    PrefixSink pass_sink(sink, p);
    LFM_RETURN_IF_ERROR(Lfm3ForwardKeep(m.stack_, {st.state_ptrs_.data(), B}, {st.rows_.data(), B},
                                        {st.keep_.data(), kept}, x, st.stack_scratch_, team,
                                        sink ? &pass_sink : nullptr));
    const size_t out_rows = st.all_rows_ ? B * C : kept;
    Lfm3FinalNorm(m.stack_, x, out_rows, x);
    TracePass(sink, p, "final_norm", x, out_rows, D);

    // Head norms of the wanted codebooks.
    for (size_t b = 0; b < B; ++b) {
      const Lfm3DepthState& s = *states[b];
      for (size_t r = 0; r < n; ++r) {
        const size_t i = static_cast<size_t>(s.order_[at + r]);
        size_t row = b * C + i;  // all rows: the slot itself
        if (!st.all_rows_) {
          const size_t* w = st.keep_.data() + b * n;
          row = b * n + static_cast<size_t>(std::find(w, w + n, b * C + i) - w);
        }
        m.codebooks_t_[i].norm.Forward(x + row * D, 1, D, head + (b * n + r) * D, D);
      }
    }
    TracePass(sink, p, "head_norm", head, B * n, D);

    // Tied logits, one MatMul per codebook over the streams that want it in this pass.
    for (size_t i = 0; i < C; ++i) {
      size_t k = 0;
      for (size_t b = 0; b < B; ++b) {
        const Lfm3DepthState& s = *states[b];
        for (size_t r = 0; r < n; ++r) {
          if (static_cast<size_t>(s.order_[at + r]) == i) st.pick_[k++] = b * n + r;
        }
      }
      if (k == 0) continue;
      const ops::Weight& e = m.codebooks_t_[i].embedding;
      if (k == 1) {
        ops::MatMul(head + st.pick_[0] * D, 1, D, e, nullptr, logits + st.pick_[0] * V, V, team);
        continue;
      }
      for (size_t j = 0; j < k; ++j)
        std::memcpy(st.gather_.data() + j * D, head + st.pick_[j] * D, D * sizeof(float));
      ops::MatMul(st.gather_.data(), k, D, e, nullptr, st.glogits_.data(), V, team);
      for (size_t j = 0; j < k; ++j) {
        std::memcpy(logits + st.pick_[j] * V, st.glogits_.data() + j * V, V * sizeof(float));
      }
    }
    TracePass(sink, p, "logits", logits, B * n, V);

    // Repetition penalty from each stream's history counts, in place.
    for (size_t b = 0; b < B; ++b) {
      const Lfm3DepthState& s = *states[b];
      if (s.window_ == 0 || s.filled_ == 0) continue;
      const float pen = s.sampling_.repetition_penalty;
      for (size_t r = 0; r < n; ++r) {
        const size_t i = static_cast<size_t>(s.order_[at + r]);
        const uint32_t* cnt = s.counts_.data() + i * V;  // [V]
        float* row = logits + (b * n + r) * V;
        for (size_t v = 0; v < V; ++v) {
          if (cnt[v]) row[v] = row[v] < 0 ? row[v] * pen : row[v] / pen;
        }
      }
    }
    TracePass(sink, p, "logits_penalized", logits, B * n, V);

    // Draws in want order, then the pass's codebooks are revealed.
    for (size_t b = 0; b < B; ++b) {
      Lfm3DepthState& s = *states[b];
      for (size_t r = 0; r < n; ++r) {
        const size_t i = static_cast<size_t>(s.order_[at + r]);
        LFM_ASSIGN_OR_RETURN(s.codes_[i], s.sampler_.Sample({logits + (b * n + r) * V, V}, s.rng_));
        // top-k 1 at a positive temperature: the Sampler takes the argmax without a draw; the seed
        // draws from the one kept code, so the stream consumes its NextFloat all the same.
        if (s.draw_for_top1_) s.rng_.NextFloat();
      }
      for (size_t r = 0; r < n; ++r) s.revealed_[static_cast<size_t>(s.order_[at + r])] = 1;
    }
    at += n;
  }

  for (size_t b = 0; b < B; ++b) {
    Lfm3DepthState& s = *states[b];
    s.end_of_audio_ = std::find(s.codes_.begin(), s.codes_.end(), m.eos_) != s.codes_.end();
    if (!s.end_of_audio_) LFM_RETURN_IF_ERROR(s.PushHistory(s.codes()));
  }
  return Status::Ok();
}

Status DecodeFrame(const Lfm3DepthDecoder& m, const float* h, Lfm3DepthState& state,
                   Lfm3DepthScratch& scratch, ThreadTeam& team, TraceSink* sink) {
  Lfm3DepthState* s = &state;
  return DecodeFrames(m, {&h, 1}, {&s, 1}, scratch, team, sink);
}

Status FeedbackRow(const Lfm3DepthDecoder& m, const Lfm3DepthState& state, float* row) {
  if (state.end_of_audio()) {
    m.EosRow(row);
    return Status::Ok();
  }
  if (state.codes().empty() || state.codes()[0] < 0) {
    return InvalidArgument("this depth-decoder stream has not decoded a frame yet");
  }
  return m.FrameRow(state.codes(), row);
}

}  // namespace lfmvox
