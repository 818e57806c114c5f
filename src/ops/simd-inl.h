// Helpers shared by the SIMD translation units of src/ops (the MatMul format
// TUs and elementwise.cc). Like every Highway -inl header it is included once
// per target, after hwy/foreach_target.h and hwy/highway.h.
//
// Remainders (sizes not a multiple of the vector length) go through a small
// zero-padded stack buffer instead of a masked load: rows of mmap'd weights
// may end at the end of the mapping, so no kernel reads past its last element.

// Per-target include guard.
#if defined(LFMVOX_OPS_SIMD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef LFMVOX_OPS_SIMD_INL_H_
#undef LFMVOX_OPS_SIMD_INL_H_
#else
#define LFMVOX_OPS_SIMD_INL_H_
#endif

#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <cstddef>
#include <cstring>

HWY_BEFORE_NAMESPACE();
namespace lfmvox::ops {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// Upper bound of Lanes(DF) on every x86 target (64-byte AVX-512 vectors), for
// the stack buffers of the remainder path. Arrays of vectors are fine for the
// same reason: x86 vectors are sized types.
constexpr size_t kMaxLanes = 16;
static_assert(HWY_MAX_BYTES / sizeof(float) <= kMaxLanes);

// Lanes [0, count) from p, the rest `pad`; reads nothing beyond p + count.
HWY_INLINE VF LoadTail(DF df, const float* HWY_RESTRICT p, size_t count, float pad = 0.0f) {
  HWY_ALIGN float buf[kMaxLanes];
  for (size_t i = 0; i < kMaxLanes; ++i) buf[i] = i < count ? p[i] : pad;
  return hn::Load(df, buf);
}

// Writes lanes [0, count) of v to p and nothing else.
HWY_INLINE void StoreTail(VF v, DF df, float* HWY_RESTRICT p, size_t count) {
  HWY_ALIGN float buf[kMaxLanes];
  hn::Store(v, df, buf);
  std::memcpy(p, buf, count * sizeof(float));
}

HWY_INLINE float Sum(DF df, VF v) { return hn::GetLane(hn::SumOfLanes(df, v)); }

// Prefetches p's line into L2 where the target has such a hint (x86 `prefetcht1`: on Zen 4 and Intel
// it fills L2 and not L1, on Zen 5 L1 as well), else as hwy::Prefetch. Never faults.
HWY_INLINE void PrefetchL2(const void* p) {
#if HWY_ARCH_X86
  _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T1);
#else
  hwy::Prefetch(p);
#endif
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace lfmvox::ops
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
