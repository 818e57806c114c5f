#include "codecs/mimi/mimi_decoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "blocks/weights.h"
#include "io/json_config.h"
#include "ops/nn_ops.h"
#include "threading/thread_team.h"

namespace lfmvox {

namespace {

namespace fs = std::filesystem;

const std::string kFirst = "quantizer.rvq_first.";
const std::string kRest = "quantizer.rvq_rest.";
const std::string kLayers = "decoder_transformer.transformer.layers.";

std::string Codebook(size_t k) {  // codebook k of the frame: 0 semantic, then the acoustic ones
  return (k == 0 ? kFirst + "vq.layers.0" : kRest + "vq.layers." + std::to_string(k - 1)) + "._codebook.";
}
std::string SeanetName(size_t index, const char* what) {
  return "decoder.model." + std::to_string(index) + what;
}

// The sizes the tensors carry, over get_mimi's defaults: used when no Mimi config.json comes with the file.
Result<MimiConfig> ConfigFromTensors(const Checkpoint& ck, const std::string& where) {
  MimiConfig c;
  LFM_ASSIGN_OR_RETURN(TensorView e, ck.Get(Codebook(0) + "embedding_sum"));
  if (e.shape.rank != 2) return InvalidArgument(where + ": the semantic codebook must be [bins, dim]");
  c.codebook_size = static_cast<int>(e.shape[0]);
  c.codebook_dim = static_cast<int>(e.shape[1]);
  LFM_ASSIGN_OR_RETURN(TensorView p, ck.Get(kFirst + "output_proj.weight"));
  if (p.shape.rank != 3) return InvalidArgument(where + ": rvq_first.output_proj must be [H, dim, 1]");
  c.latent_dim = c.d_model = static_cast<int>(p.shape[0]);
  int layers = 0;
  while (ck.Has(kLayers + std::to_string(layers) + ".norm1.weight")) ++layers;
  c.num_layers = layers;
  if (layers > 0) {
    LFM_ASSIGN_OR_RETURN(TensorView l1, ck.Get(kLayers + "0.linear1.weight"));
    if (l1.shape.rank != 2) return InvalidArgument(where + ": linear1 must be a matrix");
    c.dim_feedforward = static_cast<int>(l1.shape[0]);
  }
  std::vector<int> ratios;
  while (true) {
    const std::string n = SeanetName(3 * ratios.size() + 2, ".convtr.convtr.weight");
    if (!ck.Has(n)) break;
    LFM_ASSIGN_OR_RETURN(TensorView t, ck.Get(n));
    if (t.shape.rank != 3 || t.shape[2] % 2 != 0 || ratios.size() >= 8)
      return InvalidArgument(where + ": " + n + " must be [in, out, 2·ratio]");
    ratios.push_back(static_cast<int>(t.shape[2] / 2));
  }
  if (ratios.empty())
    return NotFound(where + " holds no SEANet decoder (decoder.model.2.convtr.convtr.weight)");
  c.ratios = ratios;
  LFM_ASSIGN_OR_RETURN(TensorView last, ck.Get(SeanetName(3 * ratios.size() + 2, ".conv.conv.weight")));
  if (last.shape.rank != 3) return InvalidArgument(where + ": the last SEANet conv must be [1, filters, k]");
  c.n_filters = static_cast<int>(last.shape[1]);
  c.last_kernel_size = static_cast<int>(last.shape[2]);
  LFM_ASSIGN_OR_RETURN(TensorView first, ck.Get(SeanetName(0, ".conv.conv.weight")));
  if (first.shape.rank != 3) return InvalidArgument(where + ": decoder.model.0 must be [out, H, k]");
  c.kernel_size = static_cast<int>(first.shape[2]);
  LFM_ASSIGN_OR_RETURN(TensorView res, ck.Get(SeanetName(3, ".block.1.conv.conv.weight")));
  if (res.shape.rank != 3) return InvalidArgument(where + ": the residual conv must be [out, in, k]");
  c.residual_kernel_size = static_cast<int>(res.shape[2]);
  LFM_RETURN_IF_ERROR(ValidateMimiConfig(c, where));
  return c;
}

std::string InProjName(const Checkpoint& ck, const std::string& layer) {
  const std::string a = layer + ".self_attn.in_proj_weight";  // Kyutai's released name
  return ck.Has(a) ? a : layer + ".self_attn.in_proj.weight";
}

}  // namespace

bool MimiDecoder::Recognizes(const std::string& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return fs::path(path).filename() == kMimiCheckpointName;
  if (!fs::is_directory(path, ec)) return false;
  if (fs::is_regular_file(fs::path(path) / kMimiCheckpointName, ec)) return true;
  const fs::path cfg = fs::path(path) / "config.json";
  if (!fs::is_regular_file(cfg, ec)) return false;
  Result<nlohmann::json> j = ReadJsonFile(cfg.string());
  return j.ok() && IsMimiConfig(*j);
}

Result<std::unique_ptr<MimiDecoder>> MimiDecoder::Load(const std::string& path, bool check_weights) {
  std::error_code ec;
  fs::path weights;
  fs::path cfg_dir;
  if (fs::is_directory(path, ec)) {
    cfg_dir = path;
    weights = fs::path(path) / kMimiCheckpointName;
  } else if (fs::is_regular_file(path, ec)) {
    cfg_dir = fs::path(path).parent_path();
    weights = path;
  } else {
    return NotFound(path + " does not exist; give Kyutai's Mimi checkpoint (" + kMimiCheckpointName +
                    ") or the folder that holds it");
  }
  std::optional<MimiConfig> config;
  const fs::path cfg = cfg_dir / "config.json";
  if (fs::is_regular_file(cfg, ec)) {
    LFM_ASSIGN_OR_RETURN(nlohmann::json j, ReadJsonFile(cfg.string()));
    if (IsMimiConfig(j)) {
      LFM_ASSIGN_OR_RETURN(MimiConfig c, ParseMimiConfig(j, cfg.string()));
      config = c;
      if (fs::is_directory(path, ec) && !fs::is_regular_file(weights, ec))
        weights = cfg_dir / "model.safetensors";
    }
  }
  if (!fs::is_regular_file(weights, ec)) {
    return NotFound(
        path + " holds neither " + kMimiCheckpointName +
        " (Kyutai's Mimi checkpoint, as in an LFM2-Audio-1.5B snapshot) nor a Mimi config.json with "
        "model.safetensors");
  }
  LFM_ASSIGN_OR_RETURN(Checkpoint ck, Checkpoint::Open(weights.string()));
  if (check_weights) LFM_RETURN_IF_ERROR(CheckWeightsFinite(ck).WithContext("loading " + weights.string()));
  return Load(config, std::move(ck), weights.string());
}

Result<std::unique_ptr<MimiDecoder>> MimiDecoder::Load(std::optional<MimiConfig> config, Checkpoint weights,
                                                       const std::string& where) {
  std::unique_ptr<MimiDecoder> m(new MimiDecoder());
  m->ckpt_.emplace(std::move(weights));
  const Checkpoint& ck = *m->ckpt_;
  if (!config) {
    LFM_ASSIGN_OR_RETURN(MimiConfig c, ConfigFromTensors(ck, where));
    config = c;
  }
  const MimiConfig& c = m->config_ = *config;
  LFM_RETURN_IF_ERROR(ValidateMimiConfig(c, where));
  const int64_t H = c.latent_dim, D = c.codebook_dim, V = c.codebook_size, C = c.num_codebooks;
  auto at = [&](Status s) { return s.ok() ? s : s.WithContext(where); };

  // Split RVQ: the semantic codebook and the first C − 1 acoustic ones, rows divided by their usage once.
  if (C > 1 && !ck.Has(Codebook(C - 1) + "embedding_sum")) {
    return InvalidArgument(StrFormat(
        "%s: %lld codebooks per frame need acoustic codebook %lld (%sembedding_sum), "
        "which the file lacks",
        where.c_str(), static_cast<long long>(C), static_cast<long long>(C - 2), Codebook(C - 1).c_str()));
  }
  m->codebooks_.Reset(static_cast<size_t>(C * V * D));
  for (int64_t k = 0; k < C; ++k) {
    AlignedBuffer<float> sum, usage;
    LFM_RETURN_IF_ERROR(at(LoadF32(ck, Codebook(k) + "embedding_sum", Shape{V, D}, &sum)));
    LFM_RETURN_IF_ERROR(at(LoadF32(ck, Codebook(k) + "cluster_usage", Shape{V}, &usage)));
    float* e = m->codebooks_.data() + k * V * D;
    for (int64_t v = 0; v < V; ++v) {
      const float u = std::max(usage[v], c.codebook_epsilon);
      for (int64_t d = 0; d < D; ++d) e[v * D + d] = sum[v * D + d] / u;
    }
  }
  LFM_ASSIGN_OR_RETURN(m->proj_first_, LoadMatrix(ck, kFirst + "output_proj.weight", Shape{H, D, 1}, H, D));
  LFM_ASSIGN_OR_RETURN(m->proj_rest_, LoadMatrix(ck, kRest + "output_proj.weight", Shape{H, D, 1}, H, D));
  LFM_RETURN_IF_ERROR(
      at(LoadF32(ck, "upsample.convtr.convtr.convtr.weight", Shape{H, 1, c.upsample_kernel}, &m->upsample_)));

  // Decoder transformer.
  const int64_t F = c.dim_feedforward, hd = c.head_dim();
  if (ck.Has(kLayers + std::to_string(c.num_layers) + ".norm1.weight")) {
    return InvalidArgument(
        StrFormat("%s holds more decoder transformer layers than the %d its config.json says", where.c_str(),
                  c.num_layers));
  }
  m->layers_.resize(c.num_layers);
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = kLayers + std::to_string(i);
    Layer& l = m->layers_[i];
    LFM_RETURN_IF_ERROR(at(LoadLayerNorm(ck, p + ".norm1", H, c.norm_eps, &l.norm1)));
    LFM_RETURN_IF_ERROR(at(LoadLayerNorm(ck, p + ".norm2", H, c.norm_eps, &l.norm2)));
    // Packed once for ops::PackedMatMul: a call's latent steps read each matrix once.
    LFM_ASSIGN_OR_RETURN(ops::Weight in_proj, LoadMatrix(ck, InProjName(ck, p), 3 * H, H));
    LFM_ASSIGN_OR_RETURN(ops::Weight out_proj, LoadMatrix(ck, p + ".self_attn.out_proj.weight", H, H));
    LFM_ASSIGN_OR_RETURN(ops::Weight linear1, LoadMatrix(ck, p + ".linear1.weight", F, H));
    LFM_ASSIGN_OR_RETURN(ops::Weight linear2, LoadMatrix(ck, p + ".linear2.weight", H, F));
    l.in_proj = ops::PackWeight(in_proj);
    l.out_proj = ops::PackWeight(out_proj);
    l.linear1 = ops::PackWeight(linear1);
    l.linear2 = ops::PackWeight(linear2);
    LFM_RETURN_IF_ERROR(at(LoadF32(ck, p + ".layer_scale_1.scale", Shape{H}, &l.ls1)));
    LFM_RETURN_IF_ERROR(at(LoadF32(ck, p + ".layer_scale_2.scale", Shape{H}, &l.ls2)));
  }
  // moshi's rope: freqs = exp(arange(hd/2) · (−ln(max_period)·2/hd)), every step in f32.
  m->inv_freq_.Reset(static_cast<size_t>(hd / 2));
  const float step = static_cast<float>(-std::log(c.max_period) * 2 / static_cast<double>(hd));
  for (int64_t i = 0; i < hd / 2; ++i) m->inv_freq_[i] = std::exp(static_cast<float>(i) * step);

