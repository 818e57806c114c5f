#include "models/lfm25_audio/detokenizer.h"

#include <algorithm>
#include <filesystem>

#include "blocks/weights.h"
#include "models/lfm25_audio/gguf_release.h"
#include "threading/stage_policy.h"
#include "threading/thread_team.h"

namespace lfmvox {

namespace fs = std::filesystem;

Result<std::unique_ptr<Lfm25Detokenizer>> Lfm25Detokenizer::Load(const std::string& dir_in,
                                                                 bool check_weights) {
  if (LooksLikeGgufRelease(dir_in)) {
    LFM_ASSIGN_OR_RETURN(Lfm25GgufFiles files, FindLfm25GgufRelease(dir_in));
    LFM_ASSIGN_OR_RETURN(Lfm25GgufModel g, OpenLfm25GgufRelease(files, /*want_main=*/false));
    if (!g.detokenizer) {
      return NotFound(dir_in + " has no detokenizer (tokenizer-*.gguf) next to its vocoder; download it too");
    }
    const std::string where = files.detokenizer.empty() ? files.vocoder : files.detokenizer;
    LFM_ASSIGN_OR_RETURN(Lfm25DetokenizerConfig config,
                         Lfm25DetokenizerConfig::FromJson(g.detokenizer_config, where + " (GGUF metadata)"));
    if (check_weights)
      LFM_RETURN_IF_ERROR(CheckWeightsFinite(*g.detokenizer).WithContext("loading " + where));
    return Load(std::move(config), std::move(*g.detokenizer), where);
  }
  fs::path dir(dir_in);
  std::error_code ec;
  if (fs::is_directory(dir / "audio_detokenizer", ec)) dir /= "audio_detokenizer";
  const fs::path config_path = dir / "config.json";
  if (!fs::exists(config_path, ec)) {
    return NotFound("no detokenizer config at " + config_path.string() +
                    "; pass the model directory (holding audio_detokenizer/) or that folder itself");
  }
  LFM_ASSIGN_OR_RETURN(Lfm25DetokenizerConfig config, Lfm25DetokenizerConfig::Load(config_path.string()));
  LFM_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::Open(dir.string()));
  if (check_weights) LFM_RETURN_IF_ERROR(CheckWeightsFinite(ckpt).WithContext("loading " + dir.string()));
  return Load(std::move(config), std::move(ckpt), dir.string());
}

Result<std::unique_ptr<Lfm25Detokenizer>> Lfm25Detokenizer::Load(Lfm25DetokenizerConfig config,
                                                                 Checkpoint weights,
                                                                 const std::string& where_in) {
  auto m = std::unique_ptr<Lfm25Detokenizer>(new Lfm25Detokenizer());
  m->config_ = std::move(config);
  m->ckpt_.emplace(std::move(weights));
  const Checkpoint& ck = *m->ckpt_;
  Lfm25DetokenizerConfig& c = m->config_;
  const int64_t H = c.lfm.hidden_size;
  const std::string where = "loading " + where_in;

  LFM_ASSIGN_OR_RETURN(TensorView emb, ck.Get("emb.emb.weight"));
  if (emb.shape.rank != 2 || emb.shape[1] != H || emb.shape[0] % c.num_codebooks != 0 || emb.shape[0] == 0) {
    return InvalidArgument(StrFormat("%s: emb.emb.weight has shape %s but needs [%d·codebook_size, %lld]",
                                     where.c_str(), emb.shape.ToString().c_str(), c.num_codebooks,
                                     static_cast<long long>(H)));
  }
  LFM_ASSIGN_OR_RETURN(m->emb_, LoadMatrix(ck, "emb.emb.weight", emb.shape[0], H));
  c.codebook_size = static_cast<int>(emb.shape[0] / c.num_codebooks);

  Result<Lfm2Stack> stack = Lfm2Stack::Load(ck, c.lfm, "lfm.");
  if (!stack.ok()) return stack.status().WithContext(where);
  m->stack_ = std::move(stack).value();
  LFM_ASSIGN_OR_RETURN(m->lin_, LoadMatrix(ck, "lin.weight", c.output_size, H));
  LFM_RETURN_IF_ERROR(LoadF32(ck, "lin.bias", Shape{c.output_size}, &m->lin_bias_));
  LFM_RETURN_IF_ERROR(LoadF32(ck, "istft.window", Shape{c.n_fft}, &m->window_));
  return m;
}

