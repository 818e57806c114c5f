#include "models/lfm25_audio/gguf_release.h"

#include <fnmatch.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <string_view>

#include "base/file_write.h"
#include "io/file_util.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "io/json_config.h"
#include "models/lfm25_audio/config.h"
#include "tensor/quant.h"
#include "text/tokenizer.h"

namespace lfmvox {

namespace fs = std::filesystem;

namespace {

// --- Names -------------------------------------------------------------------

// One LFM2 layer (backbone and detokenizer): GGUF suffix after "blk.N." and
// the Hugging Face suffix after "lfm.layers.N." [spec §1.2, §1.5].
constexpr std::pair<std::string_view, std::string_view> kLfm2Layer[] = {
    {"attn_norm.weight", "operator_norm.weight"},
    {"ffn_norm.weight", "ffn_norm.weight"},
    {"ffn_gate.weight", "feed_forward.w1.weight"},
    {"ffn_up.weight", "feed_forward.w3.weight"},
    {"ffn_down.weight", "feed_forward.w2.weight"},
    {"shortconv.in_proj.weight", "conv.in_proj.weight"},
    {"shortconv.conv.weight", "conv.conv.weight"},
    {"shortconv.out_proj.weight", "conv.out_proj.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_output.weight", "self_attn.out_proj.weight"},
    {"attn_q_norm.weight", "self_attn.q_layernorm.weight"},
    {"attn_k_norm.weight", "self_attn.k_layernorm.weight"},
};
// LFM2 globals: token_embd_norm is the final norm ("fix for wrong tensor
// name" in llama.cpp), dense_2 the detokenizer's output projection.
constexpr std::pair<std::string_view, std::string_view> kLfm2Global[] = {
    {"token_embd.weight", "lfm.embed_tokens.weight"},
    {"token_embd_norm.weight", "lfm.embedding_norm.weight"},
    {"dense_2.weight", "lin.weight"},
    {"dense_2.bias", "lin.bias"},
};
// One conformer layer: GGUF module after "a.blk.N." and the Hugging Face
// module after "conformer.layers.N." [spec §1.3]; .weight/.bias follow.
constexpr std::pair<std::string_view, std::string_view> kConformerLayer[] = {
    {"ffn_norm", "norm_feed_forward1"},      {"ffn_up", "feed_forward1.linear1"},
    {"ffn_down", "feed_forward1.linear2"},   {"ln1", "norm_self_att"},
    {"attn_q", "self_attn.linear_q"},        {"attn_k", "self_attn.linear_k"},
    {"attn_v", "self_attn.linear_v"},        {"attn_out", "self_attn.linear_out"},
    {"linear_pos", "self_attn.linear_pos"},  {"pos_bias_u", "self_attn.pos_bias_u"},
    {"pos_bias_v", "self_attn.pos_bias_v"},  {"norm_conv", "norm_conv"},
    {"conv_pw1", "conv.pointwise_conv1"},    {"conv_dw", "conv.depthwise_conv"},
    {"conv_norm", "conv.batch_norm"},        {"conv_pw2", "conv.pointwise_conv2"},
    {"ffn_norm_1", "norm_feed_forward2"},    {"ffn_up_1", "feed_forward2.linear1"},
    {"ffn_down_1", "feed_forward2.linear2"}, {"ln2", "norm_out"},
};
constexpr std::pair<std::string_view, std::string_view> kMmprojGlobal[] = {
    {"a.conv1d.", "conformer.pre_encode.conv."},
    {"a.pre_encode.out.", "conformer.pre_encode.out."},
    {"mm.a.mlp.", "audio_adapter.model."},
    {"a.position_embd.weight", "audio_embedding.embedding.weight"},
    {"a.position_embd_norm.weight", "audio_embedding.embedding_norm.weight"},
    {"a.embd_to_logits.weight", "audio_embedding.to_logits.weight"},
    // Newer llama.cpp projector files may store the front end's filterbank and window (NeMo's buffer
    // names on our side); the model checks them against the ones its config implies.
    {"a.mel_filters", "preprocessor.featurizer.fb"},
    {"a.mel_filters.weight", "preprocessor.featurizer.fb"},
    {"a.window", "preprocessor.featurizer.window"},
    {"a.window.weight", "preprocessor.featurizer.window"},
};

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// "<prefix>N.<rest>" → N and rest; false when s does not have that form.
bool SplitIndexed(std::string_view s, std::string_view prefix, std::string* index, std::string_view* rest) {
  if (!StartsWith(s, prefix)) return false;
  s.remove_prefix(prefix.size());
  const size_t dot = s.find('.');
  if (dot == 0 || dot == std::string_view::npos) return false;
  for (char c : s.substr(0, dot))
    if (c < '0' || c > '9') return false;
  *index = std::string(s.substr(0, dot));
  *rest = s.substr(dot + 1);
  return true;
}

// A prefix/whole-name table lookup in either direction.
template <size_t N>
std::optional<std::string> MapGlobal(const std::pair<std::string_view, std::string_view> (&table)[N],
                                     std::string_view name, bool to_hf) {
  for (const auto& [g, h] : table) {
    const std::string_view from = to_hf ? g : h, to = to_hf ? h : g;
    if (from.back() == '.' ? StartsWith(name, from) : name == from)
      return std::string(to) + std::string(name.substr(from.size()));
  }
  return std::nullopt;
}

std::optional<std::string> Lfm2ToHf(std::string_view g) {
  std::string n;
  std::string_view rest;
  if (SplitIndexed(g, "blk.", &n, &rest)) {
    for (const auto& [gs, hs] : kLfm2Layer)
      if (rest == gs) return "lfm.layers." + n + "." + std::string(hs);
    return std::nullopt;
  }
  return MapGlobal(kLfm2Global, g, true);
}

std::optional<std::string> Lfm2ToGguf(std::string_view h) {
  std::string n;
  std::string_view rest;
  if (SplitIndexed(h, "lfm.layers.", &n, &rest)) {
    for (const auto& [gs, hs] : kLfm2Layer)
      if (rest == hs) return "blk." + n + "." + std::string(gs);
    return std::nullopt;
  }
  return MapGlobal(kLfm2Global, h, false);
}

// The module name before ".weight"/".bias" (pos_bias_u/v have no suffix).
std::optional<std::string> ConformerLayerMap(std::string_view rest, bool to_hf) {
  for (const auto& [gs, hs] : kConformerLayer) {
    const std::string_view from = to_hf ? gs : hs, to = to_hf ? hs : gs;
    if (rest == from) return std::string(to);
    if (StartsWith(rest, from) && rest.size() > from.size() && rest[from.size()] == '.') {
      const std::string_view suffix = rest.substr(from.size());
      if (suffix == ".weight" || suffix == ".bias") return std::string(to) + std::string(suffix);
    }
  }
  return std::nullopt;
}

std::optional<std::string> MmprojToHf(std::string_view g) {
  std::string n;
  std::string_view rest;
  if (SplitIndexed(g, "a.blk.", &n, &rest)) {
    // An unfolded BatchNorm (newer llama.cpp projector files): conv_norm.weight/bias are then γ/β, and
    // the encoder folds them with these statistics at load.
    for (const auto& [gs, hs] :
         {std::pair<std::string_view, std::string_view>{"conv_norm_mean", "conv.batch_norm.running_mean"},
          {"conv_norm_var", "conv.batch_norm.running_var"}}) {
      if (rest == gs || (StartsWith(rest, gs) && rest.substr(gs.size()) == ".weight"))
        return "conformer.layers." + n + "." + std::string(hs);
    }
    auto m = ConformerLayerMap(rest, true);
    if (!m) return std::nullopt;
    return "conformer.layers." + n + "." + *m;
  }
  return MapGlobal(kMmprojGlobal, g, true);
}

std::optional<std::string> MmprojToGguf(std::string_view h) {
  std::string n;
  std::string_view rest;
  if (SplitIndexed(h, "conformer.layers.", &n, &rest)) {
    auto m = ConformerLayerMap(rest, false);
    if (!m) return std::nullopt;
    return "a.blk." + n + "." + *m;
  }
  return MapGlobal(kMmprojGlobal, h, false);
}

// The vocoder keeps the Hugging Face names but for bounded_attention →
// attention (GGML_MAX_NAME is 64) [spec §1.4].
constexpr std::string_view kBounded = ".operator.bounded_attention.", kShort = ".operator.attention.";
std::string VocoderToHf(std::string_view g) {
  std::string s(g);
  if (const size_t at = s.find(kShort); at != std::string::npos) s.replace(at, kShort.size(), kBounded);
  return s;
}
std::string VocoderToGguf(std::string_view h) {
  std::string s(h);
  if (const size_t at = s.find(kBounded); at != std::string::npos) s.replace(at, kBounded.size(), kShort);
  return s;
}

bool IsVocoderTensor(std::string_view h) {
  return StartsWith(h, "depthformer.") || StartsWith(h, "depth_linear.") ||
         StartsWith(h, "depth_embeddings.") || StartsWith(h, "audio_embedding.");
}

// Tensors of model.safetensors no GGUF file stores (training-only, or folded).
bool IsDroppedMainTensor(std::string_view h) {
  return h == "audio_loss_weights" || h == "codebook_offsets" || h.ends_with(".num_batches_tracked") ||
         h.ends_with(".batch_norm.running_mean") || h.ends_with(".batch_norm.running_var");
}

// --- Shapes --------------------------------------------------------------------

// The Hugging Face shape of a GGUF tensor: ne reversed, then the dims the
// converters squeezed restored [spec §1.2 shortconv.conv, §1.3 conv module
// and subsampling biases]. Element counts never change.
Shape HfShape(const std::string& hf, const GgufTensor& t) {
  Shape s;
  for (int i = t.n_dims - 1; i >= 0; --i)
    s.dim[s.rank++] = static_cast<int64_t>(t.ne[static_cast<size_t>(i)]);
  const bool conv_taps = hf.ends_with(".conv.conv.weight") || hf.ends_with(".depthwise_conv.weight");
  if (conv_taps && s.rank == 2) return Shape{s[0], 1, s[1]};
  if (hf.ends_with("_conv1.weight") || hf.ends_with("_conv2.weight")) {
    if (s.rank == 2) return Shape{s[0], s[1], 1};
  }
  if (StartsWith(hf, "conformer.pre_encode.conv.") && hf.ends_with(".bias") && s.rank == 3 && s[1] == 1 &&
      s[2] == 1)
    return Shape{s[0]};
  return s;
}

// The ggml ne of a Hugging Face tensor as the converters store it.
std::vector<uint64_t> GgufNe(const std::string& hf, const Shape& s) {
  std::vector<int64_t> dims(s.dim.begin(), s.dim.begin() + s.rank);
  const bool conv_taps = hf.ends_with(".conv.conv.weight") || hf.ends_with(".depthwise_conv.weight");
  if (conv_taps && dims.size() == 3 && dims[1] == 1) dims.erase(dims.begin() + 1);
  if ((hf.ends_with("_conv1.weight") || hf.ends_with("_conv2.weight")) && dims.size() == 3 && dims[2] == 1)
    dims.pop_back();
  if (StartsWith(hf, "conformer.pre_encode.conv.") && hf.ends_with(".bias") && dims.size() == 1)
    dims = {dims[0], 1, 1};
  if (dims.empty()) dims.push_back(1);  // a scalar is a 1-element GGUF tensor
  std::vector<uint64_t> ne;
  for (auto it = dims.rbegin(); it != dims.rend(); ++it) ne.push_back(static_cast<uint64_t>(*it));
  return ne;
}

// --- Reading ---------------------------------------------------------------------

Result<DType> DTypeForGgml(const GgufTensor& t, const std::string& path) {
  switch (static_cast<GgmlType>(t.type)) {
    case GgmlType::F32:
      return DType::kF32;
    case GgmlType::F16:
      return DType::kF16;
    case GgmlType::BF16:
      return DType::kBF16;
    case GgmlType::Q8_0:
      return DType::kQ8_0;
    case GgmlType::Q4_0:
      return DType::kQ4_0;
    case GgmlType::Q6_K:
      return DType::kQ6_K;
    default:
      return Unimplemented(
          StrFormat("%s: tensor %s is stored as %s; lfmvox reads F32, F16, BF16, Q8_0, Q4_0 "
                    "and Q6_K (requantize the file with `lfmvox quantize`)",
                    path.c_str(), t.name.c_str(), GgmlTypeName(t.type)));
  }
}

struct OpenFiles {
  std::vector<std::unique_ptr<GgufFile>> files;
  // The files' read-only mappings, for Checkpoint::FromViews.
  std::vector<std::span<const std::byte>> Mappings() const {
    std::vector<std::span<const std::byte>> m;
    for (const auto& f : files) {
      if (!f->mapping().empty()) m.push_back(f->mapping());
    }
    return m;
  }
};

// Adds every tensor of `f` that `to_hf` names to `out` under that name.
template <class ToHf>
Status AddTensors(const GgufFile& f, ToHf to_hf, std::map<std::string, TensorView, std::less<>>* out) {
  for (const GgufTensor& t : f.tensors()) {
    std::optional<std::string> hf = to_hf(t.name);
    if (!hf) continue;  // tensors lfmvox does not use (another runner's extras)
    TensorView v;
    LFM_ASSIGN_OR_RETURN(v.dtype, DTypeForGgml(t, f.path()));
    v.shape = HfShape(*hf, t);
    v.data = t.data;
    out->insert_or_assign(*hf, v);
  }
  return Status::Ok();
}

std::string Arch(const GgufFile& f) {
  Result<std::string> a = f.metadata().GetString("general.architecture");
  return a.ok() ? *a : std::string();
}

bool HasVocab(const GgufFile& f) {
  Result<std::string> m = f.metadata().GetString("tokenizer.ggml.model");
  return m.ok() && *m != "none" && f.metadata().Has("tokenizer.ggml.tokens");
}

enum class Role { kNone, kBackbone, kMmproj, kVocoder, kDetokenizer };

Role RoleOf(const GgufFile& f) {
  const std::string arch = Arch(f);
  if (arch == "clip") return Role::kMmproj;
  if (f.FindTensor("depth_linear.weight") != nullptr || f.metadata().Has("depthformer_n_layer"))
    return Role::kVocoder;
  if (arch == "lfm2") {
    if (f.FindTensor("dense_2.weight") != nullptr || !HasVocab(f)) return Role::kDetokenizer;
    return Role::kBackbone;
  }
  return Role::kNone;
}

// The quantization suffix of a release file name: "LFM2.5-Audio-1.5B-Q4_0.gguf" → "Q4_0".
std::string Variant(const fs::path& p) {
  const std::string stem = p.stem().string();
  const size_t dash = stem.rfind('-');
  return dash == std::string::npos ? std::string() : stem.substr(dash + 1);
}

// --- Config --------------------------------------------------------------------

// The published LFM2.5-Audio-1.5B values of what Liquid's GGUF files do not
// store (llama.cpp's runner hard-codes them the same way): config.json's
// preprocessor, the encoder's fixed choices and the interleaving schedule.
constexpr char kPublishedConfig[] = R"({
  "architectures": ["Lfm2AudioForConditionalGeneration"],
  "codebooks": 8,
  "interleaved_n_text": 6,
  "interleaved_n_audio": 12,
  "preprocessor": {"sample_rate": 16000, "normalize": "per_feature", "window_size": 0.025,
                   "window_stride": 0.01, "window": "hann", "features": 128, "n_fft": 512, "log": true,
                   "frame_splicing": 1, "dither": 1e-05, "pad_to": 0, "pad_value": 0.0},
  "encoder": {"feat_in": 128, "feat_out": -1, "n_layers": 17, "d_model": 512, "subsampling": "dw_striding",
              "subsampling_factor": 8, "subsampling_conv_channels": 256, "causal_downsampling": false,
              "ff_expansion_factor": 4, "self_attention_model": "rel_pos", "n_heads": 8,
              "att_context_size": [-1, -1], "xscaling": false, "untie_biases": true, "pos_emb_max_len": 5000,
              "conv_kernel_size": 9, "conv_norm_type": "batch_norm"},
  "depthformer": {"layers": 6, "dim": 1024, "tie": true}
})";
// audio_detokenizer/config.json's codec keys (upsampling ×6, hop 320, 24 kHz).
// The LFM2 values are the published ones too, for the merged vocoder, whose
// detokenizer layers come without lfm2.* keys (the tensors then override
// what they show: widths, layer kinds, heads).
constexpr char kPublishedDetokenizer[] = R"({
  "architectures": ["Lfm25AudioTokenizer"], "model_type": "lfm2", "codebooks": 8, "upsample_factor": 6,
  "hop_length": 320, "sample_rate": 24000, "block_auto_adjust_ff_dim": false, "output_size": 1282,
  "hidden_size": 512, "intermediate_size": 2304, "num_hidden_layers": 8, "num_attention_heads": 16,
  "num_key_value_heads": 8, "sliding_window": 30, "max_position_embeddings": 128000, "norm_eps": 1e-05,
  "conv_L_cache": 3, "rope_theta": 1000000.0,
  "layer_types": ["conv", "conv", "sliding_attention", "conv", "sliding_attention", "conv",
                  "sliding_attention", "conv"]
})";

