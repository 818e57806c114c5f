#include "tools/checkpoint_gen.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "base/file_write.h"
#include "io/safetensors.h"
#include "tensor/dtype.h"
#include "tools/random.h"

namespace lfmvox::tools {

namespace {

struct Builder {
  NormalRng rng;
  std::vector<std::vector<uint16_t>> bf16;  // owned storage (stable: vector of vectors)
  std::vector<std::vector<float>> f32;
  std::vector<TensorToWrite> tensors;

  bool uniform = false;  // uniform values of the same variance (fast, for huge checkpoints)

  // mean + stddev·N (or uniform of that variance), rounded to bf16.
  void Add(const std::string& name, std::vector<int64_t> shape, float mean, float stddev) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<uint16_t>& v = bf16.emplace_back(static_cast<size_t>(n));
    if (uniform) {
      const float a = stddev * 1.7320508f * 0x1.0p-31f;  // √3·σ over a signed 32-bit draw
      for (size_t i = 0; i < v.size(); i += 2) {
        const uint64_t r = rng.Next();
        v[i] = F32ToBf16(mean + a * static_cast<float>(static_cast<int32_t>(r)));
        if (i + 1 < v.size())
          v[i + 1] = F32ToBf16(mean + a * static_cast<float>(static_cast<int32_t>(r >> 32)));
      }
    } else {
      for (auto& x : v) x = F32ToBf16(mean + stddev * rng.Normal());
    }
    tensors.push_back({name, DType::kBF16, std::move(shape), v.data(), v.size() * 2});
  }
  void Matrix(const std::string& name, int64_t out, int64_t in) {
    Add(name, {out, in}, 0.0f, 1.0f / std::sqrt(static_cast<float>(in)));
  }
  void Norm(const std::string& name, int64_t n) { Add(name, {n}, 1.0f, 0.1f); }
};

}  // namespace