size_t Lfm25Detokenizer::weight_bytes_per_frame() const {
  return stack_.weight_bytes() + lin_.bytes() + static_cast<size_t>(config_.num_codebooks) * emb_.row_bytes;
}

Result<Lfm25DetokenizerState> Lfm25DetokenizerState::Create(const Lfm25Detokenizer& model,
                                                            size_t max_frames_per_call) {
  const Lfm25DetokenizerConfig& c = model.config();
  if (max_frames_per_call == 0 || max_frames_per_call > 4096) {
    return InvalidArgument("max_frames_per_call must be in [1, 4096]");
  }
  Lfm25DetokenizerState s;
  s.model_ = &model;
  s.max_frames_ = max_frames_per_call;
  LFM_ASSIGN_OR_RETURN(
      s.stack_, Lfm2State::Create(model.stack(), max_frames_per_call * static_cast<size_t>(c.upsample), 0));
  LFM_RETURN_IF_ERROR(
      s.istft_.Init(static_cast<size_t>(c.n_fft), static_cast<size_t>(c.hop), model.window()));
  return s;
}

void Lfm25DetokenizerState::Reset() {
  stack_.Reset();
  istft_.Reset();
  frames_ = 0;
}

size_t Lfm25DetokenizerState::bytes() const {
  return stack_.state_bytes() + 2 * istft_.n_fft() * sizeof(float);  // + overlap-add and envelope
}

Result<Lfm25DetokenizerScratch> Lfm25DetokenizerScratch::Create(const Lfm25Detokenizer& model,
                                                                size_t max_frames_per_call,
                                                                size_t max_streams, int max_threads) {
  const Lfm25DetokenizerConfig& c = model.config();
  if (max_frames_per_call == 0 || max_frames_per_call > 4096) {
    return InvalidArgument("max_frames_per_call must be in [1, 4096]");
  }
  if (max_streams == 0 || max_streams > 1024) return InvalidArgument("max_streams must be in [1, 1024]");
  if (max_threads < 1) return InvalidArgument("max_threads must be at least 1");
  const size_t up = static_cast<size_t>(c.upsample);
  const size_t frames = max_frames_per_call * max_streams, rows = frames * up;
  const size_t H = static_cast<size_t>(c.lfm.hidden_size);
  Lfm25DetokenizerScratch s;
  s.model_ = &model;
  s.max_frames_per_call_ = max_frames_per_call;
  s.max_streams_ = max_streams;
  s.max_threads_ = max_threads;
  {
    // The longest cache a query of a state with max_frames_per_call frames can see.
    LFM_ASSIGN_OR_RETURN(const Lfm2State probe,
                         Lfm2State::Create(model.stack(), max_frames_per_call * up, 0));
    s.max_keys_ = probe.max_keys();
  }
  LFM_ASSIGN_OR_RETURN(s.stack_, Lfm2Scratch::Create(model.stack(), rows, s.max_keys_, max_threads));
  s.fused_.Reset(frames * H);
  s.x_.Reset(rows * H);
  s.head_.Reset(rows * static_cast<size_t>(c.output_size));
  s.states_.reserve(max_streams);
  s.rows_.reserve(max_streams);
  s.active_.reserve(max_streams);
  s.take_.reserve(max_streams);
  s.done_.reserve(max_streams);
  return s;
}

size_t Lfm25DetokenizerScratch::bytes() const {
  return stack_.bytes() + (fused_.size() + x_.size() + head_.size()) * sizeof(float);
}