// A parsed embedded config, or the published one.
Result<nlohmann::json> BaseConfig(const GgufFile* f, const char* key, const char* published) {
  if (f != nullptr && f->metadata().Has(key)) {
    LFM_ASSIGN_OR_RETURN(std::string text, f->metadata().GetString(key));
    LFM_ASSIGN_OR_RETURN(nlohmann::json j, ParseJson(text, f->path() + ": " + key, kConfigLimits));
    if (!j.is_object()) return InvalidArgument(f->path() + ": " + key + " is not a JSON object");
    return j;
  }
  return nlohmann::json::parse(published);
}

Result<uint64_t> Rows(const GgufFile& f, const std::string& name) {
  const GgufTensor* t = f.FindTensor(name);
  if (t == nullptr) return NotFound(f.path() + " has no tensor " + name);
  return t->n_dims >= 2 ? t->ne[static_cast<size_t>(t->n_dims - 1)] : t->ne[0];
}
Result<uint64_t> Cols(const GgufFile& f, const std::string& name) {
  const GgufTensor* t = f.FindTensor(name);
  if (t == nullptr) return NotFound(f.path() + " has no tensor " + name);
  return t->ne[0];
}

// The `lfm` section (an Lfm2Config) from `<arch>.*` keys and the tensors of an
// LFM2 file; `j` already holds the embedded values, which these override.
Status Lfm2Section(const GgufFile& f, nlohmann::json* j) {
  const GgufMetadata& m = f.metadata();
  const std::string a = Arch(f) + ".";
  LFM_ASSIGN_OR_RETURN(int64_t hidden, m.GetI64(a + "embedding_length"));
  LFM_ASSIGN_OR_RETURN(int64_t layers, m.GetI64(a + "block_count"));
  LFM_ASSIGN_OR_RETURN(int64_t heads, m.GetI64(a + "attention.head_count"));
  (*j)["hidden_size"] = hidden;
  (*j)["num_hidden_layers"] = layers;
  (*j)["num_attention_heads"] = heads;
  if (m.Has(a + "context_length")) {
    LFM_ASSIGN_OR_RETURN(int64_t ctx, m.GetI64(a + "context_length"));
    (*j)["max_position_embeddings"] = ctx;
  }
  if (m.Has(a + "attention.layer_norm_rms_epsilon")) {
    LFM_ASSIGN_OR_RETURN(float eps, m.GetF32(a + "attention.layer_norm_rms_epsilon"));
    (*j)["norm_eps"] = eps;
  }
  if (m.Has(a + "rope.freq_base")) {
    LFM_ASSIGN_OR_RETURN(float theta, m.GetF32(a + "rope.freq_base"));
    (*j)["rope_theta"] = theta;
  }
  if (m.Has(a + "shortconv.l_cache")) {
    LFM_ASSIGN_OR_RETURN(int64_t l, m.GetI64(a + "shortconv.l_cache"));
    (*j)["conv_L_cache"] = l;
  }
  int64_t window = 0;
  if (m.Has(a + "attention.sliding_window")) {
    LFM_ASSIGN_OR_RETURN(window, m.GetI64(a + "attention.sliding_window"));
    if (window > 0) (*j)["sliding_window"] = window;
  }
  if (m.Has(a + "attention.key_length")) {
    LFM_ASSIGN_OR_RETURN(int64_t hd, m.GetI64(a + "attention.key_length"));
    (*j)["head_dim"] = hd;
  }
  // The layer schedule from the tensors (llama.cpp: head_count_kv 0 marks a
  // conv layer); the key, when an array, must agree.
  if (layers < 1 || layers > 1024) return InvalidArgument(f.path() + ": block_count must be in [1, 1024]");
  std::vector<int64_t> kv_per_layer;
  if (m.Has(a + "attention.head_count_kv")) {
    Result<std::vector<int64_t>> arr = m.GetIntArray(a + "attention.head_count_kv");
    if (arr.ok()) {
      kv_per_layer = *arr;
    } else {
      LFM_ASSIGN_OR_RETURN(int64_t kv, m.GetI64(a + "attention.head_count_kv"));
      kv_per_layer.assign(static_cast<size_t>(layers), kv);
    }
  }
  nlohmann::json types = nlohmann::json::array();
  int64_t kv_heads = 0;
  for (int64_t i = 0; i < layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    const bool attention = f.FindTensor(p + "attn_q.weight") != nullptr;
    if (!attention && f.FindTensor(p + "shortconv.in_proj.weight") == nullptr) {
      return InvalidArgument(f.path() + ": layer " + std::to_string(i) +
                             " has neither attn_q nor shortconv.in_proj; is the file complete?");
    }
    if (!kv_per_layer.empty()) {
      if (kv_per_layer.size() != static_cast<size_t>(layers))
        return InvalidArgument(f.path() + ": " + a + "attention.head_count_kv has the wrong length");
      if ((kv_per_layer[static_cast<size_t>(i)] > 0) != attention) {
        return InvalidArgument(f.path() + ": " + a +
                               "attention.head_count_kv disagrees with the tensors of layer " +
                               std::to_string(i));
      }
      if (attention) kv_heads = kv_per_layer[static_cast<size_t>(i)];
    }
    types.push_back(attention ? (window > 0 ? "sliding_attention" : "full_attention") : "conv");
  }
  j->erase("full_attn_idxs");
  (*j)["layer_types"] = types;
  if (kv_heads > 0) {
    (*j)["num_key_value_heads"] = kv_heads;
  } else if (!j->contains("num_key_value_heads")) {
    (*j)["num_key_value_heads"] = heads;
  }
  // The FFN width from the tensors: lfm2.feed_forward_length may hold the
  // unadjusted width [spec §1.2 caution].
  LFM_ASSIGN_OR_RETURN(uint64_t ff, Rows(f, "blk.0.ffn_gate.weight"));
  j->erase("block_ff_dim");
  (*j)["intermediate_size"] = ff;
  (*j)["block_auto_adjust_ff_dim"] = false;
  // The vocabulary size is the embedding's rows; a stated size that differs is a file that contradicts
  // itself (llama.cpp refuses it too, as a tensor of the wrong shape), not something to pick a side in.
  LFM_ASSIGN_OR_RETURN(uint64_t vocab, Rows(f, "token_embd.weight"));
  if (m.Has(a + "vocab_size")) {
    LFM_ASSIGN_OR_RETURN(uint32_t v, m.GetU32(a + "vocab_size"));
    if (v != vocab) {
      return InvalidArgument(f.path() + ": " + a + "vocab_size is " + std::to_string(v) +
                             " but token_embd.weight has " + std::to_string(vocab) +
                             " rows; the file contradicts itself (convert it again)");
    }
  }
  (*j)["vocab_size"] = vocab;
  return Status::Ok();
}