Status WriteRandomDetokenizer(const std::string& dir, const DetokenizerShape& s) {
  if (s.hidden % s.heads != 0 || s.heads % s.kv_heads != 0 || s.n_fft % 2 != 0) {
    return InvalidArgument("generator: heads must divide hidden, kv_heads divide heads, n_fft be even");
  }
  const std::string out = dir + "/audio_detokenizer";
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec) return IoError("cannot create " + out + ": " + ec.message());

  static const char* kPattern[] = {
      "conv", "conv", "sliding_attention", "conv", "sliding_attention", "conv", "sliding_attention", "conv"};
  std::vector<std::string> types;
  for (int i = 0; i < s.layers; ++i) types.push_back(kPattern[i % 8]);
  const int hd = s.hidden / s.heads;
  nlohmann::json cfg = {{"architectures", {"Lfm25AudioTokenizer"}},
                        {"model_type", "lfm2"},
                        {"vocab_size", s.vocab},
                        {"hidden_size", s.hidden},
                        {"intermediate_size", s.ffn},
                        {"block_auto_adjust_ff_dim", false},
                        {"block_multiple_of", 256},
                        {"block_ffn_dim_multiplier", 1.0},
                        {"num_hidden_layers", s.layers},
                        {"num_attention_heads", s.heads},
                        {"num_key_value_heads", s.kv_heads},
                        {"layer_types", types},
                        {"sliding_window", s.window},
                        {"output_size", s.n_fft + 2},
                        {"max_position_embeddings", 128000},
                        {"norm_eps", 1e-5},
                        {"conv_bias", false},
                        {"conv_L_cache", 3},
                        {"rope_theta", 1000000.0},
                        {"tie_word_embeddings", true},
                        {"pad_token_id", 0},
                        {"bos_token_id", 1},
                        {"eos_token_id", 7},
                        {"use_cache", false}};
  if (s.codebooks != 8) cfg["codebooks"] = s.codebooks;
  LFM_RETURN_IF_ERROR(WriteWholeFile(out + "/config.json", cfg.dump(2) + "\n"));

  Builder b{NormalRng(s.seed), {}, {}, {}, false};
  b.bf16.reserve(16 * static_cast<size_t>(s.layers) + 8);
  const int64_t H = s.hidden;
  b.Add("emb.emb.weight", {int64_t{s.codebooks} * s.codebook_size, H}, 0.0f, 1.0f);
  b.Add("lfm.embed_tokens.weight", {s.vocab, H}, 0.0f, 1.0f);
  b.Norm("lfm.embedding_norm.weight", H);
  for (int i = 0; i < s.layers; ++i) {
    const std::string p = "lfm.layers." + std::to_string(i) + ".";
    b.Norm(p + "operator_norm.weight", H);
    b.Norm(p + "ffn_norm.weight", H);
    if (types[static_cast<size_t>(i)] == "conv") {
      b.Matrix(p + "conv.in_proj.weight", 3 * H, H);
      b.Add(p + "conv.conv.weight", {H, 1, 3}, 0.0f, 1.0f / std::sqrt(3.0f));
      b.Matrix(p + "conv.out_proj.weight", H, H);
    } else {
      b.Matrix(p + "self_attn.q_proj.weight", H, H);
      b.Matrix(p + "self_attn.k_proj.weight", int64_t{s.kv_heads} * hd, H);
      b.Matrix(p + "self_attn.v_proj.weight", int64_t{s.kv_heads} * hd, H);
      b.Matrix(p + "self_attn.out_proj.weight", H, H);
      b.Norm(p + "self_attn.q_layernorm.weight", hd);
      b.Norm(p + "self_attn.k_layernorm.weight", hd);
    }
    b.Matrix(p + "feed_forward.w1.weight", s.ffn, H);
    b.Matrix(p + "feed_forward.w3.weight", s.ffn, H);
    b.Matrix(p + "feed_forward.w2.weight", H, s.ffn);
  }
  b.Matrix("lin.weight", s.n_fft + 2, H);
  b.Add("lin.bias", {s.n_fft + 2}, 0.0f, 0.05f);
  // istft.window: torch.hann_window(n_fft) (periodic), stored as F32.
  std::vector<float>& w = b.f32.emplace_back(static_cast<size_t>(s.n_fft));
  for (int n = 0; n < s.n_fft; ++n) {
    w[static_cast<size_t>(n)] = static_cast<float>(0.5 - 0.5 * std::cos(2.0 * M_PI * n / s.n_fft));
  }
  b.tensors.push_back({"istft.window", DType::kF32, {s.n_fft}, w.data(), w.size() * 4});
  return WriteSafetensors(out + "/model.safetensors", b.tensors);
}

Status EnsureRealSizeModel(const std::string& dir, const std::string& tokenizer) {
  const std::string done = dir + "/.complete";
  if (std::filesystem::exists(done)) return Status::Ok();
  LFM_RETURN_IF_ERROR(WriteRandomLfm25Audio(dir, Lfm25AudioShape{}));
  LFM_RETURN_IF_ERROR(WriteRandomDetokenizer(dir, DetokenizerShape{}));
  std::error_code ec;
  std::filesystem::copy_file(tokenizer, dir + "/tokenizer.json",
                             std::filesystem::copy_options::overwrite_existing, ec);
  if (ec) return IoError("cannot copy " + tokenizer + ": " + ec.message());
  return WriteWholeFile(done, "written by lfmvox tools::EnsureRealSizeModel\n");
}

Lfm25AudioShape Lfm25AudioShape::Demo() {
  Lfm25AudioShape s;
  s.hidden = 256;
  s.layers = 6;
  s.attention_layers = {2, 4};
  s.heads = 4;
  s.kv_heads = 2;
  s.block_ff_dim = 768;
  s.multiple_of = 128;
  s.vocab = 6656;
  s.depth_dim = 256;
  s.depth_layers = 2;
  s.enc_d = 64;
  s.enc_layers = 2;
  s.enc_heads = 4;
  s.enc_channels = 32;
  return s;
}