  // SEANet decoder.
  int64_t ch = c.seanet_width();
  LFM_RETURN_IF_ERROR(
      at(LoadCausalConv1d(ck, SeanetName(0, ".conv.conv"), H, ch, c.kernel_size, true, &m->conv_in_)));
  m->stages_.resize(c.ratios.size());
  for (size_t i = 0; i < c.ratios.size(); ++i) {
    Stage& s = m->stages_[i];
    const int64_t r = c.ratios[i], half = ch / 2;
    LFM_RETURN_IF_ERROR(at(LoadCausalConvTranspose1d(ck, SeanetName(3 * i + 2, ".convtr.convtr"), ch, half,
                                                     2 * r, r, true, &s.up)));
    LFM_RETURN_IF_ERROR(at(LoadCausalConv1d(ck, SeanetName(3 * i + 3, ".block.1.conv.conv"), half,
                                            half / c.compress, c.residual_kernel_size, true, &s.res1)));
    LFM_RETURN_IF_ERROR(at(LoadCausalConv1d(ck, SeanetName(3 * i + 3, ".block.3.conv.conv"),
                                            half / c.compress, half, 1, true, &s.res2)));
    ch = half;
  }
  LFM_RETURN_IF_ERROR(at(LoadCausalConv1d(ck, SeanetName(3 * c.ratios.size() + 2, ".conv.conv"), ch,
                                          c.channels, c.last_kernel_size, true, &m->conv_out_)));
  return m;
}

