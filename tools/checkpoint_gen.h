// Random checkpoints in the real file layout, for benchmarks, tests and
// users without weights. Values follow the oracle's recipe (norm weights
// 1 + 0.1·N, biases 0.05·N, matrices N(0, 1/fan_in), embeddings N(0, 1)),
// rounded to bf16 as the released files store them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace lfmvox::tools {

struct DetokenizerShape {
  // Defaults: the real LFM2.5-Audio detokenizer (spec §1.3, §1.5).
  int hidden = 512;
  int layers = 8;  // conv, conv, sliding, conv, sliding, conv, sliding, conv, … repeating
  int heads = 16;
  int kv_heads = 8;
  int ffn = 2304;  // written as intermediate_size with block_auto_adjust_ff_dim false
  int window = 30;
  int vocab = 65536;  // the unused lfm.embed_tokens table the real file carries
  int codebooks = 8;
  int codebook_size = 2048;
  int n_fft = 1280;
  uint64_t seed = 1;
};

// Writes DIR/audio_detokenizer/{config.json, model.safetensors}.
Status WriteRandomDetokenizer(const std::string& dir, const DetokenizerShape& shape);

struct Lfm25AudioShape {
  // Defaults: the real LFM2.5-Audio-1.5B main model (spec §1.2, §1.4).
  int hidden = 2048;
  int layers = 16;
  std::vector<int> attention_layers = {2, 5, 8, 10, 12, 14};
  int heads = 32;
  int kv_heads = 8;
  int block_ff_dim = 12288;  // auto-adjusted: int(2·12288/3) rounded up to 256 → 8192
  int multiple_of = 256;
  int vocab = 65536;
  int codebooks = 8;
  int audio_vocab = 2049;  // 2048 codes + end-of-audio
  int depth_dim = 1024;
  int depth_layers = 6;
  int n_text = 6;
  int n_audio = 12;
  int enc_d = 512;  // FastConformer d_model
  int enc_layers = 17;
  int enc_heads = 8;
  int enc_channels = 256;  // subsampling_conv_channels
  uint64_t seed = 1;

  // A small model for demos and quick runs (vocab large enough for the
  // repository's tokenizer fixture).
  static Lfm25AudioShape Demo();
};

// Writes DIR/{config.json, model.safetensors} (main model only; the
// tokenizer and audio_detokenizer/ are separate). Values are uniform with
// the recipe's standard deviations, which keeps multi-gigabyte generation fast.
Status WriteRandomLfm25Audio(const std::string& dir, const Lfm25AudioShape& shape);

// The benchmarks' model: a real-size LFM2.5-Audio snapshot (main model,
// detokenizer, `tokenizer` copied in) in `dir`, written once and reused.
Status EnsureRealSizeModel(const std::string& dir, const std::string& tokenizer);

}  // namespace lfmvox::tools
