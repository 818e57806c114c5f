#include "tools/lfm3_checkpoint_gen.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "base/file_write.h"
#include "io/safetensors.h"
#include "tensor/dtype.h"
#include "tools/random.h"

namespace lfmvox::tools {

namespace {

// SplitMix64 uniform draws of the recipe's variances (the fast mode of checkpoint_gen.cc's builder).
struct Builder {
  NormalRng rng;
  std::vector<std::vector<uint16_t>> bf16;  // owned storage (stable: vector of vectors)
  std::vector<std::vector<float>> f32;
  std::vector<TensorToWrite> tensors;

  uint64_t Next() { return rng.Next(); }
  void Add(const std::string& name, std::vector<int64_t> shape, float mean, float stddev) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<uint16_t>& v = bf16.emplace_back(static_cast<size_t>(n));
    const float a = stddev * 1.7320508f * 0x1.0p-31f;  // √3·σ over a signed 32-bit draw
    for (size_t i = 0; i < v.size(); i += 2) {
      const uint64_t r = Next();
      v[i] = F32ToBf16(mean + a * static_cast<float>(static_cast<int32_t>(r)));
      if (i + 1 < v.size())
        v[i + 1] = F32ToBf16(mean + a * static_cast<float>(static_cast<int32_t>(r >> 32)));
    }
    tensors.push_back({name, DType::kBF16, std::move(shape), v.data(), v.size() * 2});
  }
  void Matrix(const std::string& name, int64_t out, int64_t in) {
    Add(name, {out, in}, 0.0f, 1.0f / std::sqrt(static_cast<float>(in)));
  }
  void Norm(const std::string& name, int64_t n) { Add(name, {n}, 1.0f, 0.1f); }
  void Bias(const std::string& name, int64_t n) { Add(name, {n}, 0.0f, 0.05f); }
};

bool Contains(const std::vector<int>& v, int i) { return std::find(v.begin(), v.end(), i) != v.end(); }

void AddStack(Builder& b, const std::string& prefix, const std::vector<std::string>& types, int64_t H,
              int heads, int kv_heads, int64_t F, int K, bool sandwich, const std::vector<int>& gated) {
  const int64_t hd = H / heads;
  for (size_t i = 0; i < types.size(); ++i) {
    const std::string p = prefix + "layers." + std::to_string(i) + ".";
    b.Norm(p + "operator_norm.weight", H);
    b.Norm(p + "ffn_norm.weight", H);
    if (sandwich) {
      b.Norm(p + "post_operator_norm.weight", H);
      b.Norm(p + "post_ffn_norm.weight", H);
    }
    if (types[i] == "conv") {
      b.Matrix(p + "conv.in_proj.weight", 3 * H, H);
      b.Add(p + "conv.conv.weight", {H, 1, K}, 0.0f, 1.0f / std::sqrt(static_cast<float>(K)));
      b.Matrix(p + "conv.out_proj.weight", H, H);
    } else {
      b.Matrix(p + "self_attn.q_proj.weight", H, H);
      b.Matrix(p + "self_attn.k_proj.weight", kv_heads * hd, H);
      b.Matrix(p + "self_attn.v_proj.weight", kv_heads * hd, H);
      b.Matrix(p + "self_attn.o_proj.weight", H, H);
      b.Norm(p + "self_attn.q_norm.weight", hd);
      b.Norm(p + "self_attn.k_norm.weight", hd);
      if (Contains(gated, static_cast<int>(i))) b.Matrix(p + "self_attn.gate_proj.weight", heads, H);
    }
    b.Matrix(p + "feed_forward.w1.weight", F, H);
    b.Matrix(p + "feed_forward.w3.weight", F, H);
    b.Matrix(p + "feed_forward.w2.weight", H, F);
  }
  b.Norm(prefix + "embedding_norm.weight", H);
}

nlohmann::json StackJson(const std::vector<std::string>& types, int H, int heads, int kv_heads, int F,
                         bool sandwich, const std::vector<int>& gated) {
  std::vector<bool> gate;
  for (size_t i = 0; i < types.size(); ++i) gate.push_back(Contains(gated, static_cast<int>(i)));
  return {{"hidden_size", H},
          {"num_layers", types.size()},
          {"layer_types", types},
          {"num_heads", heads},
          {"num_kv_heads", kv_heads},
          {"head_dim", H / heads},
          {"intermediate_size", F},
          {"norm_eps", 1e-5},
          {"rope_theta", 1e6},
          {"rope_style", "neox"},
          {"post_operator_norm", std::vector<bool>(types.size(), sandwich)},
          {"post_ffn_norm", std::vector<bool>(types.size(), sandwich)},
          {"attn_gate", gate},
          {"attn_gate_kind", "per_head"}};
}

// The largest id of a tokenizer.json (its BPE vocabulary and added tokens) and the ids of two tokens.
struct TokenizerIds {
  int64_t max_id = -1;
  int64_t bos = -1, eos = -1;
};

Result<TokenizerIds> ReadTokenizerIds(const std::string& path) {
  std::ifstream f(path);
  if (!f) return NotFound("cannot read the tokenizer " + path);
  const nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
  if (j.is_discarded() || !j.contains("model") || !j["model"].contains("vocab")) {
    return InvalidArgument(path + " is not a Hugging Face tokenizer.json (no model.vocab)");
  }
  TokenizerIds t;
  for (const auto& [piece, id] : j["model"]["vocab"].items()) {
    if (id.is_number_integer()) t.max_id = std::max<int64_t>(t.max_id, id.get<int64_t>());
  }
  if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
    for (const auto& a : j["added_tokens"]) {
      if (!a.contains("id") || !a["id"].is_number_integer() || !a.contains("content")) continue;
      const int64_t id = a["id"].get<int64_t>();
      t.max_id = std::max(t.max_id, id);
      if (a["content"] == "<|startoftext|>") t.bos = id;
      if (a["content"] == "<|im_end|>") t.eos = id;
    }
  }
  if (t.bos < 0 || t.eos < 0) return InvalidArgument(path + " lacks <|startoftext|> or <|im_end|>");
  return t;
}

}  // namespace