double MimiDecoder::macs_per_frame() const {
  const double s = static_cast<double>(steps_per_frame());
  double macs = 2.0 * static_cast<double>(proj_first_.rows * proj_first_.cols);
  const double H = config_.d_model;
  for (const Layer& l : layers_) {
    macs += s * static_cast<double>(l.in_proj.rows * l.in_proj.cols + l.out_proj.rows * l.out_proj.cols +
                                    l.linear1.rows * l.linear1.cols + l.linear2.rows * l.linear2.cols);
    macs += s * 2.0 * H * config_.context;  // q·k and the weighted sum of v over a full context
  }
  double rows = s;
  macs += rows * static_cast<double>(conv_in_.macs_per_row());
  for (const Stage& st : stages_) {
    macs += rows * static_cast<double>(st.up.macs_per_input_row());
    rows *= static_cast<double>(st.up.stride);
    macs += rows * static_cast<double>(st.res1.macs_per_row() + st.res2.macs_per_row());
  }
  return macs + rows * static_cast<double>(conv_out_.macs_per_row());
}

size_t MimiDecoder::weight_bytes() const {
  size_t b = proj_first_.bytes() + proj_rest_.bytes() + conv_in_.weight_bytes() + conv_out_.weight_bytes();
  for (const Layer& l : layers_)
    b += l.in_proj.bytes() + l.out_proj.bytes() + l.linear1.bytes() + l.linear2.bytes();
  for (const Stage& s : stages_) b += s.up.weight_bytes() + s.res1.weight_bytes() + s.res2.weight_bytes();
  return b;
}