// The depthformer section from the vocoder: codebooks (one depth embedding table each), layers and
// width from the two keys, heads from the q-norm length and the fused qkv rows.
Status DepthformerSection(const GgufFile& vocoder, nlohmann::json* j_out) {
  nlohmann::json& j = *j_out;
  int codebooks = 0;
  while (vocoder.FindTensor("depth_embeddings." + std::to_string(codebooks) + ".embedding.weight") != nullptr)
    ++codebooks;
  if (codebooks == 0) return InvalidArgument(vocoder.path() + " has no depth_embeddings.0.embedding.weight");
  j["codebooks"] = codebooks;
  nlohmann::json& d = j["depthformer"];
  if (!d.is_object()) d = nlohmann::json::object();
  const GgufMetadata& vm = vocoder.metadata();
  LFM_ASSIGN_OR_RETURN(int64_t dl, vm.GetI64("depthformer_n_layer"));
  LFM_ASSIGN_OR_RETURN(int64_t dim, vm.GetI64("depthformer_n_embd"));
  d["layers"] = dl;
  d["dim"] = dim;
  LFM_ASSIGN_OR_RETURN(uint64_t hd,
                       Cols(vocoder, "depthformer.layers.0.operator.attention.q_layernorm.weight"));
  LFM_ASSIGN_OR_RETURN(uint64_t qkv, Rows(vocoder, "depthformer.layers.0.operator.qkv_proj.weight"));
  if (hd == 0 || dim % static_cast<int64_t>(hd) != 0 || qkv <= static_cast<uint64_t>(dim) ||
      (qkv - static_cast<uint64_t>(dim)) % (2 * hd) != 0) {
    return InvalidArgument(vocoder.path() +
                           ": the depthformer's q-norm and qkv_proj shapes imply no head layout");
  }
  d["heads"] = dim / static_cast<int64_t>(hd);
  d["kv_heads"] = (qkv - static_cast<uint64_t>(dim)) / (2 * hd);
  // A stored to_logits is read on its own (Liquid's files carry one per codebook, llama.cpp's loader
  // requires it); without one the embedding table is the head.
  d["tie"] = vocoder.FindTensor("depth_embeddings.0.to_logits.weight") == nullptr;
  return Status::Ok();
}

