#include "models/lfm25_audio/detokenizer.h"

#include <algorithm>
#include <filesystem>

#include "blocks/weights.h"
#include "threading/stage_policy.h"
#include "threading/thread_team.h"

namespace lfmvox {

namespace fs = std::filesystem;

Result<std::unique_ptr<Lfm25Detokenizer>> Lfm25Detokenizer::Load(const std::string& dir_in) {
  fs::path dir(dir_in);
  std::error_code ec;
  if (fs::is_directory(dir / "audio_detokenizer", ec)) dir /= "audio_detokenizer";
  const fs::path config_path = dir / "config.json";
  if (!fs::exists(config_path, ec)) {
    return NotFound("no detokenizer config at " + config_path.string() +
                    "; pass the model directory (holding audio_detokenizer/) or that folder itself");
  }
  auto m = std::unique_ptr<Lfm25Detokenizer>(new Lfm25Detokenizer());
  LFM_ASSIGN_OR_RETURN(m->config_, Lfm25DetokenizerConfig::Load(config_path.string()));
  LFM_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::Open(dir.string()));
  m->ckpt_.emplace(std::move(ckpt));
  const Checkpoint& ck = *m->ckpt_;
  Lfm25DetokenizerConfig& c = m->config_;
  const int64_t H = c.lfm.hidden_size;
  const std::string where = "loading " + dir.string();

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

Lfm25DetokenizerSession::Lfm25DetokenizerSession(const Lfm25Detokenizer& model, Lfm2State state,
                                                 Lfm2Scratch scratch, size_t max_frames)
    : model_(model), state_(std::move(state)), max_frames_(max_frames), stack_scratch_(std::move(scratch)) {}

Result<std::unique_ptr<Lfm25DetokenizerSession>> Lfm25DetokenizerSession::Create(
    const Lfm25Detokenizer& model, size_t max_frames_per_call, int max_threads) {
  const Lfm25DetokenizerConfig& c = model.config();
  if (max_frames_per_call == 0 || max_frames_per_call > 4096) {
    return InvalidArgument("max_frames_per_call must be in [1, 4096]");
  }
  const size_t rows = max_frames_per_call * static_cast<size_t>(c.upsample);
  LFM_ASSIGN_OR_RETURN(Lfm2State state, Lfm2State::Create(model.stack(), rows, 0));
  LFM_ASSIGN_OR_RETURN(Lfm2Scratch scratch,
                       Lfm2Scratch::Create(model.stack(), rows, state.max_keys(), max_threads));
  auto s = std::unique_ptr<Lfm25DetokenizerSession>(
      new Lfm25DetokenizerSession(model, std::move(state), std::move(scratch), max_frames_per_call));
  LFM_RETURN_IF_ERROR(
      s->istft_.Init(static_cast<size_t>(c.n_fft), static_cast<size_t>(c.hop), model.window_.span()));
  const size_t H = static_cast<size_t>(c.lfm.hidden_size);
  s->fused_.Reset(max_frames_per_call * H);
  s->x_.Reset(rows * H);
  s->head_.Reset(rows * static_cast<size_t>(c.output_size));
  return s;
}

Result<size_t> Lfm25DetokenizerSession::Decode(std::span<const int32_t> codes, std::span<float> out,
                                               ThreadTeam& team, TraceSink* sink) {
  const Lfm25DetokenizerConfig& c = model_.config();
  const size_t cb = static_cast<size_t>(c.num_codebooks);
  if (codes.size() % cb != 0) {
    return InvalidArgument(
        StrFormat("got %zu codes; a frame holds exactly %zu (one per codebook)", codes.size(), cb));
  }
  const size_t frames = codes.size() / cb;
  if (out.size() < frames * static_cast<size_t>(c.samples_per_frame())) {
    return InvalidArgument(StrFormat("the output span holds %zu samples; %zu frames need %zu", out.size(),
                                     frames, frames * static_cast<size_t>(c.samples_per_frame())));
  }
  // Validate everything first, so a bad frame leaves the stream untouched.
  for (size_t i = 0; i < codes.size(); ++i) {
    if (codes[i] < 0 || codes[i] >= c.codebook_size) {
      return InvalidArgument(StrFormat("code %d at frame %zu, codebook %zu is outside [0, %d)", codes[i],
                                       frames_ + i / cb, i % cb, c.codebook_size));
    }
  }
  const StageTimer timer(mode_, team, static_cast<double>(frames));  // parallel or inline, by measure
  size_t written = 0;
  for (size_t f = 0; f < frames; f += max_frames_) {
    const size_t n = std::min(max_frames_, frames - f);
    LFM_ASSIGN_OR_RETURN(const size_t w,
                         DecodeChunk(codes.data() + f * cb, n, out.data() + written, team, sink));
    written += w;
  }
  return written;
}

Result<size_t> Lfm25DetokenizerSession::DecodeChunk(const int32_t* codes, size_t frames, float* out,
                                                    ThreadTeam& team, TraceSink* sink) {
  const Lfm25DetokenizerConfig& c = model_.config();
  const size_t H = static_cast<size_t>(c.lfm.hidden_size), cb = static_cast<size_t>(c.num_codebooks);
  const size_t up = static_cast<size_t>(c.upsample), rows = frames * up;
  const size_t out_size = static_cast<size_t>(c.output_size), bins = out_size / 2;

  // FusedEmbedding: e_t = mean_k emb[c_{k,t} + k·codebook_size], summed in codebook order.
  float* fused = fused_.data();  // [frames, H]
  for (size_t t = 0; t < frames; ++t) {
    float* e = fused + t * H;
    std::fill(e, e + H, 0.0f);
    for (size_t k = 0; k < cb; ++k) {
      const size_t row = static_cast<size_t>(codes[t * cb + k]) + k * static_cast<size_t>(c.codebook_size);
      AccumulateRow(model_.emb_, row, e);
    }
    ops::Scale(e, 1.0f / static_cast<float>(cb), e, H);  // exact for 8 codebooks
  }
  if (sink) sink->Record("fused_emb", fused, frames, H, H);

  // ×upsample nearest repeat: row r of the stack input is frame r / up.
  float* x = x_.data();  // [rows, H]
  for (size_t r = 0; r < rows; ++r) std::copy_n(fused + (r / up) * H, H, x + r * H);
  if (sink) sink->Record("upsampled", x, rows, H, H);

  LFM_RETURN_IF_ERROR(Lfm2Forward(model_.stack_, state_, x, rows, stack_scratch_, team, sink));
  Lfm2FinalNorm(model_.stack_, x, rows, x);
  if (sink) sink->Record("final_norm", x, rows, H, H);

  float* head = head_.data();  // [rows, output_size]: log|S| bins, then phases
  ops::MatMul(x, rows, H, model_.lin_, model_.lin_bias_.data(), head, out_size, team);
  if (sink) sink->Record("lin_out", head, rows, out_size, out_size);

  size_t written = 0;
  for (size_t r = 0; r < rows; ++r) {
    const float* z = head + r * out_size;
    written += static_cast<size_t>(istft_.PushFrame(z, z + bins, out + written));
  }
  frames_ += frames;
  return written;
}

size_t Lfm25DetokenizerSession::tail_samples() const {
  return static_cast<size_t>(model_.config().n_fft - model_.config().hop) / 2;
}

Result<size_t> Lfm25DetokenizerSession::Flush(std::span<float> out) {
  if (out.size() < tail_samples()) {
    return InvalidArgument(
        StrFormat("Flush needs room for %zu samples, got %zu", tail_samples(), out.size()));
  }
  const size_t n = frames_ == 0 ? 0 : static_cast<size_t>(istft_.Flush(out.data()));
  Reset();
  return n;
}

void Lfm25DetokenizerSession::Reset() {
  state_.Reset();
  istft_.Reset();
  frames_ = 0;
}

size_t Lfm25DetokenizerSession::state_bytes() const {
  return state_.state_bytes() + 2 * istft_.n_fft() * sizeof(float);  // + overlap-add and envelope
}

size_t Lfm25DetokenizerSession::scratch_bytes() const {
  return stack_scratch_.bytes() + (fused_.size() + x_.size() + head_.size()) * sizeof(float);
}

}  // namespace lfmvox
