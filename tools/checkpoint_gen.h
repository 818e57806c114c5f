// Random checkpoints in the real file layout, for benchmarks, tests and
// users without weights. Values follow the oracle's recipe (norm weights
// 1 + 0.1·N, biases 0.05·N, matrices N(0, 1/fan_in), embeddings N(0, 1)),
// rounded to bf16 as the released files store them.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace lfmvox::tools {

struct DetokenizerShape {
  // Defaults: the real LFM2.5-Audio detokenizer (spec §1.3, §1.5).
  int hidden = 512;
  int layers = 8;          // conv, conv, sliding, conv, sliding, conv, sliding, conv, … repeating
  int heads = 16;
  int kv_heads = 8;
  int ffn = 2304;          // written as intermediate_size with block_auto_adjust_ff_dim false
  int window = 30;
  int vocab = 65536;       // the unused lfm.embed_tokens table the real file carries
  int codebooks = 8;
  int codebook_size = 2048;
  int n_fft = 1280;
  uint64_t seed = 1;
};

// Writes DIR/audio_detokenizer/{config.json, model.safetensors}.
Status WriteRandomDetokenizer(const std::string& dir, const DetokenizerShape& shape);

}  // namespace lfmvox::tools