// config.json from the files present: the backbone always; the vocoder (speech out) and the mmproj
// (speech in) when the set has them, else their sections stay the embedded or published ones.
Result<nlohmann::json> MainConfig(const GgufFile& backbone, const GgufFile* mmproj, const GgufFile* vocoder) {
  LFM_ASSIGN_OR_RETURN(nlohmann::json j, BaseConfig(&backbone, "lfmvox.config", kPublishedConfig));
  nlohmann::json& lfm = j["lfm"];
  if (!lfm.is_object()) lfm = nlohmann::json::object();
  LFM_RETURN_IF_ERROR(Lfm2Section(backbone, &lfm));
  if (vocoder != nullptr) LFM_RETURN_IF_ERROR(DepthformerSection(*vocoder, &j));
  // The encoder, from the clip.audio.* keys and the tensors.
  if (mmproj != nullptr) {
    const GgufMetadata& mm = mmproj->metadata();
    nlohmann::json& e = j["encoder"];
    if (!e.is_object()) e = nlohmann::json::object();
    LFM_ASSIGN_OR_RETURN(int64_t mels, mm.GetI64("clip.audio.num_mel_bins"));
    LFM_ASSIGN_OR_RETURN(int64_t el, mm.GetI64("clip.audio.block_count"));
    LFM_ASSIGN_OR_RETURN(int64_t dm, mm.GetI64("clip.audio.embedding_length"));
    LFM_ASSIGN_OR_RETURN(int64_t eh, mm.GetI64("clip.audio.attention.head_count"));
    LFM_ASSIGN_OR_RETURN(uint64_t ch, Rows(*mmproj, "a.conv1d.0.weight"));
    LFM_ASSIGN_OR_RETURN(uint64_t ffw, Rows(*mmproj, "a.blk.0.ffn_up.weight"));  // not the ff key [§1.3]
    LFM_ASSIGN_OR_RETURN(uint64_t k, Cols(*mmproj, "a.blk.0.conv_dw.weight"));
    if (dm < 1 || ffw % static_cast<uint64_t>(dm) != 0)
      return InvalidArgument(mmproj->path() + ": a.blk.0.ffn_up.weight is no multiple of the encoder width");
    e["feat_in"] = mels;
    e["n_layers"] = el;
    e["d_model"] = dm;
    e["n_heads"] = eh;
    e["subsampling_conv_channels"] = ch;
    e["ff_expansion_factor"] = ffw / static_cast<uint64_t>(dm);
    e["conv_kernel_size"] = k;
    j["preprocessor"]["features"] = mels;
  }
  return j;
}

// What the tensors of an LFM2 stack under Hugging Face names (lfm.layers.N.…)
// show of its config: width, depth, layer kinds, heads and FFN width.
Status Lfm2SectionFromHfTensors(const GgufFile& f, nlohmann::json* j) {
  LFM_ASSIGN_OR_RETURN(uint64_t hidden, Cols(f, "lfm.layers.0.operator_norm.weight"));
  int layers = 0;
  while (f.FindTensor("lfm.layers." + std::to_string(layers) + ".operator_norm.weight") != nullptr) ++layers;
  nlohmann::json types = nlohmann::json::array();
  const bool sliding = j->value("sliding_window", 0) > 0;
  for (int i = 0; i < layers; ++i) {
    const std::string p = "lfm.layers." + std::to_string(i) + ".self_attn.";
    const bool attention = f.FindTensor(p + "q_proj.weight") != nullptr;
    types.push_back(attention ? (sliding ? "sliding_attention" : "full_attention") : "conv");
    if (attention) {
      LFM_ASSIGN_OR_RETURN(uint64_t hd, Cols(f, p + "q_layernorm.weight"));
      LFM_ASSIGN_OR_RETURN(uint64_t q, Rows(f, p + "q_proj.weight"));
      LFM_ASSIGN_OR_RETURN(uint64_t kv, Rows(f, p + "k_proj.weight"));
      if (hd == 0 || q % hd != 0 || kv % hd != 0)
        return InvalidArgument(f.path() + ": " + p + "q_layernorm and the projections imply no head layout");
      (*j)["num_attention_heads"] = q / hd;
      (*j)["num_key_value_heads"] = kv / hd;
      (*j)["head_dim"] = hd;
    }
  }
  LFM_ASSIGN_OR_RETURN(uint64_t ff, Rows(f, "lfm.layers.0.feed_forward.w1.weight"));
  (*j)["hidden_size"] = hidden;
  (*j)["num_hidden_layers"] = layers;
  (*j)["layer_types"] = types;
  (*j)["intermediate_size"] = ff;
  (*j)["block_auto_adjust_ff_dim"] = false;
  return Status::Ok();
}

Result<nlohmann::json> DetokenizerConfig(const GgufFile& detok, const GgufFile& vocoder, bool merged) {
  LFM_ASSIGN_OR_RETURN(nlohmann::json j,
                       BaseConfig(&vocoder, "lfmvox.detokenizer_config", kPublishedDetokenizer));
  if (!merged) {
    LFM_RETURN_IF_ERROR(Lfm2Section(detok, &j));
    const std::string a = Arch(detok) + ".";
    if (detok.metadata().Has(a + "embedding_length_out")) {
      LFM_ASSIGN_OR_RETURN(int64_t out, detok.metadata().GetI64(a + "embedding_length_out"));
      j["output_size"] = out;
    }
  }
  if (merged) LFM_RETURN_IF_ERROR(Lfm2SectionFromHfTensors(vocoder, &j));
  LFM_ASSIGN_OR_RETURN(uint64_t lin_rows,
                       Rows(merged ? vocoder : detok, merged ? "lin.weight" : "dense_2.weight"));
  j["output_size"] = lin_rows;
  return j;
}

// GgufWriter's metadata calls, keeping the first error for Write (the keys
// here are fixed, so an error is a bug, but it must not pass silently).
class MetaWriter {
 public:
  explicit MetaWriter(GgufWriter& w) : w_(w) {}
  void AddString(std::string_view k, std::string_view v) { Keep(w_.AddString(k, v)); }
  void AddU32(std::string_view k, uint32_t v) { Keep(w_.AddU32(k, v)); }
  void AddF32(std::string_view k, float v) { Keep(w_.AddF32(k, v)); }
  void AddBool(std::string_view k, bool v) { Keep(w_.AddBool(k, v)); }
  void AddArrayI32(std::string_view k, const std::vector<int32_t>& v) { Keep(w_.AddArrayI32(k, v)); }
  void AddArrayF32(std::string_view k, const std::vector<float>& v) { Keep(w_.AddArrayF32(k, v)); }
  void AddArrayString(std::string_view k, const std::vector<std::string>& v) {
    Keep(w_.AddArrayString(k, v));
  }
  const Status& status() const { return first_; }

 private:
  void Keep(Status s) {
    if (first_.ok() && !s.ok()) first_ = std::move(s);
  }
  GgufWriter& w_;
  Status first_;
};

// tokenizer.ggml.* [spec §1.2] as the vocabulary they describe.
Result<TokenizerVocab> VocabFromGguf(const GgufFile& f) {
  const GgufMetadata& m = f.metadata();
  TokenizerVocab v;
  LFM_ASSIGN_OR_RETURN(v.model, m.GetString("tokenizer.ggml.model"));
  if (m.Has("tokenizer.ggml.pre")) {
    LFM_ASSIGN_OR_RETURN(v.pre, m.GetString("tokenizer.ggml.pre"));
  }
  LFM_ASSIGN_OR_RETURN(v.tokens, m.GetStringArray("tokenizer.ggml.tokens"));
  if (m.Has("tokenizer.ggml.token_type")) {
    LFM_ASSIGN_OR_RETURN(std::vector<int64_t> types, m.GetIntArray("tokenizer.ggml.token_type"));
    for (size_t i = 0; i < types.size(); ++i) {
      if (types[i] < std::numeric_limits<int32_t>::min() || types[i] > std::numeric_limits<int32_t>::max()) {
        return OutOfRange(f.path() + ": tokenizer.ggml.token_type[" + std::to_string(i) + "] is " +
                          std::to_string(types[i]) + ", which does not fit i32");
      }
    }
    v.token_types.assign(types.begin(), types.end());
  }
  if (m.Has("tokenizer.ggml.merges")) {
    LFM_ASSIGN_OR_RETURN(v.merges, m.GetStringArray("tokenizer.ggml.merges"));
  }
  // A token id: an i32 (GetI32 names the key when the file's value does not fit) below the token count.
  auto id = [&](const char* key, int32_t* out) -> Status {
    if (!m.Has(key)) return Status::Ok();
    LFM_ASSIGN_OR_RETURN(int32_t x, m.GetI32(key));
    if (x < 0 || static_cast<size_t>(x) >= v.tokens.size()) {
      return OutOfRange(f.path() + ": " + key + " is " + std::to_string(x) + ", not one of the " +
                        std::to_string(v.tokens.size()) + " token ids of tokenizer.ggml.tokens");
    }
    *out = x;
    return Status::Ok();
  };
  LFM_RETURN_IF_ERROR(id("tokenizer.ggml.bos_token_id", &v.bos));
  LFM_RETURN_IF_ERROR(id("tokenizer.ggml.eos_token_id", &v.eos));
  LFM_RETURN_IF_ERROR(id("tokenizer.ggml.padding_token_id", &v.pad));
  // llama.cpp's default for the LLAMA3-family pre-tokenizers when the key is absent.
  v.add_bos = v.pre == "lfm2" || v.pre == "llama-bpe" || v.pre == "llama3";
  if (m.Has("tokenizer.ggml.add_bos_token")) {
    LFM_ASSIGN_OR_RETURN(v.add_bos, m.GetBool("tokenizer.ggml.add_bos_token"));
  }
  if (m.Has("tokenizer.ggml.add_eos_token")) {
    LFM_ASSIGN_OR_RETURN(v.add_eos, m.GetBool("tokenizer.ggml.add_eos_token"));
  }
  if (m.Has("tokenizer.chat_template")) {
    LFM_ASSIGN_OR_RETURN(v.chat_template, m.GetString("tokenizer.chat_template"));
  }
  return v;
}