// ---- State and scratch ----

namespace {
// The convolutions with history, in the order conv_hist_ / win_ hold them: model.0, then per stage the
// transposed conv and the residual k3 conv, then the last conv. Calls fn(in, history_rows, rows per latent
// step).
template <typename Fn>
void ForEachConv(const MimiDecoder& m, const std::vector<MimiDecoder::Stage>& stages,
                 const CausalConv1d& first, const CausalConv1d& last, Fn&& fn) {
  size_t rows = 1;
  fn(first.in, first.history_rows(), rows);
  for (const MimiDecoder::Stage& s : stages) {
    fn(s.up.in, s.up.history_rows(), rows);
    rows *= s.up.stride;
    fn(s.res1.in, s.res1.history_rows(), rows);
  }
  fn(last.in, last.history_rows(), rows);
}
}  // namespace

Result<MimiState> MimiState::Create(const MimiDecoder& model, size_t max_frames_per_call, MimiWindow window) {
  if (max_frames_per_call == 0 || max_frames_per_call > kMaxFramesPerCall)
    return InvalidArgument(
        "MimiState: max_frames_per_call must be in [1, 256] (20 s; longer input is decoded in pieces)");
  MimiState s;
  s.model_ = &model;
  s.window_ = window;
  s.max_frames_ = max_frames_per_call;
  const MimiConfig& c = model.config_;
  const size_t H = c.d_model;
  s.up_hist_.Reset(static_cast<size_t>(c.latent_dim));
  const size_t rows = static_cast<size_t>(c.context) - 1 + max_frames_per_call * model.steps_per_frame() +
                      (c.context + 1) / 2;
  s.k_.resize(model.layers_.size());
  s.v_.resize(model.layers_.size());
  for (size_t i = 0; i < model.layers_.size(); ++i) {
    s.k_[i].Reset(rows * H);
    s.v_[i].Reset(rows * H);
  }
  ForEachConv(model, model.stages_, model.conv_in_, model.conv_out_,
              [&](size_t in, size_t hist, size_t) { s.conv_hist_.emplace_back(hist * in); });
  return s;
}

