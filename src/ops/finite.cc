// The finiteness scans of ops.h (FindNonFinite, FindNanOrPosInf), compiled
// once per Highway target like elementwise.cc. A float is non-finite when its
// exponent bits are all ones (NaN or ±inf), so the plain formats are scanned as
// integers: no float arithmetic, no signalling-NaN traps, the same test for
// F32, BF16 and F16. Block formats have integer codes (always finite) and f16
// scales, one per block, which are read one by one (the scan is bound by
// memory, not by these few loads).
#include <cstring>
#include <limits>

#include "ops/ops.h"
#include "tensor/quant.h"

// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/finite.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
// clang-format on

#include "ops/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace lfmvox::ops {
namespace HWY_NAMESPACE {

// The first i < n with (p[i] & mask) == mask, or n. Four vectors per test of
// the common (all finite) case; a hit is then located vector by vector.
template <typename T>
HWY_INLINE size_t FirstAllOnes(const T* HWY_RESTRICT p, size_t n, T mask) {
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  const auto vm = hn::Set(d, mask);
  auto hit = [&](size_t i) { return hn::Eq(hn::And(hn::LoadU(d, p + i), vm), vm); };
  size_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    const auto m = hn::Or(hn::Or(hit(i), hit(i + N)), hn::Or(hit(i + 2 * N), hit(i + 3 * N)));
    if (!hn::AllFalse(d, m)) break;
  }
  for (; i + N <= n; i += N) {
    const intptr_t pos = hn::FindFirstTrue(d, hit(i));
    if (pos >= 0) return i + static_cast<size_t>(pos);
  }
  for (; i < n; ++i) {
    T v;
    std::memcpy(&v, p + i, sizeof(T));
    if ((v & mask) == mask) return i;
  }
  return n;
}

size_t FindBits32Impl(const uint32_t* p, size_t n, uint32_t mask) { return FirstAllOnes(p, n, mask); }
size_t FindBits16Impl(const uint16_t* p, size_t n, uint16_t mask) { return FirstAllOnes(p, n, mask); }

// NaN and +inf fail `x < +inf`; -inf (a masked logit) passes.
size_t FindNanOrPosInfImpl(const float* x, size_t n) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const VF inf = hn::Set(df, std::numeric_limits<float>::infinity());
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const intptr_t pos = hn::FindFirstTrue(df, hn::Not(hn::Lt(hn::LoadU(df, x + i), inf)));
    if (pos >= 0) return i + static_cast<size_t>(pos);
  }
  if (i < n) {
    const intptr_t pos = hn::FindFirstTrue(df, hn::Not(hn::Lt(LoadTail(df, x + i, n - i), inf)));
    if (pos >= 0) return i + static_cast<size_t>(pos);
  }
  return n;
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace lfmvox::ops
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace lfmvox::ops {

HWY_EXPORT(FindBits32Impl);
HWY_EXPORT(FindBits16Impl);
HWY_EXPORT(FindNanOrPosInfImpl);

namespace {

// The first block of `n` weights (blocks of `elems` in `bytes` bytes, the f16
// scale at byte `d_at`) whose scale is NaN or ±inf, as the index of its first weight.
size_t FirstBadBlock(const uint8_t* p, size_t n, size_t elems, size_t bytes, size_t d_at) {
  for (size_t b = 0; b < n / elems; ++b) {
    uint16_t d;
    std::memcpy(&d, p + b * bytes + d_at, 2);
    if ((d & 0x7c00u) == 0x7c00u) return b * elems;
  }
  return n;
}

}  // namespace

size_t FindNonFinite(DType t, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  switch (t) {
    case DType::kF32:
      return HWY_DYNAMIC_DISPATCH(FindBits32Impl)(static_cast<const uint32_t*>(data), n, 0x7f800000u);
    case DType::kBF16:
      return HWY_DYNAMIC_DISPATCH(FindBits16Impl)(static_cast<const uint16_t*>(data), n, uint16_t{0x7f80});
    case DType::kF16:
      return HWY_DYNAMIC_DISPATCH(FindBits16Impl)(static_cast<const uint16_t*>(data), n, uint16_t{0x7c00});
    case DType::kF64:
      for (size_t i = 0; i < n; ++i) {
        uint64_t v;
        std::memcpy(&v, p + i * 8, 8);
        if ((v & 0x7ff0000000000000ull) == 0x7ff0000000000000ull) return i;
      }
      return n;
    case DType::kQ8_0:
      return FirstBadBlock(p, n, 32, kQ8_0BlockBytes, 0);
    case DType::kQ4_0:
      return FirstBadBlock(p, n, 32, kQ4_0BlockBytes, 0);
    case DType::kQ6_K:
      return FirstBadBlock(p, n, 256, kQ6_KBlockBytes, kQ6_KD);
    default:
      return n;  // integer and boolean types: every value is finite
  }
}

size_t FindNanOrPosInf(const float* x, size_t n) { return HWY_DYNAMIC_DISPATCH(FindNanOrPosInfImpl)(x, n); }

}  // namespace lfmvox::ops
#endif  // HWY_ONCE