void AddVocabMetadata(const TokenizerVocab& v, MetaWriter& w) {
  w.AddString("tokenizer.ggml.model", v.model);
  w.AddString("tokenizer.ggml.pre", v.pre);
  w.AddArrayString("tokenizer.ggml.tokens", v.tokens);
  w.AddArrayI32("tokenizer.ggml.token_type", v.token_types);
  std::vector<float> scores(v.tokens.size());
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = static_cast<float>(i);  // informational [§1.2]
  w.AddArrayF32("tokenizer.ggml.scores", scores);
  w.AddArrayString("tokenizer.ggml.merges", v.merges);
  if (v.bos >= 0) w.AddU32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(v.bos));
  if (v.eos >= 0) w.AddU32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(v.eos));
  if (v.pad >= 0) w.AddU32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(v.pad));
  w.AddBool("tokenizer.ggml.add_bos_token", v.add_bos);
  w.AddBool("tokenizer.ggml.add_eos_token", v.add_eos);
  if (!v.chat_template.empty()) w.AddString("tokenizer.chat_template", v.chat_template);
}

}  // namespace

// --- Finding the files ---------------------------------------------------------------

bool LooksLikeGgufRelease(const std::string& path) {
  std::error_code ec;
  const fs::path p(path);
  if (fs::is_regular_file(p, ec)) return p.extension() == ".gguf";
  if (!fs::is_directory(p, ec)) return false;
  // A snapshot's checkpoint wins over GGUF files converted beside it (Liquid's instructions leave
  // them next to config.json); one of those files as the path picks the GGUF set.
  if (fs::exists(p / "model.safetensors", ec) || fs::exists(p / "model.safetensors.index.json", ec))
    return false;
  for (const auto& e : fs::directory_iterator(p, ec))
    if (e.path().extension() == ".gguf") return true;
  return false;
}

Result<Lfm25GgufFiles> FindLfm25GgufRelease(const std::string& path) {
  std::error_code ec;
  fs::path dir(path);
  std::string want_variant;
  bool pick_variant = false;
  if (fs::is_regular_file(dir, ec)) {
    want_variant = Variant(dir);
    pick_variant = true;
    dir = dir.parent_path();
    if (dir.empty()) dir = ".";
  }
  std::vector<fs::path> ggufs;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".gguf") ggufs.push_back(e.path());
  if (ec) return NotFound("cannot list " + dir.string() + ": " + ec.message());
  std::sort(ggufs.begin(), ggufs.end());
  std::map<std::string, Lfm25GgufFiles> by_variant;
  for (const fs::path& p : ggufs) {
    if (pick_variant && Variant(p) != want_variant) continue;
    Result<std::unique_ptr<GgufFile>> f = GgufFile::Open(p.string());
    if (!f.ok()) return f.status().WithContext("reading the GGUF release in " + dir.string());
    Lfm25GgufFiles& set = by_variant[Variant(p)];
    std::string* slot = nullptr;
    switch (RoleOf(**f)) {
      case Role::kBackbone:
        slot = &set.backbone;
        break;
      case Role::kMmproj:
        slot = &set.mmproj;
        break;
      case Role::kVocoder:
        slot = &set.vocoder;
        break;
      case Role::kDetokenizer:
        slot = &set.detokenizer;
        break;
      case Role::kNone:
        break;
    }
    if (slot == nullptr) continue;  // some other GGUF file
    if (!slot->empty()) {
      return InvalidArgument(dir.string() + " holds two files of the same part: " + *slot + " and " +
                             p.string() + "; keep one set per folder or pass one file of the set as --model");
    }
    *slot = p.string();
  }
  std::erase_if(by_variant,
                [](const auto& kv) { return kv.second.backbone.empty() && kv.second.vocoder.empty(); });
  if (by_variant.empty()) {
    return NotFound(
        path +
        " holds no LFM2.5-Audio GGUF release (a backbone LFM2.5-Audio-*.gguf and a vocoder-*.gguf); "
        "pass a Hugging Face snapshot or the folder of Liquid's GGUF files");
  }
  if (by_variant.size() > 1) {
    std::string names;
    for (const auto& [v, s] : by_variant) names += (names.empty() ? "" : ", ") + v;
    return InvalidArgument(dir.string() + " holds several GGUF sets (" + names +
                           "); pass the path of one file of the set you want as --model");
  }
  return by_variant.begin()->second;
}

// --- Opening ----------------------------------------------------------------------------

Result<Lfm25GgufModel> OpenLfm25GgufRelease(const Lfm25GgufFiles& paths, bool want_main) {
  auto owner = std::make_shared<OpenFiles>();
  auto open = [&](const std::string& p) -> Result<const GgufFile*> {
    LFM_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> f, GgufFile::Open(p));
    owner->files.push_back(std::move(f));
    return owner->files.back().get();
  };
  const GgufFile* vocoder = nullptr;
  if (!paths.vocoder.empty()) {
    LFM_ASSIGN_OR_RETURN(vocoder, open(paths.vocoder));
  } else if (!want_main) {
    return NotFound(
        "the GGUF release has no vocoder-*.gguf (it holds the detokenizer's code table and iSTFT window); "
        "download it with tokenizer-*.gguf");
  }
  Lfm25GgufModel out;
  out.where = want_main ? paths.backbone : paths.vocoder;
  std::map<std::string, TensorView, std::less<>> main;
  if (want_main) {
    if (paths.backbone.empty()) return NotFound("the GGUF release has no backbone file");
    LFM_ASSIGN_OR_RETURN(const GgufFile* backbone, open(paths.backbone));
    const GgufFile* mmproj = nullptr;
    if (!paths.mmproj.empty()) {
      LFM_ASSIGN_OR_RETURN(mmproj, open(paths.mmproj));
      LFM_RETURN_IF_ERROR(AddTensors(*mmproj, MmprojToHf, &main));
    }
    LFM_RETURN_IF_ERROR(AddTensors(
        *backbone,
        [](std::string_view g) -> std::optional<std::string> {
          auto h = Lfm2ToHf(g);
          if (h && StartsWith(*h, "lin.")) return std::nullopt;
          return h;
        },
        &main));
    // The vocoder's audio tables override the mmproj's F32 copy of audio_embedding.
    if (vocoder != nullptr) {
      LFM_RETURN_IF_ERROR(AddTensors(
          *vocoder,
          [](std::string_view g) -> std::optional<std::string> {
            std::string h = VocoderToHf(g);
            if (!IsVocoderTensor(h)) return std::nullopt;
            return h;
          },
          &main));
    }
    LFM_ASSIGN_OR_RETURN(out.config, MainConfig(*backbone, mmproj, vocoder));
    LFM_ASSIGN_OR_RETURN(out.vocab, VocabFromGguf(*backbone));
    out.has_encoder = mmproj != nullptr;
    out.has_depthformer = vocoder != nullptr;
  }
  if (vocoder == nullptr) {
    out.weights.emplace(Checkpoint::FromViews(out.where, std::move(main), owner, owner->Mappings()));
    return out;
  }
  // The detokenizer: split (its own file) or merged (in the vocoder).
  const bool merged = vocoder->FindTensor("lfm.layers.0.conv.in_proj.weight") != nullptr;
  const GgufFile* detok = nullptr;
  if (!merged && !paths.detokenizer.empty()) {
    LFM_ASSIGN_OR_RETURN(detok, open(paths.detokenizer));
  }
  if (merged || detok != nullptr) {
    std::map<std::string, TensorView, std::less<>> d;
    LFM_RETURN_IF_ERROR(AddTensors(
        *vocoder,
        [merged](std::string_view g) -> std::optional<std::string> {
          if (g == "emb.emb.weight" || g == "istft.window") return std::string(g);
          if (merged && (StartsWith(g, "lfm.") || StartsWith(g, "lin."))) return std::string(g);
          return std::nullopt;
        },
        &d));
    if (detok != nullptr) LFM_RETURN_IF_ERROR(AddTensors(*detok, Lfm2ToHf, &d));
    LFM_ASSIGN_OR_RETURN(out.detokenizer_config,
                         DetokenizerConfig(merged ? *vocoder : *detok, *vocoder, merged));
    out.detokenizer = Checkpoint::FromViews(merged ? paths.vocoder : paths.detokenizer, std::move(d), owner,
                                            owner->Mappings());
  }
  if (want_main)
    out.weights.emplace(Checkpoint::FromViews(out.where, std::move(main), owner, owner->Mappings()));
  return out;
}

Result<Lfm2Gguf> OpenLfm2Gguf(const std::string& path) {
  auto owner = std::make_shared<OpenFiles>();
  LFM_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> f, GgufFile::Open(path));
  if (Arch(*f) != "lfm2") {
    return InvalidArgument(path + " is not an LFM2 model (general.architecture \"" + Arch(*f) + "\")");
  }
  nlohmann::json j = nlohmann::json::object();
  LFM_RETURN_IF_ERROR(Lfm2Section(*f, &j));
  std::map<std::string, TensorView, std::less<>> t;
  LFM_RETURN_IF_ERROR(AddTensors(*f, Lfm2ToHf, &t));
  owner->files.push_back(std::move(f));
  LFM_ASSIGN_OR_RETURN(Lfm2Config c, Lfm2Config::FromJson(j, path + " (GGUF metadata)"));
  return Lfm2Gguf{std::move(c), Checkpoint::FromViews(path, std::move(t), owner, owner->Mappings())};
}

