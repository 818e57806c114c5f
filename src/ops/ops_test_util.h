// Shared by the kernel tests: run a body on every compiled SIMD target,
// misaligned buffers, seeded random data.
#pragma once

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/aligned.h"
#include "ops/ops.h"

namespace lfmvox::ops::testing {

// Runs body() once per compiled target that this CPU supports, with dispatch
// forced to it, then restores normal dispatch.
template <class F>
void ForEachTarget(F body) {
  const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  ASSERT_FALSE(targets.empty());
  for (int64_t t : targets) {
    hwy::SetSupportedTargetsForTest(t);
    SCOPED_TRACE(std::string("target ") + hwy::TargetName(t));
    EXPECT_STREQ(ChosenTarget(), hwy::TargetName(t));
    body();
  }
  hwy::SetSupportedTargetsForTest(0);
}

// n elements starting `off` elements past a 64-byte boundary (misalignment).
template <typename T>
struct Buf {
  Buf(size_t n, size_t off) : mem(n + off + 16), p(mem.data() + off), n(n) {}
  T* begin() { return p; }
  T* end() { return p + n; }
  T& operator[](size_t i) { return p[i]; }
  AlignedBuffer<T> mem;
  T* p;
  size_t n;
};

class Rng {
 public:
  explicit Rng(uint32_t seed) : g_(seed) {}
  float Normal(float sd = 1.0f) { return std::normal_distribution<float>(0.0f, sd)(g_); }
  // Small integers: sums of products stay exact in f32.
  float SmallInt(int lim = 4) {
    return static_cast<float>(std::uniform_int_distribution<int>(-lim, lim)(g_));
  }
  size_t Index(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(g_); }
  template <typename It>
  void FillNormal(It b, It e, float sd = 1.0f) {
    for (; b != e; ++b) *b = Normal(sd);
  }
  template <typename It>
  void FillInt(It b, It e, int lim = 4) {
    for (; b != e; ++b) *b = SmallInt(lim);
  }
  template <typename It>
  void Fill(It b, It e, bool integers) {
    integers ? FillInt(b, e) : FillNormal(b, e);
  }

 private:
  std::mt19937 g_;
};

inline bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

}  // namespace lfmvox::ops::testing