void MimiState::Reset() {
  frames_ = 0;
  pos_ = 0;
  kv_start_ = 0;
  kv_len_ = 0;
  up_hist_.Zero();
  for (AlignedBuffer<float>& h : conv_hist_) h.Zero();
}

size_t MimiState::live_bytes() const {
  size_t b = up_hist_.size() * sizeof(float);
  for (const AlignedBuffer<float>& h : conv_hist_) b += h.size() * sizeof(float);
  if (model_ != nullptr) {
    b += 2 * k_.size() * (static_cast<size_t>(model_->config_.context) - 1) * model_->config_.d_model *
         sizeof(float);
  }
  return b;
}

size_t MimiState::bytes() const {
  size_t b = up_hist_.size() * sizeof(float);
  for (const AlignedBuffer<float>& h : conv_hist_) b += h.size() * sizeof(float);
  for (size_t i = 0; i < k_.size(); ++i) b += (k_[i].size() + v_[i].size()) * sizeof(float);
  return b;
}

Result<MimiScratch> MimiScratch::Create(const MimiDecoder& model, size_t max_frames_per_call,
                                        int max_threads) {
  if (max_frames_per_call == 0 || max_frames_per_call > kMaxFramesPerCall)
    return InvalidArgument(
        "MimiScratch: max_frames_per_call must be in [1, 256] (20 s; longer input is decoded in pieces)");
  if (max_threads < 1 || max_threads > 1024)
    return InvalidArgument("MimiScratch: max_threads must be in [1, 1024]");
  const MimiConfig& c = model.config_;
  MimiScratch s;
  s.model_ = &model;
  s.max_frames_ = max_frames_per_call;
  s.max_threads_ = max_threads;
  const size_t T = max_frames_per_call, L = T * model.steps_per_frame(), H = c.d_model;
  s.sum_.Reset(T * c.codebook_dim);
  s.latent_.Reset(T * c.latent_dim);
  s.acoustic_.Reset(T * c.latent_dim);
  s.x_.Reset(L * H);
  s.xn_.Reset(L * H);
  s.qkv_.Reset(L * 3 * H);
  s.att_.Reset(L * H);
  s.tmp_.Reset(L * H);
  s.ff_.Reset(L * c.dim_feedforward);
  s.scores_.Reset(static_cast<size_t>(max_threads) * c.context);
  ForEachConv(
      model, model.stages_, model.conv_in_, model.conv_out_,
      [&](size_t in, size_t hist, size_t per_step) { s.win_.emplace_back((hist + per_step * L) * in); });
  s.h0_.Reset(L * model.conv_in_.out);
  size_t rows = L;
  for (const MimiDecoder::Stage& st : model.stages_) {
    rows *= st.up.stride;
    s.act_.emplace_back(rows * st.up.out);    // stage output (and residual sum)
    s.act_.emplace_back(rows * st.res1.out);  // hidden
    s.act_.emplace_back(rows * st.res2.out);  // residual branch output
  }
  return s;
}

size_t MimiScratch::bytes() const {
  size_t b = 0;
  for (const AlignedBuffer<float>* p :
       {&sum_, &latent_, &acoustic_, &x_, &xn_, &qkv_, &att_, &tmp_, &ff_, &scores_, &h0_})
    b += p->size();
  for (const AlignedBuffer<float>& w : win_) b += w.size();
  for (const AlignedBuffer<float>& a : act_) b += a.size();
  return b * sizeof(float);
}

// ---- The step ----

namespace {

// y = ELU(x) for n values.
void Elu(const float* x, size_t n, float* y) { ops::Elu(x, y, n); }

// Copies the history into the window's front; after the call the caller keeps the window's last rows.
void BeginWindow(const AlignedBuffer<float>& hist, AlignedBuffer<float>& win) {
  if (hist.size()) std::memcpy(win.data(), hist.data(), hist.size() * sizeof(float));
}
void EndWindow(AlignedBuffer<float>& hist, const AlignedBuffer<float>& win, size_t rows, size_t in) {
  const size_t h = hist.size() / std::max<size_t>(in, 1);
  if (h) std::memcpy(hist.data(), win.data() + rows * in, h * in * sizeof(float));  // rows [rows, rows + h)
}

}  // namespace