// --- Writing ----------------------------------------------------------------------------

// Kyutai's Mimi checkpoint as LFM2-Audio-1.5B's snapshot names it (codecs/mimi's kMimiCheckpointName; the
// model library does not depend on the codec's).
constexpr const char kMimiFileName[] = "tokenizer-e351c8d8-checkpoint125.safetensors";

bool ParseGgufWriteType(const std::string& name, WeightFormat* out) {
  for (WeightFormat f : {WeightFormat::kF32, WeightFormat::kF16, WeightFormat::kBF16, WeightFormat::kQ8_0,
                         WeightFormat::kQ4_0}) {
    std::string n = WeightFormatName(f);
    std::string lower = n;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (name == n || name == lower) {
      *out = f;
      return true;
    }
  }
  return false;
}

namespace {

uint32_t GgmlTypeOf(WeightFormat f) {
  switch (f) {
    case WeightFormat::kF32:
      return static_cast<uint32_t>(GgmlType::F32);
    case WeightFormat::kF16:
      return static_cast<uint32_t>(GgmlType::F16);
    case WeightFormat::kBF16:
      return static_cast<uint32_t>(GgmlType::BF16);
    case WeightFormat::kQ8_0:
      return static_cast<uint32_t>(GgmlType::Q8_0);
    case WeightFormat::kQ4_0:
      return static_cast<uint32_t>(GgmlType::Q4_0);
    case WeightFormat::kQ6_K:
      return static_cast<uint32_t>(GgmlType::Q6_K);
  }
  return 0;
}

// llama.cpp's general.file_type for a release type.
uint32_t FileType(WeightFormat f) {
  switch (f) {
    case WeightFormat::kF32:
      return 0;
    case WeightFormat::kF16:
      return 1;
    case WeightFormat::kQ4_0:
      return 2;
    case WeightFormat::kQ8_0:
      return 7;
    case WeightFormat::kBF16:
      return 32;
    default:
      return 0;
  }
}

// One tensor to write: its GGUF name, format and converted bytes.
struct Pending {
  std::string name;
  WeightFormat format;
  std::vector<uint64_t> ne;
  std::vector<uint8_t> bytes;
};

// A tensor of the snapshot widened to f32.
Result<std::vector<float>> ToF32(const TensorView& t, const std::string& name) {
  const size_t n = static_cast<size_t>(t.elements());
  std::vector<float> out(n);
  const auto* s = static_cast<const uint8_t*>(t.data);
  for (size_t i = 0; i < n; ++i) {
    switch (t.dtype) {
      case DType::kF32:
        std::memcpy(&out[i], s + 4 * i, 4);
        break;
      case DType::kBF16:
      case DType::kF16: {
        uint16_t h;
        std::memcpy(&h, s + 2 * i, 2);
        out[i] = t.dtype == DType::kBF16 ? Bf16ToF32(h) : F16ToF32(h);
        break;
      }
      default:
        return InvalidArgument("tensor " + name + " is " + DTypeName(t.dtype) +
                               "; a floating dtype is required");
    }
  }
  return out;
}

// The rows of `x` ([rows, cols], cols = ne[0]) in format f.
Pending Encode(std::string name, WeightFormat f, std::vector<uint64_t> ne, const std::vector<float>& x) {
  Pending p{std::move(name), f, std::move(ne), {}};
  const size_t cols = p.ne[0], rows = x.size() / cols;
  const size_t rb = FormatRowBytes(f, cols);
  p.bytes.resize(rows * rb);
  for (size_t r = 0; r < rows; ++r) QuantizeRow(f, x.data() + r * cols, cols, p.bytes.data() + r * rb);
  return p;
}

// The format of a 2-D weight under the release type, with llama-quantize's
// fallback to F16 for a row that is no whole number of blocks.
WeightFormat QuantFormat(WeightFormat want, size_t cols) {
  if (FormatRowBytes(want, cols) == 0) return WeightFormat::kF16;
  return want;
}

// The stored format of a tensor of ggml shape `ne` under the release type:
// F32 when forced or not a matrix; llama-quantize's output-tensor rule for
// the tied embedding (Q6_K for the 4-bit types, Q8_0 when the row is no whole
// number of 256-blocks); else the type, or F16 for a row of partial blocks.
WeightFormat TargetFormat(const std::vector<uint64_t>& ne, WeightFormat type, bool force_f32,
                          bool tied_head) {
  if (ne.size() < 2 || force_f32) return WeightFormat::kF32;
  if (tied_head && type == WeightFormat::kQ4_0) {
    return FormatRowBytes(WeightFormat::kQ6_K, ne[0]) != 0 ? WeightFormat::kQ6_K
                                                           : QuantFormat(WeightFormat::kQ8_0, ne[0]);
  }
  return QuantFormat(type, ne[0]);
}

bool IsOneD(const TensorView& t) {
  int non_unit = 0;
  for (int i = 0; i < t.shape.rank; ++i) non_unit += t.shape[i] > 1 ? 1 : 0;
  return t.shape.rank <= 1 || non_unit <= 1;
}

// The tensors kept in F32 under release type `type`: norms, biases and other 1-D tensors and the
// short-conv taps always; in the encoder, llama.cpp's converter's tensor_force_quant test (".conv" in
// the name, or "_conv" in a weight's: the whole convolution module and the subsampling) and the
// positional biases. The 8- and 4-bit files are llama-quantize's work on the converter's output, and it
// quantizes every 2-D weight whose rows are whole blocks: of those F32 tensors, the conv module's two
// pointwise convolutions (a.blk.N.conv_pw1/conv_pw2, 2-D once squeezed); the depthwise taps and the
// 4-D subsampling kernels stay F32 (rows of 9 and 3 values).
bool ForcedF32(const std::string& hf, const TensorView& t, WeightFormat type) {
  if (IsOneD(t) || hf.ends_with(".bias") || hf.ends_with(".conv.conv.weight")) return true;
  const bool encoder = StartsWith(hf, "conformer.") || StartsWith(hf, "audio_adapter.");
  if (!encoder) return false;
  if (IsBlockFormat(type) &&
      (hf.ends_with(".conv.pointwise_conv1.weight") || hf.ends_with(".conv.pointwise_conv2.weight")))
    return false;
  return hf.find(".conv") != std::string::npos ||
         (hf.find("_conv") != std::string::npos && hf.find(".weight") != std::string::npos) ||
         hf.find("pos_bias") != std::string::npos;
}

// The user's --keep-f32 globs (fnmatch on the GGUF names), and how many tensors each matched.
class KeepF32 {
 public:
  explicit KeepF32(const std::vector<std::string>& globs) : globs_(globs), hits_(globs.size()) {}
  bool Matches(const std::string& gguf_name) {
    bool any = false;
    for (size_t i = 0; i < globs_.size(); ++i) {
      if (fnmatch(globs_[i].c_str(), gguf_name.c_str(), 0) == 0) {
        ++hits_[i];
        any = true;
      }
    }
    return any;
  }
  // A glob that named no tensor is a typo, not a choice.
  Status CheckAllMatched() const {
    for (size_t i = 0; i < globs_.size(); ++i) {
      if (hits_[i] == 0) {
        return InvalidArgument("keep-f32 pattern \"" + globs_[i] +
                               "\" names no tensor of the release (GGUF names, e.g. blk.*.ffn_up.weight, "
                               "a.blk.*.conv_pw1.weight, token_embd.weight, depthformer.*)");
      }
    }
    return Status::Ok();
  }

 private:
  const std::vector<std::string>& globs_;
  std::vector<size_t> hits_;
};

// Converts every tensor with the rules of spec §1.2–§1.5 and writes the file.
class FileBuilder {
 public:
  FileBuilder(std::string path, KeepF32& keep) : path_(std::move(path)), keep_(keep) {}
  MetaWriter& meta() { return meta_; }

  // `force_f32`: norms, biases, 1-D and convolution tensors.
  Status Add(const std::string& gguf_name, const std::string& hf_name, const TensorView& t, WeightFormat type,
             bool force_f32, bool tied_head = false) {
    LFM_ASSIGN_OR_RETURN(std::vector<float> x, ToF32(t, hf_name));
    return AddF32(gguf_name, hf_name, t.shape, std::move(x), type, force_f32, tied_head);
  }
  Status AddF32(const std::string& gguf_name, const std::string& hf_name, const Shape& shape,
                std::vector<float> x, WeightFormat type, bool force_f32, bool tied_head = false) {
    std::vector<uint64_t> ne = GgufNe(hf_name, shape);
    const bool keep = keep_.Matches(gguf_name);
    const WeightFormat f = TargetFormat(ne, type, force_f32 || keep, tied_head);
    pending_.push_back(Encode(gguf_name, f, std::move(ne), x));
    return Status::Ok();
  }

