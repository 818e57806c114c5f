// LFM3-Audio speech-output configuration: the flat config.json of the `lfm3_tiny` oracle
// (tests/data/lfm3_tiny/config.json; /work/shared/oracle/README.md "LFM3-Audio speech output"):
// top-level constants (n_codebooks, codebook_size, audio_eos, maskgit, text_hidden) and the sections
// `depth_decoder` and `codec`. Parsed once and validated into typed structs; stage loaders take the
// structs, never JSON. Every error names the file (`where`) and the key.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "base/status.h"

namespace lfmvox {

enum class Lfm3LayerKind { kConv, kAttention };
const char* Lfm3LayerKindName(Lfm3LayerKind k);

// One LFM3 layer stack (the depth decoder's or the codec's): per layer
//   h = x + PostOpNorm?(Op(OpNorm(x))),  out = h + PostFfnNorm?(SwiGLU(FfnNorm(h)))
// then `embedding_norm`. Op is ShortConv or GQA attention (q/k norms, RoPE rotate-half, optional
// per-head sigmoid gate).
struct Lfm3StackConfig {
  int hidden_size = 0;  // H
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;     // hd; num_heads·head_dim == hidden_size (the seed recomputes hd = H / heads)
  int ffn_dim = 0;      // F, `intermediate_size` as stored (w1 rows; no LFM2 auto-adjust)
  int conv_kernel = 0;  // K, `conv_L_cache`; 0 when the stack has no conv layer
  float norm_eps = 0;   // every RMSNorm of the stack (operator, ffn, sandwich, q/k, final)
  double rope_theta = 0;
  // 0: bidirectional (each call is a whole sequence: positions 0..n−1, every query sees every row of
  // the call, nothing persists); w > 0: causal, each query sees itself and the w − 1 positions before.
  int window = 0;
  std::vector<Lfm3LayerKind> layers;
  // Optional per-layer flags as the config states them; empty when the config omits the key. The
  // stack detects the tensors and, where a list is given, checks that they agree with it.
  std::vector<bool> post_operator_norm;
  std::vector<bool> post_ffn_norm;
  std::vector<bool> attn_gate;  // per-head gate on attention layers (`attn_gate_kind` "per_head")
  // Per-layer attention for a causal stack whose attention layers differ (the backbone); empty: every
  // attention layer uses `window`, `rope_theta` and the whole head. Non-empty (num_layers entries each,
  // entries of conv layers unused): the stack is causal, `window` must be 0, and attention layer i sees
  // the whole context when layer_window[i] == 0 (full causal; its K/V cache grows to the context), else
  // itself and the layer_window[i] − 1 positions before; it rotates the first layer_rotary_dims[i] dims of
  // each head (even, <= head_dim) with base layer_rope_theta[i].
  std::vector<int> layer_window;
  std::vector<double> layer_rope_theta;
  std::vector<int> layer_rotary_dims;

  bool per_layer_attention() const { return !layer_window.empty(); }
  bool bidirectional() const { return window == 0 && layer_window.empty(); }
  // Layer i's attention window (0 full causal or bidirectional), RoPE base and rotated dims.
  int attention_window(size_t i) const { return per_layer_attention() ? layer_window[i] : window; }
  double attention_rope_theta(size_t i) const {
    return per_layer_attention() ? layer_rope_theta[i] : rope_theta;
  }
  int attention_rotary_dims(size_t i) const {
    return per_layer_attention() ? layer_rotary_dims[i] : head_dim;
  }
  // Checks the per-layer lists (sizes, ranges); `where` prefixes the message.
  Status ValidatePerLayer(const std::string& where) const;

  int num_attention_layers() const;
  int num_conv_layers() const;

  // Reads one stack section (`depth_decoder` or `codec`): hidden_size, num_layers, layer_types
  // ("conv" | "attention"), num_heads, num_kv_heads, head_dim, intermediate_size, conv_L_cache (required
  // when a conv layer exists), norm_eps, rope_theta, rope_style ("neox" only), window (null = bidirectional),
  // post_operator_norm / post_ffn_norm / attn_gate (optional lists), attn_gate_kind ("per_head" only).
  static Result<Lfm3StackConfig> FromJson(const nlohmann::json& j, const std::string& where);
};

struct Lfm3DepthConfig {
  Lfm3StackConfig stack;    // bidirectional (window 0), positions = codebook index
  float head_norm_eps = 0;  // `head_norm_eps`: the per-codebook embedding_norm before the tied logits