Status WriteRandomLfm3(const std::string& dir, const Lfm3Shape& s) {
  if (s.codec_hidden % s.codec_heads != 0 || s.codec_heads % s.codec_kv_heads != 0 ||
      s.depth_hidden % s.depth_heads != 0 || s.depth_heads % s.depth_kv_heads != 0) {
    return InvalidArgument("generator: heads must divide hidden, kv_heads divide heads");
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError("cannot create " + dir + ": " + ec.message());
  constexpr int kCodebooks = 12, kCodes = 2017, kNfft = 1280;
  const std::vector<std::string> depth_types(static_cast<size_t>(s.depth_layers), "attention");

  nlohmann::json depth = StackJson(depth_types, s.depth_hidden, s.depth_heads, s.depth_kv_heads, s.depth_ffn,
                                   s.depth_sandwich_norms, s.depth_gated_layers);
  depth["window"] = nullptr;
  depth["head_norm_eps"] = 1e-5;
  nlohmann::json codec = StackJson(s.codec_layers, s.codec_hidden, s.codec_heads, s.codec_kv_heads,
                                   s.codec_ffn, s.codec_sandwich_norms, s.codec_gated_layers);
  codec.update({{"n_q", kCodebooks},
                {"fsq_levels", {8, 7, 6, 6}},
                {"fsq_basis", {1, 8, 56, 336}},
                {"quantizer_dim", s.quantizer_dim},
                {"conv_L_cache", s.codec_conv_kernel},
                {"window", 30},
                {"frame_stack", 6},
                {"n_fft", kNfft},
                {"hop_length", 320},
                {"win_length", kNfft},
                {"sampling_rate", 24000},
                {"frame_samples", 1920},
                {"magnitude_clamp", nullptr}});
  nlohmann::json cfg = {{"model_type", "lfm3_audio_speech_oracle"},
                        {"format", "cortiq CMF tensor names (lfm3_speech.rs); random weights (lfmvox tools)"},
                        {"n_codebooks", kCodebooks},
                        {"codebook_size", kCodes},
                        {"audio_eos", kCodes - 1},
                        {"maskgit", {4, 4, 4}},
                        {"text_hidden", s.text_hidden},
                        {"depth_decoder", depth},
                        {"codec", codec}};
  if (s.interleaved_n_text > 0) cfg["interleaved_n_text"] = s.interleaved_n_text;
  if (s.interleaved_n_audio > 0) cfg["interleaved_n_audio"] = s.interleaved_n_audio;
  const int64_t Hb = s.text_hidden;
  int64_t vocab = 0;
  std::vector<std::string> backbone_kinds;  // the layer types in AddStack's two kinds
  for (const std::string& t : s.backbone_layers) backbone_kinds.push_back(t == "conv" ? "conv" : "attention");
  if (s.with_backbone) {
    if (s.tokenizer.empty()) return InvalidArgument("generator: a backbone needs a tokenizer");
    if (Hb % s.backbone_heads != 0 || s.backbone_heads % s.backbone_kv_heads != 0) {
      return InvalidArgument("generator: backbone heads must divide text_hidden, kv_heads divide heads");
    }
    LFM_ASSIGN_OR_RETURN(const TokenizerIds ids, ReadTokenizerIds(s.tokenizer));
    vocab = ids.max_id + 1;
    nlohmann::json lfm = StackJson(backbone_kinds, s.text_hidden, s.backbone_heads, s.backbone_kv_heads,
                                   s.backbone_ffn, s.backbone_sandwich_norms, s.backbone_gated_layers);
    for (const char* k : {"hidden_size", "num_layers", "num_heads", "num_kv_heads"}) lfm.erase(k);
    lfm.update({{"vocab_size", vocab},
                {"hidden_size", s.text_hidden},
                {"num_hidden_layers", s.backbone_layers.size()},
                {"num_attention_heads", s.backbone_heads},
                {"num_key_value_heads", s.backbone_kv_heads},
                {"layer_types", s.backbone_layers},
                {"conv_L_cache", s.backbone_conv_kernel},
                {"sliding_window", s.backbone_window},
                {"rope_theta_swa", 1e4},
                {"partial_rotary_factor", s.partial_rotary_factor},
                {"tie_word_embeddings", s.backbone_tied},
                {"max_position_embeddings", s.max_positions},
                {"bos_token_id", ids.bos},
                {"eos_token_id", ids.eos}});
    cfg["lfm"] = lfm;
    std::filesystem::copy_file(s.tokenizer, dir + "/tokenizer.json",
                               std::filesystem::copy_options::overwrite_existing, ec);
    if (ec) return IoError("cannot copy " + s.tokenizer + " into " + dir + ": " + ec.message());
  }
  LFM_RETURN_IF_ERROR(WriteWholeFile(dir + "/config.json", cfg.dump(1) + "\n"));

  Builder b{NormalRng(s.seed), {}, {}, {}};
  b.bf16.reserve(512);
  const int64_t Hc = s.codec_hidden;
  b.Matrix("codec.quantizer.project_out.weight", s.quantizer_dim, kCodebooks * 4);
  b.Bias("codec.quantizer.project_out.bias", s.quantizer_dim);
  b.Matrix("codec.from_quantizer.weight", Hc, s.quantizer_dim);
  b.Bias("codec.from_quantizer.bias", Hc);
  AddStack(b, "codec.decoder.lfm.", s.codec_layers, Hc, s.codec_heads, s.codec_kv_heads, s.codec_ffn,
           s.codec_conv_kernel, s.codec_sandwich_norms, s.codec_gated_layers);
  b.Matrix("codec.decoder.lin.weight", kNfft + 2, Hc);
  b.Bias("codec.decoder.lin.bias", kNfft + 2);
  std::vector<float>& w = b.f32.emplace_back(static_cast<size_t>(kNfft));
  for (int n = 0; n < kNfft; ++n)
    w[static_cast<size_t>(n)] = static_cast<float>(0.5 - 0.5 * std::cos(2.0 * M_PI * n / kNfft));
  b.tensors.push_back({"codec.decoder.istft.window", DType::kF32, {kNfft}, w.data(), w.size() * 4});
  if (s.with_depth) {
    const int64_t Hd = s.depth_hidden;
    b.Add("codebook_embedding.weight", {int64_t{kCodebooks} * kCodes, s.text_hidden}, 0.0f, 1.0f);
    b.Matrix("depth_decoder.depth_linear.weight", kCodebooks * Hd, s.text_hidden);
    b.Bias("depth_decoder.depth_linear.bias", kCodebooks * Hd);
    b.Add("depth_decoder.mask_embedding", {Hd}, 0.0f, 1.0f);
    for (int i = 0; i < kCodebooks; ++i) {
      const std::string p = "depth_decoder.depth_embeddings." + std::to_string(i) + ".";
      b.Add(p + "embedding.weight", {kCodes, Hd}, 0.0f, 0.1f);
      if (s.eos_row_scale != 1.0f) {  // the end-of-audio row, scaled after the draw (the stream stays)
        std::vector<uint16_t>& t = b.bf16.back();
        for (int64_t d = 0; d < Hd; ++d) {
          uint16_t& v = t[static_cast<size_t>((kCodes - 1) * Hd + d)];
          v = F32ToBf16(Bf16ToF32(v) * s.eos_row_scale);
        }
      }
      b.Norm(p + "embedding_norm.weight", Hd);
    }
    AddStack(b, "depth_decoder.model.", depth_types, Hd, s.depth_heads, s.depth_kv_heads, s.depth_ffn, 3,
             s.depth_sandwich_norms, s.depth_gated_layers);
  }
  if (s.with_backbone) {
    b.Add("lfm.embed_tokens.weight", {vocab, Hb}, 0.0f, 1.0f);
    if (!s.backbone_tied) b.Matrix("lfm.lm_head.weight", vocab, Hb);
    AddStack(b, "lfm.", backbone_kinds, Hb, s.backbone_heads, s.backbone_kv_heads, s.backbone_ffn,
             s.backbone_conv_kernel, s.backbone_sandwich_norms, s.backbone_gated_layers);
  }
  return WriteSafetensors(dir + "/model.safetensors", b.tensors);
}

}  // namespace lfmvox::tools