Status WriteRandomLfm25Audio(const std::string& dir, const Lfm25AudioShape& s) {
  if (s.hidden % s.heads != 0 || s.heads % s.kv_heads != 0 || s.depth_dim % 32 != 0) {
    return InvalidArgument("generator: heads must divide hidden, kv_heads divide heads, 32 divide depth_dim");
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError("cannot create " + dir + ": " + ec.message());
  const int64_t H = s.hidden, D = s.depth_dim, C = s.codebooks, V = s.audio_vocab;
  int64_t ff = static_cast<int64_t>(2.0 * s.block_ff_dim / 3.0);
  ff = s.multiple_of * ((ff + s.multiple_of - 1) / s.multiple_of);
  // liquid-audio's depthformer: 32 query heads, 8 KV heads, FFN 256·ceil(int(8D/3)/256).
  const int64_t dq = D, dkv = D / 4, dff = 256 * ((static_cast<int64_t>(8.0 * D / 3.0) + 255) / 256);
  nlohmann::json cfg = {{"architectures", {"Lfm2AudioForConditionalGeneration"}},
                        {"codebooks", s.codebooks},
                        {"tie_audio_embeddings", false},
                        {"semantic_codebook_factor", 100},
                        {"codebook_weight", "log"},
                        {"interleaved_n_text", s.n_text},
                        {"interleaved_n_audio", s.n_audio},
                        {"preprocessor",
                         {{"sample_rate", 16000},
                          {"normalize", "per_feature"},
                          {"window_size", 0.025},
                          {"window_stride", 0.01},
                          {"window", "hann"},
                          {"features", 128},
                          {"n_fft", 512},
                          {"log", true},
                          {"frame_splicing", 1},
                          {"dither", 1e-5},
                          {"pad_to", 0},
                          {"pad_value", 0.0}}},
                        {"lfm",
                         {{"architectures", {"Lfm2ForCausalLM"}},
                          {"model_type", "lfm2"},
                          {"vocab_size", s.vocab},
                          {"hidden_size", s.hidden},
                          {"num_hidden_layers", s.layers},
                          {"num_attention_heads", s.heads},
                          {"num_key_value_heads", s.kv_heads},
                          {"max_position_embeddings", 128000},
                          {"norm_eps", 1e-5},
                          {"conv_bias", false},
                          {"conv_L_cache", 3},
                          {"block_ff_dim", s.block_ff_dim},
                          {"block_multiple_of", s.multiple_of},
                          {"block_ffn_dim_multiplier", 1.0},
                          {"block_auto_adjust_ff_dim", true},
                          {"full_attn_idxs", s.attention_layers},
                          {"rope_theta", 1e6},
                          {"tie_embedding", true},
                          {"pad_token_id", 0},
                          {"bos_token_id", 1},
                          {"eos_token_id", 7},
                          {"use_cache", true}}},
                        {"encoder",
                         {{"feat_in", 128},
                          {"feat_out", -1},
                          {"n_layers", s.enc_layers},
                          {"d_model", s.enc_d},
                          {"subsampling", "dw_striding"},
                          {"subsampling_factor", 8},
                          {"subsampling_conv_channels", s.enc_channels},
                          {"causal_downsampling", false},
                          {"reduction", nullptr},
                          {"reduction_position", nullptr},
                          {"reduction_factor", 1},
                          {"ff_expansion_factor", 4},
                          {"self_attention_model", "rel_pos"},
                          {"n_heads", s.enc_heads},
                          {"att_context_size", {-1, -1}},
                          {"xscaling", false},
                          {"untie_biases", true},
                          {"pos_emb_max_len", 5000},
                          {"conv_kernel_size", 9},
                          {"conv_norm_type", "batch_norm"},
                          {"conv_context_size", nullptr},
                          {"dropout", 0.1},
                          {"dropout_pre_encoder", 0.1},
                          {"dropout_emb", 0.0},
                          {"dropout_att", 0.1}}},
                        {"depthformer", {{"layers", s.depth_layers}, {"dim", s.depth_dim}, {"tie", true}}}};
  LFM_RETURN_IF_ERROR(WriteWholeFile(dir + "/config.json", cfg.dump(2) + "\n"));

  Builder b{NormalRng(s.seed), {}, {}, {}, true};
  b.bf16.reserve(static_cast<size_t>(16 * s.layers + 16 * s.depth_layers + 8 * s.codebooks + 16));
  std::vector<int64_t> offsets(static_cast<size_t>(C));
  for (int64_t k = 0; k < C; ++k) offsets[static_cast<size_t>(k)] = k * V;
  b.tensors.push_back({"codebook_offsets", DType::kI64, {C}, offsets.data(), offsets.size() * 8});
  b.Add("audio_loss_weights", {C}, 1.0f, 0.0f);
  b.Add("lfm.embed_tokens.weight", {s.vocab, H}, 0.0f, 1.0f);
  b.Norm("lfm.embedding_norm.weight", H);
  for (int i = 0; i < s.layers; ++i) {
    const std::string p = "lfm.layers." + std::to_string(i) + ".";
    b.Norm(p + "operator_norm.weight", H);
    b.Norm(p + "ffn_norm.weight", H);
    const bool attn =
        std::find(s.attention_layers.begin(), s.attention_layers.end(), i) != s.attention_layers.end();
    if (attn) {
      const int64_t hd = H / s.heads;
      b.Matrix(p + "self_attn.q_proj.weight", H, H);
      b.Matrix(p + "self_attn.k_proj.weight", s.kv_heads * hd, H);
      b.Matrix(p + "self_attn.v_proj.weight", s.kv_heads * hd, H);
      b.Matrix(p + "self_attn.out_proj.weight", H, H);
      b.Norm(p + "self_attn.q_layernorm.weight", hd);
      b.Norm(p + "self_attn.k_layernorm.weight", hd);
    } else {
      b.Matrix(p + "conv.in_proj.weight", 3 * H, H);
      b.Add(p + "conv.conv.weight", {H, 1, 3}, 0.0f, 1.0f / std::sqrt(3.0f));
      b.Matrix(p + "conv.out_proj.weight", H, H);
    }
    b.Matrix(p + "feed_forward.w1.weight", ff, H);
    b.Matrix(p + "feed_forward.w3.weight", ff, H);
    b.Matrix(p + "feed_forward.w2.weight", H, ff);
  }
  b.Add("audio_embedding.embedding.weight", {C * V, H}, 0.0f, 1.0f);
  b.Norm("audio_embedding.embedding_norm.weight", H);
  b.Add("audio_embedding.to_logits.weight", {C * V, H}, 0.0f, 0.0f);  // unused at inference
  b.Matrix("depth_linear.weight", C * D, H);
  b.Add("depth_linear.bias", {C * D}, 0.0f, 0.05f);
  for (int j = 0; j < s.depth_layers; ++j) {
    const std::string p = "depthformer.layers." + std::to_string(j) + ".";
    b.Norm(p + "operator_norm.weight", D);
    b.Norm(p + "ffn_norm.weight", D);
    b.Matrix(p + "operator.qkv_proj.weight", dq + 2 * dkv, D);
    b.Matrix(p + "operator.out_proj.weight", D, D);
    b.Norm(p + "operator.bounded_attention.q_layernorm.weight", D / 32);
    b.Norm(p + "operator.bounded_attention.k_layernorm.weight", D / 32);
    b.Matrix(p + "feed_forward.w1.weight", dff, D);
    b.Matrix(p + "feed_forward.w3.weight", dff, D);
    b.Matrix(p + "feed_forward.w2.weight", D, dff);
  }
  for (int k = 0; k < s.codebooks; ++k) {
    // The tied to_logits copy is omitted, as in the released file.
    const std::string p = "depth_embeddings." + std::to_string(k) + ".";
    b.Add(p + "embedding.weight", {V, D}, 0.0f, 1.0f);
    b.Norm(p + "embedding_norm.weight", D);
  }
  // FastConformer encoder (NeMo names) and the audio adapter.
  const int64_t E = s.enc_d, Ch = s.enc_channels, hd = E / s.enc_heads;
  // A weight N(0, 1/fan_in) and its bias [out].
  auto conv = [&](const std::string& n, std::vector<int64_t> shape, int64_t fan_in) {
    const int64_t out = shape[0];
    b.Add(n + ".weight", std::move(shape), 0.0f, 1.0f / std::sqrt(static_cast<float>(fan_in)));
    b.Add(n + ".bias", {out}, 0.0f, 0.05f);
  };
  conv("conformer.pre_encode.conv.0", {Ch, 1, 3, 3}, 9);
  conv("conformer.pre_encode.conv.2", {Ch, 1, 3, 3}, 9);
  conv("conformer.pre_encode.conv.3", {Ch, Ch, 1, 1}, Ch);
  conv("conformer.pre_encode.conv.5", {Ch, 1, 3, 3}, 9);
  conv("conformer.pre_encode.conv.6", {Ch, Ch, 1, 1}, Ch);
  conv("conformer.pre_encode.out", {E, Ch * 16}, Ch * 16);
  static std::vector<int64_t> zero_count(1, 0);
  for (int i = 0; i < s.enc_layers; ++i) {
    const std::string p = "conformer.layers." + std::to_string(i) + ".";
    auto norm = [&](const std::string& n) {
      b.Norm(p + n + ".weight", E);
      b.Add(p + n + ".bias", {E}, 0.0f, 0.05f);
    };
    for (const char* n :
         {"norm_feed_forward1", "norm_self_att", "norm_conv", "norm_feed_forward2", "norm_out"})
      norm(n);
    for (const char* ff : {"feed_forward1", "feed_forward2"}) {
      conv(p + ff + ".linear1", {4 * E, E}, E);
      conv(p + ff + ".linear2", {E, 4 * E}, 4 * E);
    }
    for (const char* l : {"linear_q", "linear_k", "linear_v", "linear_out"})
      conv(p + "self_attn." + l, {E, E}, E);
    b.Matrix(p + "self_attn.linear_pos.weight", E, E);
    b.Add(p + "self_attn.pos_bias_u", {s.enc_heads, hd}, 0.0f, 0.05f);
    b.Add(p + "self_attn.pos_bias_v", {s.enc_heads, hd}, 0.0f, 0.05f);
    conv(p + "conv.pointwise_conv1", {2 * E, E, 1}, E);
    conv(p + "conv.depthwise_conv", {E, 1, 9}, 9);
    b.Norm(p + "conv.batch_norm.weight", E);
    b.Add(p + "conv.batch_norm.bias", {E}, 0.0f, 0.05f);
    b.Add(p + "conv.batch_norm.running_mean", {E}, 0.0f, 0.1f);
    b.Add(p + "conv.batch_norm.running_var", {E}, 1.0f, 0.25f);  // U(0.57, 1.43): positive
    b.tensors.push_back({p + "conv.batch_norm.num_batches_tracked", DType::kI64, {}, zero_count.data(), 8});
    conv(p + "conv.pointwise_conv2", {E, E, 1}, E);
  }
  b.Norm("audio_adapter.model.0.weight", E);
  b.Add("audio_adapter.model.0.bias", {E}, 0.0f, 0.05f);
  conv("audio_adapter.model.1", {H, E}, E);
  conv("audio_adapter.model.3", {H, H}, H);
  return WriteSafetensors(dir + "/model.safetensors", b.tensors);
}

}  // namespace lfmvox::tools