  static Result<Lfm3DepthConfig> FromJson(const nlohmann::json& j, const std::string& where);
};

// LiquidCodec's decoder: FSQ codes → latents → project_out → from_quantizer → ×frame_stack → stack →
// lin → ISTFT.
struct Lfm3CodecConfig {
  Lfm3StackConfig stack;        // causal window (30 in lfm3_tiny)
  int n_q = 0;                  // codebooks per frame (== n_codebooks)
  std::vector<int> fsq_levels;  // L_j, [8, 7, 6, 6]
  std::vector<int> fsq_basis;   // b_j = Π_{i<j} L_i, [1, 8, 56, 336]
  int quantizer_dim = 0;        // project_out rows (256)
  int frame_stack = 0;          // STFT rows per code frame (6)
  int n_fft = 0;                // 1280
  int hop = 0;                  // `hop_length`, 320
  int sample_rate = 0;          // `sampling_rate`, 24000
  int frame_samples = 0;        // frame_stack·hop (1920)

  int latent_dim() const { return n_q * static_cast<int>(fsq_levels.size()); }  // 48
  int spectrum_dim() const { return n_fft + 2; }                                // 1282: log|S| | phase
  // Codes the FSQ digits can express: [0, Π L_j).
  int num_codes() const;

  static Result<Lfm3CodecConfig> FromJson(const nlohmann::json& j, const std::string& where);
};

// The LFM3 backbone (LFM3-1.7B, spec/LFM3_AUDIO.md §2.1): token embedding, the LFM3 stack (conv
// kernel conv_L_cache, full causal and sliding-window attention layers, each kind with its own RoPE
// base, partial rotary on full-attention layers), the final norm and the text head. Read from the
// config's `lfm` section in the Hugging Face LFM2/LFM3 key names, every value required (the public facts
// do not settle defaults, so a missing key is an error naming it):
//   vocab_size, hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim,
//   intermediate_size (as stored: w1 rows), conv_L_cache, norm_eps, layer_types ("conv" |
//   "full_attention" | "sliding_attention"), sliding_window (when a sliding layer exists), rope_theta
//   (full-attention layers), rope_theta_swa (sliding layers; GGUF `rope.freq_base_swa`),
//   partial_rotary_factor (full-attention layers; sliding ones rotate the whole head), rope_style
//   ("neox"), tie_word_embeddings, max_position_embeddings, bos_token_id, eos_token_id;
// optional: post_operator_norm / post_ffn_norm / attn_gate lists (as the stack sections), attn_gate_kind.
// The key names rope_theta_swa and rope_style are lfmvox's (the HF names are not public).
struct Lfm3BackboneConfig {
  Lfm3StackConfig stack;  // causal, per-layer attention
  int vocab_size = 0;     // V, rows of `lfm.embed_tokens.weight`
  bool tie_word_embeddings = false;
  int max_positions = 0;  // `max_position_embeddings`: the longest context a session may ask for
  int bos_token_id = 0;
  int eos_token_id = 0;
  int sliding_window = 0;            // 0 when no layer slides
  double rope_theta_swa = 0;         // 0 when no layer slides
  double partial_rotary_factor = 0;  // share of each head rotated on full-attention layers

  static Result<Lfm3BackboneConfig> FromJson(const nlohmann::json& j, const std::string& where);
};

struct Lfm3Config {
  int n_codebooks = 0;       // 12
  int codebook_size = 0;     // 2017 (the last code is end-of-audio)
  int audio_eos = 0;         // 2016
  std::vector<int> maskgit;  // codebooks revealed per pass, [4, 4, 4]; sums to n_codebooks
  int text_hidden = 0;       // the backbone width `codebook_embedding` rows have
  // The interleaved turn's schedule (`interleaved_n_text`, `interleaved_n_audio` of LFM3-Audio's
  // config.json, spec §1.2: 6 and 12): text slots, then audio slots, alternating. 0 when the file does not
  // carry them (lfm3_tiny); a generation that needs them then fails naming the key.
  int interleaved_n_text = 0;
  int interleaved_n_audio = 0;
  Lfm3DepthConfig depth;
  Lfm3CodecConfig codec;
  // The `lfm` section; absent in speech-output-only files (lfm3_tiny), then has_backbone is false.
  bool has_backbone = false;
  Lfm3BackboneConfig backbone;

  static Result<Lfm3Config> FromJson(const nlohmann::json& j, const std::string& where);
  // Reads and validates the file at `path`; errors name the file.
  static Result<Lfm3Config> Load(const std::string& path);
};

}  // namespace lfmvox
