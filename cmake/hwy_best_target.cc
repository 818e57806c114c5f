// Prints the best of the kernels' Highway targets (CMakeLists.txt) that this CPU runs, for
// LFMVOX_SIMD=native; EMU128 when it runs none of them.
#include <hwy/targets.h>

#include <cstdint>
#include <cstdio>

int main() {
  const int64_t supported = hwy::SupportedTargets();
  const int64_t ours[] = {
#ifdef LFMVOX_WANT_AVX3_DL
      HWY_AVX3_DL,
#endif
      HWY_AVX3, HWY_AVX2, HWY_SSE4};
  for (const int64_t t : ours) {
    if (supported & t) {
      std::printf("%s", hwy::TargetName(t));
      return 0;
    }
  }
  std::printf("EMU128");
  return 0;
}
