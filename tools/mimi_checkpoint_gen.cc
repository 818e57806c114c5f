#include "tools/mimi_checkpoint_gen.h"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/file_write.h"
#include "io/safetensors.h"
#include "tensor/dtype.h"
#include "tools/random.h"

namespace lfmvox::tools {

namespace {

struct Builder {
  NormalRng rng;
  bool bf16 = false;
  std::vector<std::vector<float>> f32;
  std::vector<std::vector<uint16_t>> half;
  std::vector<TensorToWrite> tensors;

  void Add(const std::string& name, std::vector<int64_t> shape, float mean, float sd, bool uniform = false,
           float lo = 0, float hi = 0) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v)
      x = uniform ? lo + (hi - lo) * static_cast<float>(rng.Uniform()) : mean + sd * rng.Normal();
    if (bf16) {
      std::vector<uint16_t>& h = half.emplace_back(v.size());
      for (size_t i = 0; i < v.size(); ++i) h[i] = F32ToBf16(v[i]);
      tensors.push_back({name, DType::kBF16, std::move(shape), h.data(), h.size() * 2});
    } else {
      std::vector<float>& f = f32.emplace_back(std::move(v));
      tensors.push_back({name, DType::kF32, std::move(shape), f.data(), f.size() * 4});
    }
  }
  void Kernel(const std::string& name, std::vector<int64_t> shape, double fan_in) {
    Add(name, std::move(shape), 0, static_cast<float>(1.0 / std::sqrt(fan_in)));
  }
  void Bias(const std::string& name, int64_t n) { Add(name, {n}, 0, 0.02f); }
};

}  // namespace

MimiShape MimiShape::Tiny() {
  MimiShape s;
  s.latent = 32;
  s.codebook_dim = 16;
  s.bins = 64;
  s.codebooks = 4;
  s.stored_acoustic = 4;
  s.layers = 2;
  s.heads = 2;
  s.ffn = 64;
  s.context = 6;
  s.n_filters = 4;
  s.ratios = {3, 2};
  return s;
}

MimiShape MimiShape::Lfm2Demo() {
  MimiShape s;
  s.latent = 64;
  s.codebook_dim = 16;
  s.stored_acoustic = 9;
  s.layers = 1;
  s.ffn = 64;
  s.n_filters = 2;
  s.kyutai_layout = true;
  return s;
}

