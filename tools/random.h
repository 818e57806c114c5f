// Seeded random draws for the checkpoint generators: SplitMix64 (the engine's Rng, blocks/sampling.h) with
// Box–Muller normals. Fast, and the same on every platform, so a seed names a checkpoint.
#pragma once

#include <cmath>
#include <cstdint>

#include "blocks/sampling.h"

namespace lfmvox::tools {

class NormalRng {
 public:
  explicit NormalRng(uint64_t seed) : rng_(seed) {}
  uint64_t Next() { return rng_.NextU64(); }
  // In (0, 1) on a 2^-53 grid, never 0 (Box–Muller takes its log).
  double Uniform() { return (static_cast<double>(Next() >> 11) + 0.5) * 0x1.0p-53; }
  float Normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double r = std::sqrt(-2.0 * std::log(Uniform())), t = 2.0 * M_PI * Uniform();
    spare_ = static_cast<float>(r * std::sin(t));
    has_spare_ = true;
    return static_cast<float>(r * std::cos(t));
  }

 private:
  Rng rng_;
  float spare_ = 0;
  bool has_spare_ = false;
};

}  // namespace lfmvox::tools