Status StepStreams(const Lfm25Detokenizer& model, std::span<Lfm25DetokenizerRequest> requests,
                   Lfm25DetokenizerScratch& sc, ThreadTeam& team, TraceSink* sink) {
  const Lfm25DetokenizerConfig& c = model.config();
  const size_t H = static_cast<size_t>(c.lfm.hidden_size), cb = static_cast<size_t>(c.num_codebooks);
  const size_t up = static_cast<size_t>(c.upsample), spf = static_cast<size_t>(c.samples_per_frame());
  const size_t out_size = static_cast<size_t>(c.output_size), bins = out_size / 2;

  // Validate everything first, so a bad request leaves every stream untouched.
  if (sc.model_ != &model) return InvalidArgument("this scratch was created for another detokenizer");
  if (requests.size() > sc.max_streams_) {
    return OutOfRange(
        StrFormat("%zu streams in one step exceed the scratch's %zu", requests.size(), sc.max_streams_));
  }
  if (team.size() > sc.max_threads_) {
    return InvalidArgument(StrFormat("a team of %d threads exceeds the %d this scratch was sized for",
                                     team.size(), sc.max_threads_));
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    const Lfm25DetokenizerRequest& q = requests[i];
    if (q.state == nullptr) return InvalidArgument(StrFormat("request %zu has no state", i));
    if (q.state->model_ != &model) {
      return InvalidArgument(StrFormat("request %zu: its state was created for another detokenizer", i));
    }
    if (q.state->stack_.max_keys() > sc.max_keys_) {
      return InvalidArgument(StrFormat(
          "request %zu: its state takes %zu frames per call but the scratch was sized for %zu; create "
          "the scratch with at least the states' max_frames_per_call",
          i, q.state->max_frames_, sc.max_frames_per_call_));
    }
    for (size_t j = 0; j < i; ++j) {
      if (requests[j].state == q.state) return InvalidArgument("a stream appears twice in one step");
    }
    if (q.codes.size() % cb != 0) {
      return InvalidArgument(
          StrFormat("got %zu codes; a frame holds exactly %zu (one per codebook)", q.codes.size(), cb));
    }
    const size_t frames = q.codes.size() / cb;
    if (q.out.size() < frames * spf) {
      return InvalidArgument(StrFormat("the output span holds %zu samples; %zu frames need %zu", q.out.size(),
                                       frames, frames * spf));
    }
    for (size_t k = 0; k < q.codes.size(); ++k) {
      if (q.codes[k] < 0 || q.codes[k] >= c.codebook_size) {
        return InvalidArgument(StrFormat("code %d at frame %zu, codebook %zu is outside [0, %d)", q.codes[k],
                                         q.state->frames_ + k / cb, k % cb, c.codebook_size));
      }
    }
  }
  sc.done_.assign(requests.size(), 0);
  size_t all_frames = 0;
  for (Lfm25DetokenizerRequest& q : requests) {
    q.written = 0;
    all_frames += q.codes.size() / cb;
  }
  // Parallel or inline, by measure (threading/stage_policy.h); the work is the call's frames.
  const StageTimer timer(sc.mode_, team, static_cast<double>(all_frames));

  for (;;) {
    // Who runs in this pass, and how many frames each.
    sc.states_.clear();
    sc.rows_.clear();
    sc.active_.clear();
    sc.take_.clear();
    size_t total = 0;
    for (size_t i = 0; i < requests.size(); ++i) {
      const Lfm25DetokenizerRequest& q = requests[i];
      const size_t left = q.codes.size() / cb - sc.done_[i];
      const size_t n =
          std::min({left, q.state->max_frames_, sc.max_frames_per_call_, sc.max_frames() - total});
      if (n == 0) continue;
      sc.states_.push_back(&q.state->stack_);
      sc.rows_.push_back(n * up);
      sc.active_.push_back(i);
      sc.take_.push_back(n);
      total += n;
    }
    if (total == 0) break;
    const size_t rows = total * up;

    // FusedEmbedding: e_t = mean_k emb[c_{k,t} + k·codebook_size], summed in codebook order.
    float* fused = sc.fused_.data();  // [total, H]: the streams' frames one after the other
    for (size_t a = 0, t = 0; a < sc.active_.size(); ++a) {
      const int32_t* codes = requests[sc.active_[a]].codes.data() + sc.done_[sc.active_[a]] * cb;
      for (size_t f = 0; f < sc.take_[a]; ++f, ++t) {
        float* e = fused + t * H;
        std::fill(e, e + H, 0.0f);
        for (size_t k = 0; k < cb; ++k) {
          const size_t row =
              static_cast<size_t>(codes[f * cb + k]) + k * static_cast<size_t>(c.codebook_size);
          AccumulateRow(model.emb(), row, e);
        }
        ops::Scale(e, 1.0f / static_cast<float>(cb), e, H);  // exact for 8 codebooks
      }
    }
    if (sink) sink->Record("fused_emb", fused, total, H, H);

    // ×upsample nearest repeat: row r of the stack input is frame r / up.
    float* x = sc.x_.data();  // [rows, H]
    for (size_t r = 0; r < rows; ++r) std::copy_n(fused + (r / up) * H, H, x + r * H);
    if (sink) sink->Record("upsampled", x, rows, H, H);

    LFM_RETURN_IF_ERROR(Lfm2Forward(model.stack(), sc.states_, sc.rows_, x, sc.stack_, team, sink));
    Lfm2FinalNorm(model.stack(), x, rows, x);
    if (sink) sink->Record("final_norm", x, rows, H, H);

    float* head = sc.head_.data();  // [rows, output_size]: log|S| bins, then phases
    ops::MatMul(x, rows, H, model.lin(), model.lin_bias(), head, out_size, team);
    if (sink) sink->Record("lin_out", head, rows, out_size, out_size);

    for (size_t a = 0, r = 0; a < sc.active_.size(); ++a) {
      Lfm25DetokenizerRequest& q = requests[sc.active_[a]];
      float* out = q.out.data();
      for (size_t end = r + sc.take_[a] * up; r < end; ++r) {
        const float* z = head + r * out_size;
        q.written += static_cast<size_t>(q.state->istft_.Step(z, z + bins, out + q.written));
      }
      q.state->frames_ += sc.take_[a];
      sc.done_[sc.active_[a]] += sc.take_[a];
    }
  }
  return Status::Ok();
}