Status WriteRandomMimi(const std::string& dir, const MimiShape& s) {
  if (s.codebooks < 1 || s.stored_acoustic < s.codebooks - 1 || s.latent % s.heads != 0 || s.ratios.empty())
    return InvalidArgument("WriteRandomMimi: inconsistent shape");
  if (s.kyutai_layout && (s.context != 250 || s.heads != 8 || s.codebooks != 8))
    return InvalidArgument(
        "WriteRandomMimi: the kyutai layout has no config, so context, heads and codebooks "
        "must be get_mimi's (250, 8, 8)");
  Builder b{NormalRng(s.seed), false, {}, {}, {}};
  b.bf16 = s.bf16;
  const int64_t H = s.latent, D = s.codebook_dim, V = s.bins;
  b.f32.reserve(512);
  b.half.reserve(512);
  // Encoder-side tensors the decoder must skip (shapes as Kyutai's, at this width).
  b.Kernel("encoder.model.0.conv.conv.weight", {s.n_filters, 1, 7}, 7);
  b.Kernel("quantizer.rvq_first.input_proj.weight", {D, H, 1}, static_cast<double>(H));
  b.Kernel("downsample.conv.conv.conv.weight", {H, 1, 4}, 4);
  for (int k = 0; k <= s.stored_acoustic; ++k) {
    const std::string p = k == 0 ? "quantizer.rvq_first.vq.layers.0._codebook."
                                 : "quantizer.rvq_rest.vq.layers." + std::to_string(k - 1) + "._codebook.";
    b.Add(p + "embedding_sum", {V, D}, 0, 1);
    b.Add(p + "cluster_usage", {V}, 0, 0, true, 0.5f, 4.0f);
    if (k == 0) b.Add(p + "_initialized", {1}, 1, 0);
  }
  b.Kernel("quantizer.rvq_first.output_proj.weight", {H, D, 1}, static_cast<double>(D));
  b.Kernel("quantizer.rvq_rest.output_proj.weight", {H, D, 1}, static_cast<double>(D));
  b.Kernel("upsample.convtr.convtr.convtr.weight", {H, 1, 4}, 2);
  for (int i = 0; i < s.layers; ++i) {
    const std::string p = "decoder_transformer.transformer.layers." + std::to_string(i) + ".";
    b.Kernel(p + "self_attn.in_proj_weight", {3 * H, H}, static_cast<double>(H));
    b.Kernel(p + "self_attn.out_proj.weight", {H, H}, static_cast<double>(H));
    for (const char* n : {"norm1", "norm2"}) {
      b.Add(p + n + ".weight", {H}, 1, 0.1f);
      b.Add(p + n + ".bias", {H}, 0, 0.05f);
    }
    b.Kernel(p + "linear1.weight", {s.ffn, H}, static_cast<double>(H));
    b.Kernel(p + "linear2.weight", {H, s.ffn}, static_cast<double>(s.ffn));
    b.Add(p + "layer_scale_1.scale", {H}, 0, 0, true, 0.1f, 0.6f);
    b.Add(p + "layer_scale_2.scale", {H}, 0, 0, true, 0.1f, 0.6f);
  }
  int64_t ch = static_cast<int64_t>(s.n_filters) << s.ratios.size();
  b.Kernel("decoder.model.0.conv.conv.weight", {ch, H, 7}, static_cast<double>(H * 7));
  b.Bias("decoder.model.0.conv.conv.bias", ch);
  for (size_t i = 0; i < s.ratios.size(); ++i) {
    const int64_t r = s.ratios[i], half = ch / 2;
    const std::string t = "decoder.model." + std::to_string(3 * i + 2) + ".convtr.convtr.";
    b.Kernel(t + "weight", {ch, half, 2 * r}, static_cast<double>(ch * 2));  // fan_in C_in·k/stride
    b.Bias(t + "bias", half);
    const std::string rb = "decoder.model." + std::to_string(3 * i + 3) + ".block.";
    b.Kernel(rb + "1.conv.conv.weight", {half / 2, half, 3}, static_cast<double>(half * 3));
    b.Bias(rb + "1.conv.conv.bias", half / 2);
    b.Kernel(rb + "3.conv.conv.weight", {half, half / 2, 1}, static_cast<double>(half / 2));
    b.Bias(rb + "3.conv.conv.bias", half);
    ch = half;
  }
  const std::string last = "decoder.model." + std::to_string(3 * s.ratios.size() + 2) + ".conv.conv.";
  b.Kernel(last + "weight", {1, ch, 3}, static_cast<double>(ch * 3));
  b.Bias(last + "bias", 1);

  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError("cannot create " + dir + ": " + ec.message());
  if (s.kyutai_layout)
    return WriteSafetensors(dir + "/tokenizer-e351c8d8-checkpoint125.safetensors", b.tensors);
  LFM_RETURN_IF_ERROR(WriteSafetensors(dir + "/model.safetensors", b.tensors));
  nlohmann::json c = {
      {"model", "kyutai mimi (decoder side), random weights from lfmvox-mimi-checkpoint"},
      {"sample_rate", 24000},
      {"num_codebooks", s.codebooks},
      {"codebook_size", s.bins},
      {"codebook_dim", s.codebook_dim},
      {"latent_dim", s.latent},
      {"upsample", {{"stride", 2}, {"kernel_size", 4}, {"causal", true}, {"bias", false}}},
      {"seanet",
       {{"channels", 1},
        {"dimension", s.latent},
        {"n_filters", s.n_filters},
        {"ratios", s.ratios},
        {"kernel_size", 7},
        {"residual_kernel_size", 3},
        {"last_kernel_size", 3},
        {"compress", 2},
        {"n_residual_layers", 1},
        {"causal", true},
        {"true_skip", true},
        {"norm", "none"},
        {"pad_mode", "constant"},
        {"activation", "ELU"}}},
      {"transformer",
       {{"d_model", s.latent},
        {"num_heads", s.heads},
        {"num_layers", s.layers},
        {"dim_feedforward", s.ffn},
        {"context", s.context},
        {"max_period", 10000},
        {"causal", true},
        {"conv_layout", true},
        {"gating", "none"},
        {"norm", "layer_norm"},
        {"positional_embedding", "rope"},
        {"norm_eps", 1e-5}}},
      {"quantizer", {{"dimension", s.codebook_dim}, {"bins", s.bins}}},
  };
  return WriteWholeFile(dir + "/config.json", c.dump(1) + "\n");
}

}  // namespace lfmvox::tools
