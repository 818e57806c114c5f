// Random Mimi decoder checkpoints under Kyutai's tensor names, for the fixture tests (a small one, fewer
// layers and narrower stages), the benchmark without the oracle (the real sizes) and the CLI's plumbing.
// Values follow the mimi_real recipe (oracle README): matrices and conv kernels N(0, 1/fan_in), biases
// 0.02·N, LayerNorm weight 1 + 0.1·N and bias 0.05·N, layer scales U(0.1, 0.6), embedding_sum N(0, 1),
// cluster_usage U(0.5, 4). Like Kyutai's released file, it also holds encoder-side tensors (a few, so a
// loader that reads them is caught) and more acoustic codebooks than a frame uses.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace lfmvox::tools {

struct MimiShape {
  // Defaults: the real decoder (get_mimi, 8 codebooks).
  int latent = 512;
  int codebook_dim = 256;
  int bins = 2048;
  int codebooks = 8;         // used per frame (config.json's num_codebooks)
  int stored_acoustic = 31;  // acoustic codebooks in the file (Kyutai: 31)
  int layers = 8;
  int heads = 8;
  int ffn = 2048;
  int context = 250;
  int n_filters = 64;
  std::vector<int> ratios = {8, 6, 5, 4};
  bool bf16 = false;  // Kyutai's file is f32; the oracle's bf16
  // kyutai: DIR/tokenizer-e351c8d8-checkpoint125.safetensors and no config (an LFM2-Audio-1.5B snapshot
  // carries that file; every size then comes from the tensors, so context and heads must be get_mimi's);
  // otherwise DIR/{config.json (flat, the oracle's layout), model.safetensors}.
  bool kyutai_layout = false;
  uint64_t seed = 1;

  // A small decoder: 2 layers of width 32 (2 heads), context 6 (the window cuts in at the 4th frame),
  // 4 codebooks of 64, SEANet ratios [3, 2] with 4 filters: 12 samples per frame.
  static MimiShape Tiny();
  // LFM2-Audio-1.5B's codes (8 codebooks of 2048) and frames (1920 samples) in Kyutai's layout, narrow
  // stages (one 64-wide layer, 2 SEANet filters): a small whole LFM2-Audio demo's codec.
  static MimiShape Lfm2Demo();
};

Status WriteRandomMimi(const std::string& dir, const MimiShape& shape);

}  // namespace lfmvox::tools