  Status Write() {
    LFM_RETURN_IF_ERROR(meta_.status());
    for (const Pending& p : pending_) {
      LFM_RETURN_IF_ERROR(
          w_.AddTensor(p.name, GgmlTypeOf(p.format), p.ne,
                       std::string_view(reinterpret_cast<const char*>(p.bytes.data()), p.bytes.size())));
    }
    return w_.Write(path_);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  KeepF32& keep_;
  GgufWriter w_;
  MetaWriter meta_{w_};
  std::vector<Pending> pending_;
};

// The LFM2 metadata of the backbone and detokenizer files [spec §1.2, §1.5].
void WriteLfm2Meta(MetaWriter& w, const Lfm2Config& c, int64_t vocab, int64_t ff_key, int output_size) {
  w.AddString("general.architecture", "lfm2");
  w.AddU32("lfm2.context_length", static_cast<uint32_t>(c.max_positions));
  w.AddU32("lfm2.embedding_length", static_cast<uint32_t>(c.hidden_size));
  w.AddU32("lfm2.block_count", static_cast<uint32_t>(c.num_layers));
  w.AddU32("lfm2.feed_forward_length", static_cast<uint32_t>(ff_key));
  w.AddU32("lfm2.attention.head_count", static_cast<uint32_t>(c.num_heads));
  std::vector<int32_t> kv;
  for (LayerKind k : c.layers) kv.push_back(k == LayerKind::kConv ? 0 : c.num_kv_heads);
  w.AddArrayI32("lfm2.attention.head_count_kv", kv);
  w.AddF32("lfm2.rope.freq_base", static_cast<float>(c.rope_theta));
  w.AddF32("lfm2.attention.layer_norm_rms_epsilon", c.norm_eps);
  w.AddU32("lfm2.shortconv.l_cache", static_cast<uint32_t>(c.conv_kernel));
  w.AddU32("lfm2.vocab_size", static_cast<uint32_t>(vocab));
  w.AddU32("lfm2.attention.key_length", static_cast<uint32_t>(c.head_dim));
  w.AddU32("lfm2.attention.value_length", static_cast<uint32_t>(c.head_dim));
  if (c.sliding_window > 0)
    w.AddU32("lfm2.attention.sliding_window", static_cast<uint32_t>(c.sliding_window));
  if (output_size > 0) w.AddU32("lfm2.embedding_length_out", static_cast<uint32_t>(output_size));
}

// Adds the LFM2 stack + globals of `ck` (names lfm.* / lin.*) under GGUF names.
Status AddLfm2Tensors(FileBuilder& b, const Checkpoint& ck, WeightFormat type) {
  for (const std::string& hf : ck.Names()) {
    if (!StartsWith(hf, "lfm.") && !StartsWith(hf, "lin.")) continue;
    std::optional<std::string> g = Lfm2ToGguf(hf);
    if (!g) return InvalidArgument("lfmvox does not know where tensor " + hf + " goes in a GGUF file");
    LFM_ASSIGN_OR_RETURN(TensorView t, ck.Get(hf));
    LFM_RETURN_IF_ERROR(b.Add(*g, hf, t, type, ForcedF32(hf, t, type), hf == "lfm.embed_tokens.weight"));
  }
  return Status::Ok();
}

std::string TypeName(WeightFormat f) { return WeightFormatName(f); }

DType DTypeOf(WeightFormat f) {
  switch (f) {
    case WeightFormat::kF32:
      return DType::kF32;
    case WeightFormat::kBF16:
      return DType::kBF16;
    case WeightFormat::kF16:
      return DType::kF16;
    case WeightFormat::kQ8_0:
      return DType::kQ8_0;
    case WeightFormat::kQ4_0:
      return DType::kQ4_0;
    case WeightFormat::kQ6_K:
      return DType::kQ6_K;
  }
  return DType::kF32;
}

// What QuantizeCheckpoint's views point into: the source checkpoint and the converted rows.
struct QuantizedArena {
  Checkpoint source;
  std::vector<std::vector<uint8_t>> tensors;
};

}  // namespace

Result<Checkpoint> QuantizeCheckpoint(Checkpoint ck, WeightFormat type) {
  auto arena = std::make_shared<QuantizedArena>(QuantizedArena{std::move(ck), {}});
  std::map<std::string, TensorView, std::less<>> out;
  for (const std::string& hf : arena->source.Names()) {
    LFM_ASSIGN_OR_RETURN(TensorView t, arena->source.Get(hf));
    WeightFormat stored;
    const bool floating = WeightFormatForDType(t.dtype, &stored) && !IsBlockFormat(stored);
    // Matrices: rank 2, or a pointwise convolution's [out, in, 1].
    const bool matrix = t.shape.rank == 2 || (t.shape.rank == 3 && t.shape[2] == 1);
    if (!floating || ForcedF32(hf, t, type) || !matrix) {  // kept as stored
      out.emplace(hf, t);
      continue;
    }
    const WeightFormat f = TargetFormat(GgufNe(hf, t.shape), type, false, hf == "lfm.embed_tokens.weight");
    if (f == stored) {
      out.emplace(hf, t);
      continue;
    }
    LFM_ASSIGN_OR_RETURN(std::vector<float> x, ToF32(t, hf));
    const size_t cols = static_cast<size_t>(t.shape[1]), rows = static_cast<size_t>(t.shape[0]);
    const size_t rb = FormatRowBytes(f, cols);
    std::vector<uint8_t>& bytes = arena->tensors.emplace_back(rows * rb);
    for (size_t r = 0; r < rows; ++r) QuantizeRow(f, x.data() + r * cols, cols, bytes.data() + r * rb);
    TensorView q = t;
    q.dtype = DTypeOf(f);
    q.data = bytes.data();
    out.emplace(hf, q);
  }
  const std::string path = arena->source.path();
  return Checkpoint::FromViews(path, std::move(out), arena);
}

Result<Lfm25GgufFiles> WriteLfm25GgufRelease(const std::string& snapshot_dir, const std::string& out_dir,
                                             const Lfm25GgufWriteOptions& o) {
  switch (o.type) {
    case WeightFormat::kF32:
    case WeightFormat::kF16:
    case WeightFormat::kBF16:
    case WeightFormat::kQ8_0:
    case WeightFormat::kQ4_0:
      break;
    default:
      return InvalidArgument("the release type must be f32, f16, bf16, q8_0 or q4_0");
  }
  const fs::path src(snapshot_dir);
  std::error_code ec;
  if (!fs::exists(src / "config.json", ec))
    return NotFound(snapshot_dir + " has no config.json; pass a Hugging Face snapshot of LFM2.5-Audio");
  LFM_ASSIGN_OR_RETURN(nlohmann::json cfg_json, ReadJsonFile((src / "config.json").string()));
  LFM_ASSIGN_OR_RETURN(Lfm25AudioConfig cfg,
                       Lfm25AudioConfig::FromJson(cfg_json, (src / "config.json").string()));
  // LFM2-Audio-1.5B has no audio_detokenizer/ (its codec is Kyutai's Mimi file): its set is the backbone,
  // the mmproj and a vocoder without the detokenizer's table and window, with the Mimi file copied beside
  // them, since no GGUF layout of Mimi exists.
  const fs::path detok_dir = src / "audio_detokenizer";
  const bool has_detok = fs::is_directory(detok_dir, ec);
  nlohmann::json dcfg_json;
  std::optional<Lfm25DetokenizerConfig> dcfg;
  std::optional<Checkpoint> dck;
  if (has_detok) {
    LFM_ASSIGN_OR_RETURN(dcfg_json, ReadJsonFile((detok_dir / "config.json").string()));
    LFM_ASSIGN_OR_RETURN(dcfg,
                         Lfm25DetokenizerConfig::FromJson(dcfg_json, (detok_dir / "config.json").string()));
    LFM_ASSIGN_OR_RETURN(dck, Checkpoint::Open(detok_dir.string()));
  } else if (!fs::is_regular_file(src / kMimiFileName, ec)) {
    return NotFound(snapshot_dir + " has neither audio_detokenizer/ (LFM2.5-Audio's speech decoder) nor " +
                    kMimiFileName + " (LFM2-Audio's Mimi); download the whole snapshot");
  }
  LFM_ASSIGN_OR_RETURN(Checkpoint ck, Checkpoint::Open(src.string()));
  // The special ids and vocab size llama.cpp's converter takes from config.json [spec §1.2].
  VocabExportOptions vo;
  const nlohmann::json& lfm_json = cfg_json["lfm"];
  for (auto [key, out] : {std::pair{"bos_token_id", &vo.bos},
                          {"eos_token_id", &vo.eos},
                          {"pad_token_id", &vo.pad},
                          {"vocab_size", &vo.vocab_size}}) {
    if (lfm_json.contains(key) && lfm_json[key].is_number_integer()) *out = lfm_json[key].get<int32_t>();
  }
  if (fs::exists(src / "chat_template.jinja", ec)) {
    LFM_ASSIGN_OR_RETURN(vo.chat_template,
                         ReadFileToString((src / "chat_template.jinja").string(), 1u << 20));
  }
  LFM_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::LoadFile((src / "tokenizer.json").string()));
  Result<TokenizerVocab> exported = tok.ExportVocab(vo);
  if (!exported.ok() && vo.vocab_size > 0) {
    // A config vocab_size below the tokenizer's ids (the oracle's small
    // embedding tables) pads nothing: write the tokenizer as it is.
    vo.vocab_size = 0;
    exported = tok.ExportVocab(vo);
  }
  LFM_RETURN_IF_ERROR(exported.status());
  TokenizerVocab vocab = std::move(exported).value();