Result<size_t> Step(const Lfm25Detokenizer& model, Lfm25DetokenizerState& state,
                    std::span<const int32_t> codes, std::span<float> out, Lfm25DetokenizerScratch& scratch,
                    ThreadTeam& team, TraceSink* sink) {
  Lfm25DetokenizerRequest request[1] = {{&state, codes, out, 0}};
  LFM_RETURN_IF_ERROR(StepStreams(model, request, scratch, team, sink));
  return request[0].written;
}

Result<size_t> Flush(const Lfm25Detokenizer& model, Lfm25DetokenizerState& state, std::span<float> out) {
  if (state.model_ != &model) return InvalidArgument("this state was created for another detokenizer");
  if (out.size() < model.tail_samples()) {
    return InvalidArgument(
        StrFormat("Flush needs room for %zu samples, got %zu", model.tail_samples(), out.size()));
  }
  const size_t n = state.frames_ == 0 ? 0 : static_cast<size_t>(state.istft_.Flush(out.data()));
  state.Reset();
  return n;
}

void Reset(Lfm25DetokenizerState& state) { state.Reset(); }

Result<std::unique_ptr<Lfm25DetokenizerSession>> Lfm25DetokenizerSession::Create(
    const Lfm25Detokenizer& model, size_t max_frames_per_call, int max_threads) {
  LFM_ASSIGN_OR_RETURN(Lfm25DetokenizerState state,
                       Lfm25DetokenizerState::Create(model, max_frames_per_call));
  LFM_ASSIGN_OR_RETURN(Lfm25DetokenizerScratch scratch,
                       Lfm25DetokenizerScratch::Create(model, max_frames_per_call, 1, max_threads));
  return std::unique_ptr<Lfm25DetokenizerSession>(
      new Lfm25DetokenizerSession(model, std::move(state), std::move(scratch)));
}

Result<size_t> Lfm25DetokenizerSession::Step(std::span<const int32_t> codes, std::span<float> out,
                                             ThreadTeam& team, TraceSink* sink) {
  return lfmvox::Step(model_, state_, codes, out, scratch_, team, sink);
}

Result<size_t> Lfm25DetokenizerSession::Flush(std::span<float> out) {
  return lfmvox::Flush(model_, state_, out);
}

void Lfm25DetokenizerSession::Reset() { state_.Reset(); }

}  // namespace lfmvox