Result<size_t> MimiStep(const MimiDecoder& m, MimiState& st, std::span<const int32_t> codes,
                        std::span<float> out, MimiScratch& sc, ThreadTeam& team, TraceSink* sink) {
  const MimiConfig& c = m.config_;
  const size_t C = m.codebooks(), spf = m.samples_per_frame();
  if (st.model_ != &m || sc.model_ != &m)
    return InvalidArgument("MimiStep: the state and the scratch must be created for this decoder");
  if (sc.max_frames_ < st.max_frames_)
    return InvalidArgument("MimiStep: the scratch must take at least the state's max_frames_per_call");
  if (team.size() > sc.max_threads_)
    return InvalidArgument(
        StrFormat("MimiStep: the team has %d threads, the scratch was made for %d; create it "
                  "with max_threads >= the team size",
                  team.size(), sc.max_threads_));
  if (codes.size() % C != 0)
    return InvalidArgument(
        StrFormat("Mimi codes must be whole frames of %zu; got %zu values", C, codes.size()));
  const size_t frames = codes.size() / C;
  if (out.size() < frames * spf)
    return InvalidArgument(
        StrFormat("Mimi output holds %zu samples; %zu frames need %zu", out.size(), frames, frames * spf));
  for (size_t i = 0; i < codes.size(); ++i) {
    if (codes[i] < 0 || static_cast<size_t>(codes[i]) >= m.codebook_size()) {
      return InvalidArgument(
          StrFormat("Mimi code %d (frame %zu, codebook %zu) is outside [0, %zu); an "
                    "end-of-audio code must be dropped before decoding",
                    codes[i], i / C, i % C, m.codebook_size()));
    }
  }
  const size_t H = c.d_model, D = c.codebook_dim, V = c.codebook_size, S = m.steps_per_frame();
  const size_t heads = c.num_heads, hd = c.head_dim(), ctx = c.context;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));

  size_t done = 0;
  while (done < frames) {
    const size_t T = std::min(st.max_frames_, frames - done), L = T * S;
    const int32_t* cf = codes.data() + done * C;

    // 1. Split RVQ dequantisation: latent [T, H].
    float* sum = sc.sum_.data();
    for (size_t t = 0; t < T; ++t) {
      std::memcpy(sum + t * D, m.codebooks_.data() + static_cast<size_t>(cf[t * C]) * D, D * sizeof(float));
    }
    ops::MatMul(sum, T, D, m.proj_first_, nullptr, sc.latent_.data(), H, team);
    if (sink) sink->Record("latent_semantic", sc.latent_.data(), T, H, H);
    std::fill(sum, sum + T * D, 0.0f);
    for (size_t t = 0; t < T; ++t)
      for (size_t k = 1; k < C; ++k)
        ops::Add(sum + t * D, m.codebooks_.data() + (k * V + static_cast<size_t>(cf[t * C + k])) * D,
                 sum + t * D, D);
    if (C > 1) {
      ops::MatMul(sum, T, D, m.proj_rest_, nullptr, sc.acoustic_.data(), H, team);
      if (sink) sink->Record("latent_acoustic", sc.acoustic_.data(), T, H, H);
      ops::Add(sc.latent_.data(), sc.acoustic_.data(), sc.latent_.data(), T * H);
    }
    if (sink) sink->Record("latent", sc.latent_.data(), T, H, H);

    // 2. Upsample: x[t·s + r] = z[t]·w[r] + z[t − 1]·w[s + r] (depthwise, history: the last latent row).
    float* x = sc.x_.data();
    const size_t ks = static_cast<size_t>(c.upsample_kernel);
    for (size_t t = 0; t < T; ++t) {
      const float* z = sc.latent_.data() + t * H;
      const float* zp = t ? z - H : st.up_hist_.data();
      for (size_t r = 0; r < S; ++r) {
        float* y = x + (t * S + r) * H;
        for (size_t ch = 0; ch < H; ++ch)
          y[ch] = z[ch] * m.upsample_[ch * ks + r] + zp[ch] * m.upsample_[ch * ks + S + r];
      }
    }
    std::memcpy(st.up_hist_.data(), sc.latent_.data() + (T - 1) * H, H * sizeof(float));
    if (sink) sink->Record("upsample", x, L, H, H);

    // 3. Decoder transformer over L steps at positions pos0 …
    const int64_t pos0 = st.pos_;
    const size_t held = st.kv_len_;  // cache rows [start, start + held) are positions pos0 − held …
    if (!st.k_.empty() && (st.kv_start_ + held + L) * H > st.k_[0].size()) {
      for (size_t li = 0; li < m.layers_.size(); ++li) {  // move the held rows to the front
        std::memmove(st.k_[li].data(), st.k_[li].data() + st.kv_start_ * H, held * H * sizeof(float));
        std::memmove(st.v_[li].data(), st.v_[li].data() + st.kv_start_ * H, held * H * sizeof(float));
      }
      st.kv_start_ = 0;
    }
    float* xn = sc.xn_.data();
    float* qkv = sc.qkv_.data();
    for (size_t li = 0; li < m.layers_.size(); ++li) {
      const MimiDecoder::Layer& l = m.layers_[li];
      float* kc = st.k_[li].data() + st.kv_start_ * H;  // row 0: the oldest held
      float* vc = st.v_[li].data() + st.kv_start_ * H;
      l.norm1.Forward(x, L, H, xn, H);
      ops::PackedMatMul(xn, L, H, l.in_proj, nullptr, qkv, 3 * H, team);
      for (size_t r = 0; r < L; ++r) {
        float cs[512];
        const float pos = static_cast<float>(pos0 + static_cast<int64_t>(r));
        const size_t half = hd / 2;
        float* cosv = cs;
        float* sinv = cs + 256;
        for (size_t i = 0; i < half; ++i) {
          const float a = pos * m.inv_freq_[i];
          cosv[i] = std::cos(a);
          sinv[i] = std::sin(a);
        }
        float* q = qkv + r * 3 * H;
        for (size_t h = 0; h < heads; ++h) {
          ops::RopeInterleaved(q + h * hd, hd, cosv, sinv);
          ops::RopeInterleaved(q + H + h * hd, hd, cosv, sinv);
        }
        std::memcpy(kc + (held + r) * H, q + H, H * sizeof(float));
        std::memcpy(vc + (held + r) * H, q + 2 * H, H * sizeof(float));
      }
      float* att = sc.att_.data();
      const bool streaming = st.window_ == MimiWindow::kStreaming;
      team.Run(L * heads, [&](size_t task, int thread) {
        const size_t r = task % L, h = task / L;  // a head's queries in turn: its K/V rows stay in L2
        const int64_t p = pos0 + static_cast<int64_t>(r);
        int64_t lo = std::max<int64_t>(p - static_cast<int64_t>(ctx) + 1, 0);
        if (streaming) {
          const int64_t frame_end = (p / static_cast<int64_t>(S) + 1) * static_cast<int64_t>(S);
          lo = std::max(lo, frame_end - static_cast<int64_t>(ctx));
        }
        const size_t first = static_cast<size_t>(lo - (pos0 - static_cast<int64_t>(held)));
        const size_t n = static_cast<size_t>(p - lo + 1);
        ops::AttendOne(qkv + r * 3 * H + h * hd, kc + first * H + h * hd, H, vc + first * H + h * hd, H, n,
                       hd, scale, sc.scores_.data() + static_cast<size_t>(thread) * ctx,
                       att + r * H + h * hd);
      });
      float* tmp = sc.tmp_.data();
      ops::PackedMatMul(att, L, H, l.out_proj, nullptr, tmp, H, team);
      for (size_t r = 0; r < L; ++r) {
        ops::Mul(tmp + r * H, l.ls1.data(), tmp + r * H, H);
        ops::Add(x + r * H, tmp + r * H, x + r * H, H);
      }
      l.norm2.Forward(x, L, H, xn, H);
      float* ff = sc.ff_.data();
      ops::PackedMatMul(xn, L, H, l.linear1, nullptr, ff, c.dim_feedforward, team);
      ops::Gelu(ff, ff, L * c.dim_feedforward);
      ops::PackedMatMul(ff, L, c.dim_feedforward, l.linear2, nullptr, tmp, H, team);
      for (size_t r = 0; r < L; ++r) {
        ops::Mul(tmp + r * H, l.ls2.data(), tmp + r * H, H);
        ops::Add(x + r * H, tmp + r * H, x + r * H, H);
      }
      TraceIndexed(sink, "transformer/layer%zu", li, x, L, H, H);
    }
    // Keep the last context − 1 keys and values for the next call (where they are).
    const size_t total = held + L, keep = std::min(total, ctx - 1);
    st.kv_start_ += total - keep;
    st.kv_len_ = keep;
    st.pos_ += static_cast<int64_t>(L);
    if (sink) sink->Record("transformer/out", x, L, H, H);

    // 4. SEANet decoder, time-major, each conv reading its history then this call's rows.
    size_t wi = 0;
    {
      AlignedBuffer<float>& win = sc.win_[wi];
      const CausalConv1d& cv = m.conv_in_;
      BeginWindow(st.conv_hist_[wi], win);
      std::memcpy(win.data() + cv.history_rows() * cv.in, x, L * H * sizeof(float));
      cv.Forward(win.data(), L, sc.h0_.data(), cv.out, team);
      EndWindow(st.conv_hist_[wi], win, L, cv.in);
      ++wi;
      if (sink) sink->Record("seanet/model.0", sc.h0_.data(), L, cv.out, cv.out);
    }
    const float* h = sc.h0_.data();
    size_t rows = L;
    for (size_t i = 0; i < m.stages_.size(); ++i) {
      const MimiDecoder::Stage& s = m.stages_[i];
      AlignedBuffer<float>& uw = sc.win_[wi];
      BeginWindow(st.conv_hist_[wi], uw);
      Elu(h, rows * s.up.in, uw.data() + s.up.history_rows() * s.up.in);
      float* y = sc.act_[3 * i].data();
      s.up.Forward(uw.data(), rows, y, team);
      EndWindow(st.conv_hist_[wi], uw, rows, s.up.in);
      ++wi;
      rows *= s.up.stride;
      TraceIndexed(sink, "seanet/model.%zu", 3 * i + 2, y, rows, s.up.out, s.up.out);
      // Residual block: y += conv_k1(ELU(conv_k3(ELU(y)))).
      AlignedBuffer<float>& rw = sc.win_[wi];
      BeginWindow(st.conv_hist_[wi], rw);
      Elu(y, rows * s.res1.in, rw.data() + s.res1.history_rows() * s.res1.in);
      float* hid = sc.act_[3 * i + 1].data();
      s.res1.Forward(rw.data(), rows, hid, s.res1.out, team);
      EndWindow(st.conv_hist_[wi], rw, rows, s.res1.in);
      ++wi;
      Elu(hid, rows * s.res1.out, hid);
      float* br = sc.act_[3 * i + 2].data();
      s.res2.Forward(hid, rows, br, s.res2.out, team);
      ops::Add(y, br, y, rows * s.res2.out);
      TraceIndexed(sink, "seanet/model.%zu", 3 * i + 3, y, rows, s.res2.out, s.res2.out);
      h = y;
    }
    {
      AlignedBuffer<float>& win = sc.win_[wi];
      const CausalConv1d& cv = m.conv_out_;
      BeginWindow(st.conv_hist_[wi], win);
      Elu(h, rows * cv.in, win.data() + cv.history_rows() * cv.in);
      cv.Forward(win.data(), rows, out.data() + done * spf, 1, team);
      EndWindow(st.conv_hist_[wi], win, rows, cv.in);
    }
    st.frames_ += T;
    done += T;
  }
  return frames * spf;
}

Result<size_t> MimiFlush(MimiState& state, std::span<float>) {
  state.Reset();
  return size_t{0};
}

void MimiReset(MimiState& state) { state.Reset(); }

Result<std::unique_ptr<MimiSession>> MimiSession::Create(const MimiDecoder& model, size_t max_frames_per_call,
                                                         int max_threads, MimiWindow window) {
  LFM_ASSIGN_OR_RETURN(MimiState st, MimiState::Create(model, max_frames_per_call, window));
  LFM_ASSIGN_OR_RETURN(MimiScratch sc, MimiScratch::Create(model, max_frames_per_call, max_threads));
  return std::unique_ptr<MimiSession>(new MimiSession(model, std::move(st), std::move(sc)));
}

}  // namespace lfmvox