  fs::create_directories(out_dir, ec);
  if (ec) return InvalidArgument("cannot create " + out_dir + ": " + ec.message());
  const std::string suffix = o.name + "-" + TypeName(o.type) + ".gguf";
  Lfm25GgufFiles out{(fs::path(out_dir) / suffix).string(),
                     (fs::path(out_dir) / ("mmproj-" + suffix)).string(),
                     (fs::path(out_dir) / ("vocoder-" + suffix)).string(),
                     (fs::path(out_dir) / ("tokenizer-" + suffix)).string()};
  const uint32_t file_type = FileType(o.type);
  KeepF32 keep(o.keep_f32);

  // Backbone: lfm.* of model.safetensors plus the text tokenizer.
  {
    FileBuilder b(out.backbone, keep);
    MetaWriter& w = b.meta();
    LFM_ASSIGN_OR_RETURN(TensorView emb, ck.Get("lfm.embed_tokens.weight"));
    WriteLfm2Meta(w, cfg.lfm, emb.shape[0], cfg.lfm.ffn_dim, 0);
    w.AddString("general.type", "model");
    w.AddString("general.name", o.name);
    w.AddU32("general.file_type", file_type);
    w.AddU32("general.quantization_version", 2);
    AddVocabMetadata(vocab, w);
    if (o.embed_configs) w.AddString("lfmvox.config", cfg_json.dump());
    LFM_RETURN_IF_ERROR(AddLfm2Tensors(b, ck, o.type));
    LFM_RETURN_IF_ERROR(b.Write());
  }
  // Encoder: conformer.* and audio_adapter.*, the BatchNorm folded [spec §1.3].
  {
    FileBuilder b(out.mmproj, keep);
    MetaWriter& w = b.meta();
    const ConformerConfig& e = cfg.encoder;
    w.AddString("general.architecture", "clip");
    w.AddString("general.type", "mmproj");
    w.AddU32("general.file_type", file_type);
    w.AddBool("clip.has_audio_encoder", true);
    w.AddString("clip.projector_type", "lfm2a");
    w.AddU32("clip.audio.projection_dim", static_cast<uint32_t>(cfg.lfm.hidden_size));
    w.AddU32("clip.audio.embedding_length", static_cast<uint32_t>(e.d_model));
    w.AddU32("clip.audio.feed_forward_length",
             static_cast<uint32_t>(e.d_model));  // as the converter writes it
    w.AddU32("clip.audio.block_count", static_cast<uint32_t>(e.n_layers));
    w.AddU32("clip.audio.attention.head_count", static_cast<uint32_t>(e.n_heads));
    w.AddF32("clip.audio.attention.layer_norm_epsilon", e.norm_eps);
    w.AddU32("clip.audio.num_mel_bins", static_cast<uint32_t>(cfg.preprocessor.n_mels));
    for (const std::string& hf : ck.Names()) {
      const bool enc = StartsWith(hf, "conformer.") || StartsWith(hf, "audio_adapter.");
      if (!enc || IsDroppedMainTensor(hf)) continue;
      std::optional<std::string> g = MmprojToGguf(hf);
      if (!g) return InvalidArgument("lfmvox does not know where tensor " + hf + " goes in a GGUF file");
      LFM_ASSIGN_OR_RETURN(TensorView t, ck.Get(hf));
      const bool f32 = ForcedF32(hf, t, o.type);
      if (hf.ends_with(".batch_norm.weight") || hf.ends_with(".batch_norm.bias")) {
        // w' = γ/√(var + eps), b' = β − mean·w' (ConformerAudioModel.modify_tensors).
        const std::string p = hf.substr(0, hf.rfind('.'));
        LFM_ASSIGN_OR_RETURN(TensorView tg, ck.Get(p + ".weight"));
        LFM_ASSIGN_OR_RETURN(TensorView tb, ck.Get(p + ".bias"));
        LFM_ASSIGN_OR_RETURN(TensorView tm, ck.Get(p + ".running_mean"));
        LFM_ASSIGN_OR_RETURN(TensorView tv, ck.Get(p + ".running_var"));
        LFM_ASSIGN_OR_RETURN(std::vector<float> gamma, ToF32(tg, p));
        LFM_ASSIGN_OR_RETURN(std::vector<float> beta, ToF32(tb, p));
        LFM_ASSIGN_OR_RETURN(std::vector<float> mean, ToF32(tm, p));
        LFM_ASSIGN_OR_RETURN(std::vector<float> var, ToF32(tv, p));
        if (gamma.size() != beta.size() || gamma.size() != mean.size() || gamma.size() != var.size())
          return InvalidArgument(p + ": the batch norm tensors differ in length");
        std::vector<float> v(gamma.size());
        for (size_t i = 0; i < v.size(); ++i) {
          const float scale = gamma[i] / std::sqrt(var[i] + e.norm_eps);
          v[i] = hf.ends_with(".weight") ? scale : beta[i] - mean[i] * scale;
        }
        LFM_RETURN_IF_ERROR(b.AddF32(*g, hf, t.shape, std::move(v), o.type, true));
        continue;
      }
      LFM_RETURN_IF_ERROR(b.Add(*g, hf, t, o.type, f32));
    }
    // The audio-code input table, forced F32 in the mmproj (A_ENC_EMBD_POS).
    LFM_ASSIGN_OR_RETURN(TensorView ae, ck.Get("audio_embedding.embedding.weight"));
    LFM_RETURN_IF_ERROR(
        b.Add("a.position_embd.weight", "audio_embedding.embedding.weight", ae, o.type, true));
    LFM_RETURN_IF_ERROR(b.Write());
  }
  // Vocoder: depthformer, audio embeddings, emb.emb and istft.window [spec §1.4].
  {
    FileBuilder b(out.vocoder, keep);
    MetaWriter& w = b.meta();
    w.AddString("general.architecture",
                "this model cannot be used as LLM, use it via --model-vocoder in TTS examples");
    w.AddU32("depthformer_n_layer", static_cast<uint32_t>(cfg.depthformer.layers));
    w.AddU32("depthformer_n_embd", static_cast<uint32_t>(cfg.depthformer.dim));
    if (o.embed_configs && has_detok) w.AddString("lfmvox.detokenizer_config", dcfg_json.dump());
    for (const std::string& hf : ck.Names()) {
      if (!IsVocoderTensor(hf)) continue;
      LFM_ASSIGN_OR_RETURN(TensorView t, ck.Get(hf));
      LFM_RETURN_IF_ERROR(b.Add(VocoderToGguf(hf), hf, t, o.type, ForcedF32(hf, t, o.type)));
      // A tied head the snapshot does not store is written out, as Liquid's files have it.
      const std::string emb = ".embedding.weight";
      if (StartsWith(hf, "depth_embeddings.") && hf.ends_with(emb)) {
        const std::string logits = hf.substr(0, hf.size() - emb.size()) + ".to_logits.weight";
        if (!ck.Has(logits)) LFM_RETURN_IF_ERROR(b.Add(VocoderToGguf(logits), logits, t, o.type, false));
      }
    }
    for (const char* hf : {"emb.emb.weight", "istft.window"}) {
      if (!has_detok) break;
      LFM_ASSIGN_OR_RETURN(TensorView t, dck->Get(hf));
      LFM_RETURN_IF_ERROR(b.Add(hf, hf, t, o.type, ForcedF32(hf, t, o.type)));
    }
    LFM_RETURN_IF_ERROR(b.Write());
  }
  if (!has_detok) {
    out.detokenizer = (fs::path(out_dir) / kMimiFileName).string();
    LFM_RETURN_IF_ERROR(CopyWholeFile((src / kMimiFileName).string(), out.detokenizer));
  }
  // Detokenizer: the LFM2 stack of audio_detokenizer/ plus dense_2 [spec §1.5].
  if (has_detok) {
    FileBuilder b(out.detokenizer, keep);
    MetaWriter& w = b.meta();
    LFM_ASSIGN_OR_RETURN(TensorView emb, dck->Get("lfm.embed_tokens.weight"));
    WriteLfm2Meta(w, dcfg->lfm, emb.shape[0], dcfg->lfm.ffn_dim, dcfg->output_size);
    w.AddString("general.type", "model");
    w.AddU32("general.file_type", file_type);
    w.AddString("tokenizer.ggml.model", "none");
    LFM_RETURN_IF_ERROR(AddLfm2Tensors(b, *dck, o.type));
    LFM_RETURN_IF_ERROR(b.Write());
  }
  LFM_RETURN_IF_ERROR(keep.CheckAllMatched());
  // Every tensor of the snapshot has a place (or is one the converters drop).
  for (const std::string& hf : ck.Names()) {
    const bool placed = StartsWith(hf, "lfm.") || StartsWith(hf, "conformer.") ||
                        StartsWith(hf, "audio_adapter.") || IsVocoderTensor(hf) || IsDroppedMainTensor(hf);
    if (!placed) return InvalidArgument("lfmvox does not know where tensor " + hf + " goes in a GGUF file");
  }
  return out;
}

}  // namespace lfmvox
