// PackedMatMul: Y = X·Wᵀ for a PackedWeight (ops.h), in outer-product form.
// A tile of up to kRows X rows × P panels of 16 W rows keeps rows·P·16 sums in
// registers; each step q broadcasts one X value per row and multiplies it into
// each panel's 16 weights of step q, so no sum is ever split or reduced across
// lanes (each output's sum is sequential in q, whatever the tile). With one
// vector a panel (AVX-512), P > 1 (PanelsForRows) gives enough independent FMA
// chains: the Mimi transformer's m = 2 layers went 0.78 → 0.39 ms on one core
// of this Xeon, the Mimi frame 10.6 → 6.2-7.1 ms. More rows (m > 6) take
// tiles of 24 sums (8 × 3 or 6 × 4 panels, TileShape). Up to kDirectRows
// rows read bf16 panels straight into registers, all of k at once; more rows
// go by blocks of up to kBlockRows X rows and block_k steps, in which a
// panel's weights are widened once to f32 into an L1-resident stack buffer
// and reused by every tile of the block; between k blocks the partial sums
// wait in Y (exact f32 stores and reloads), so no block size changes a bit.
// Compiled once per Highway target.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/packed_matmul.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
// clang-format on
#include <hwy/cache_control.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ops/ops.h"
#include "ops/simd-inl.h"
#include "tensor/dtype.h"
#include "tensor/quant.h"
#include "threading/thread_team.h"

HWY_BEFORE_NAMESPACE();
namespace lfmvox::ops {
namespace HWY_NAMESPACE {

constexpr size_t kRows = 6;  // X rows per tile: 6 × 2 AVX2 accumulators + 2 weights + 1 x of 16

constexpr size_t kP = kPackedPanel;

using DP = hn::CappedTag<float, kP>;
using VP = hn::Vec<DP>;
constexpr size_t kLanes = hn::MaxLanes(DP());
constexpr size_t kVecs = kP / kLanes;
static_assert(kP % kLanes == 0);
// Steps per block × panels per tile (the block's widened f32 weights, in L1: 32 KiB on AVX-512, 16 on
// AVX2): 128 steps of 4 panels, 256 of 2. (A fixed 128 cost Mimi's k = 192, 2-panel conv 7 %.)
constexpr size_t kBlockPanelSteps = kVecs == 1 ? 512 : 256;
// X rows per block: on AVX-512 (this Xeon: L2 2 MiB) up to 768 KiB of dense X at 256 steps (a
// convolution's overlapping rows far less); 768 against 192 (bench_mimi_kernels, Mimi's m ≥ 384 convs, 3
// interleaved runs): 3-10 % faster (fewer widenings of each panel block), 1536 slower again. AVX2 (Zen 3:
// L2 512 KiB) keeps 192.
constexpr size_t kBlockRows = kVecs == 1 ? 768 : 192;

// The vector v of a panel row (16 floats at p), of which only `cols` are Y's.
HWY_INLINE VP LoadCols(DP d, const float* p, size_t v, size_t cols) {
  const size_t c0 = v * kLanes;
  if (c0 + kLanes <= cols) return hn::LoadU(d, p + c0);
  HWY_ALIGN float buf[kP] = {};
  for (size_t c = c0; c < cols; ++c) buf[c - c0] = p[c];
  return hn::Load(d, buf);
}
HWY_INLINE void StoreCols(VP x, DP d, float* p, size_t v, size_t cols) {
  const size_t c0 = v * kLanes;
  if (c0 + kLanes <= cols) return hn::StoreU(x, d, p + c0);
  if (c0 >= cols) return;
  HWY_ALIGN float buf[kP];
  hn::Store(x, d, buf);
  std::memcpy(p + c0, buf, (cols - c0) * sizeof(float));
}

// Panel element loaders: f32 as stored, bf16 widened exactly (a 16-bit shift).
// kPrefetch: the tiles read these panels from memory (bf16, straight into registers) rather than from a
// widened L1 block, so they prefetch ahead of the loads (PanelTile).
struct F32Panel {
  using T = float;
  static constexpr bool kPrefetch = false;
  static VP Load(DP d, const float* p) { return hn::Load(d, p); }
};
struct Bf16Panel {
  using T = uint16_t;
  static constexpr bool kPrefetch = true;
  static VP Load(DP d, const uint16_t* p) {
    const hn::Rebind<uint16_t, DP> du16;
    const hn::RebindToUnsigned<DP> du32;
    return hn::BitCast(d, hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, p))));
  }
};

// Panels per tile: a tile of R rows × P panels keeps R·P·kVecs sums in flight.
// With one vector a panel (AVX-512) a single panel gave R independent FMA
// chains (2 at the Mimi transformer's m = 2), FMA latency rather than the
// ports the limit; P panels give R·P chains, each output still its own
// sequential sum. AVX2 (two vectors a panel, 16 registers) keeps one panel.
constexpr size_t PanelsForRows(size_t r) {
  if (kVecs != 1) return 1;
  return r == 1 ? 8 : r == 2 ? 6 : r == 3 ? 4 : r == 4 ? 3 : 2;  // 8-12 sums, ≤ 19 registers
}

// Panels read from memory (bf16, cold: the Mimi decoder reads 80 MB of weights a call) are prefetched
// kPrefetchSteps steps (2 KiB of each panel) ahead, one line per kStepsPerLine steps; the hardware
// prefetcher alone left loads and FMAs taking turns. Prefetch never faults, so looking past the end
// of W is harmless.
constexpr size_t kPrefetchSteps = 64;
constexpr size_t kStepsPerLine = 64 / (kP * sizeof(uint16_t));

// Y rows [0, R) × panels [0, P) (panel pp's weights at wb + pp·stride, the
// first `cols` columns Y's, counted from panel 0) from X rows (kc steps at x):
// sums start at the bias (or 0) when `first`, else at what Y holds.
template <size_t R, size_t P, class Fmt>
HWY_NOINLINE void PanelTile(const float* HWY_RESTRICT x, size_t ldx, const typename Fmt::T* HWY_RESTRICT wb,
                            size_t stride, size_t kc, const float* bias, bool first, float* HWY_RESTRICT y,
                            size_t ldy, size_t cols) {
  const DP d;
  VP acc[R][P][kVecs];
  for (size_t r = 0; r < R; ++r) {
    for (size_t pp = 0; pp < P; ++pp) {
      const size_t pc = cols > pp * kP ? cols - pp * kP : 0;
      for (size_t v = 0; v < kVecs; ++v) {
        acc[r][pp][v] = first ? (bias ? LoadCols(d, bias + pp * kP, v, pc) : hn::Zero(d))
                              : LoadCols(d, y + r * ldy + pp * kP, v, pc);
      }
    }
  }
  for (size_t q = 0; q < kc; ++q) {
    if constexpr (Fmt::kPrefetch) {
      if (q % kStepsPerLine == 0) {
        for (size_t pp = 0; pp < P; ++pp) hwy::Prefetch(wb + pp * stride + (q + kPrefetchSteps) * kP);
      }
    }
    VP w[P][kVecs];
    HWY_UNROLL(8)
    for (size_t pp = 0; pp < P; ++pp) {
      HWY_UNROLL(4)
      for (size_t v = 0; v < kVecs; ++v) w[pp][v] = Fmt::Load(d, wb + pp * stride + q * kP + v * kLanes);
    }
    HWY_UNROLL(16)
    for (size_t r = 0; r < R; ++r) {
      const VP xv = hn::Set(d, x[r * ldx + q]);
      HWY_UNROLL(8)
      for (size_t pp = 0; pp < P; ++pp) {
        HWY_UNROLL(4)
        for (size_t v = 0; v < kVecs; ++v) acc[r][pp][v] = hn::MulAdd(xv, w[pp][v], acc[r][pp][v]);
      }
    }
  }
  for (size_t r = 0; r < R; ++r) {
    for (size_t pp = 0; pp < P; ++pp) {
      const size_t pc = cols > pp * kP ? cols - pp * kP : 0;
      for (size_t v = 0; v < kVecs; ++v) StoreCols(acc[r][pp][v], d, y + r * ldy + pp * kP, v, pc);
    }
  }
}

// The arguments of one tile call.
template <class Fmt>
struct TileArgs {
  const float* x;
  size_t ldx;
  const typename Fmt::T* wb;
  size_t stride, kc;
  const float* bias;
  bool first;
  float* y;
  size_t ldy, cols;
};
// PanelTile<rows, P> for a run-time rows in [R, MaxR].
template <class Fmt, size_t P, size_t MaxR, size_t R = 1>
HWY_INLINE void TileOfRows(size_t rows, const TileArgs<Fmt>& a) {
  if constexpr (R <= MaxR) {
    if (rows == R)
      return PanelTile<R, P, Fmt>(a.x, a.ldx, a.wb, a.stride, a.kc, a.bias, a.first, a.y, a.ldy, a.cols);
    TileOfRows<Fmt, P, MaxR, R + 1>(rows, a);
  }
}

// Small m (≤ kRows): one tile of all the rows, PanelsForRows(m) panels (single leftovers one panel).
template <class Fmt, size_t R = 1>
HWY_INLINE void SmallTile(size_t rows, size_t panels, const TileArgs<Fmt>& a) {
  if constexpr (R <= kRows) {
    if (rows == R) {
      constexpr size_t kP2 = PanelsForRows(R);
      if (panels == kP2) return TileOfRows<Fmt, kP2, R, R>(R, a);
      return TileOfRows<Fmt, 1, R, R>(R, a);
    }
    SmallTile<Fmt, R + 1>(rows, panels, a);
  }
}

// Large m (> kRows): tiles of up to kTileRows[P] rows × P panels. AVX-512 (one
// vector a panel, 32 registers): 24 sums, P weight vectors and one broadcast
// X value live in registers, 8 × 3, 6 × 4, 12 × 2 or 16 × 1, whichever suits
// m and the panel count (TileShape); a step loads P weight vectors and R X
// values for R·P FMAs. (6 × 2, the first version, gave 12 chains and loaded
// 8 values per 12 FMAs.) AVX2 (two vectors a panel, 16 registers): 6 × 1.
constexpr size_t kMaxP = kVecs == 1 ? 4 : 1;
constexpr size_t kTileRows[] = {0, kVecs == 1 ? 16 : kRows, 12, 8, 6};

template <class Fmt>
HWY_INLINE void LargeTile(size_t rows, size_t panels, const TileArgs<Fmt>& a) {
  if constexpr (kMaxP >= 4) {
    if (panels == 4) return TileOfRows<Fmt, 4, kTileRows[4]>(rows, a);
    if (panels == 3) return TileOfRows<Fmt, 3, kTileRows[3]>(rows, a);
    if (panels == 2) return TileOfRows<Fmt, 2, kTileRows[2]>(rows, a);
  }
  TileOfRows<Fmt, 1, kTileRows[1]>(rows, a);
}

// The panels a large-m tile takes (its rows kTileRows[P]), measured on one
// core of this Xeon (bench_mimi_kernels, the Mimi decoder's shapes, bf16 W):
// 8 × 3 where the tiles widen bf16 in registers (m ≤ kDirectRows: 3 widened
// vectors per 24 FMAs; m = 8: 94-101 → 160-176 GFLOP/s, 6 × 4 140-145, 8 × 1
// 82-94, the first version's 6 × 2 with a widened block 82-101), else 6 × 4
// where the panels come in fours (every SEANet product: 170-192 GFLOP/s,
// 8 × 3 within 3 %, 6 × 2 within 5 %), else 8 × 3.
inline size_t TileShape(size_t np, bool widens) {
  if (kMaxP < 4) return 1;
  return (!widens && np % 4 == 0) ? 4 : 3;
}

// bf16 panels are widened to f32 once per block (block_k steps × the tile's
// panels, ≤ 32 KiB) when more than this many X rows then read them; up to
// it, the tiles widen in registers and take all of k at once (Mimi's m = 64
// convolutions, cold W, best / median µs, widened → in registers: model.5
// 1490-1590 / 1625-1664 → 1340-1372 / 1430-1465, model.3 within ±3 %).
constexpr size_t kDirectRows = kVecs == 1 ? 64 : kRows;

void PackedMatMulImpl(const float* x, size_t m, size_t ldx, const PackedWeight& w, const float* bias,
                      float* y, size_t ldy, ThreadTeam& team) {
  if (m == 0 || w.rows == 0) return;
  const size_t n = w.rows, k = w.cols;
  const bool bf16 = w.format == WeightFormat::kBF16;
  const bool small = m <= kRows;
  const bool widen = bf16 && m > kDirectRows;
  // Tiles widening in registers (bf16 up to kDirectRows rows) need no k blocks.
  // Panels a tile takes: all of them alike, so that a share of panels splits
  // into groups of `group` and one smaller leftover group the same way for
  // every tile.
  const size_t group = small ? PanelsForRows(m) : TileShape(w.panels(), bf16 && !widen);
  const size_t block_k = kBlockPanelSteps / std::min(group, w.panels());
  const size_t step = (small || (bf16 && !widen)) ? std::max<size_t>(k, 1) : block_k;
  const size_t tile_rows = small ? kRows : kTileRows[group];
  team.ParallelFor(w.panels(), 1, [&](size_t p0, size_t p1) {
    HWY_ALIGN float wb[kBlockPanelSteps * kP];
    for (size_t i0 = 0; i0 < m; i0 += kBlockRows) {
      const size_t i1 = std::min(m, i0 + kBlockRows);
      for (size_t kb = 0; kb == 0 || kb < k; kb += step) {  // k = 0: one empty block writes the bias
        const size_t kc = std::min(step, k - kb);
        for (size_t p = p0; p < p1;) {
          const size_t panels = small ? (p + group <= p1 ? group : 1) : std::min(group, p1 - p);
          const size_t cols = std::min(panels * kP, n - p * kP), at = (p * k + kb) * kP;
          const float* b = bias ? bias + p * kP : nullptr;
          auto tiles = [&](auto fmt, const auto* blk, size_t stride) {
            using Fmt = decltype(fmt);
            for (size_t i = i0; i < i1; i += tile_rows) {
              const size_t rows = std::min(tile_rows, i1 - i);
              const TileArgs<Fmt> a{x + i * ldx + kb,     ldx, blk, stride, kc, b, kb == 0,
                                    y + i * ldy + p * kP, ldy, cols};
              if (small) {
                SmallTile<Fmt>(rows, panels, a);
              } else {
                LargeTile<Fmt>(rows, panels, a);
              }
            }
          };
          if (!bf16) {
            tiles(F32Panel(), reinterpret_cast<const float*>(w.data.data()) + at, k * kP);
          } else if (!widen) {
            tiles(Bf16Panel(), reinterpret_cast<const uint16_t*>(w.data.data()) + at, k * kP);
          } else {  // widen once for all the block's tiles
            for (size_t pp = 0; pp < panels; ++pp) {
              const uint16_t* src = reinterpret_cast<const uint16_t*>(w.data.data()) + at + pp * k * kP;
              for (size_t e = 0; e < kc * kP; e += kLanes) {
                if (e % (kStepsPerLine * kP) == 0) hwy::Prefetch(src + e + kPrefetchSteps * kP);
                hn::Store(Bf16Panel::Load(DP(), src + e), DP(), wb + pp * block_k * kP + e);
              }
            }
            tiles(F32Panel(), static_cast<const float*>(wb), block_k * kP);
          }
          p += panels;
        }
      }
    }
  });
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace lfmvox::ops
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace lfmvox::ops {
HWY_EXPORT(PackedMatMulImpl);

void PackedMatMul(const float* x, size_t m, size_t ldx, const PackedWeight& w, const float* bias, float* y,
                  size_t ldy, ThreadTeam& team) {
  HWY_DYNAMIC_DISPATCH(PackedMatMulImpl)(x, m, ldx, w, bias, y, ldy, team);
}

PackedWeight PackWeight(const Weight& w) {
  PackedWeight p;
  p.rows = w.rows;
  p.cols = w.cols;
  const size_t k = w.cols, panel = k * kPackedPanel;
  p.format = w.format == WeightFormat::kBF16 ? WeightFormat::kBF16 : WeightFormat::kF32;
  if (panel == 0 || w.rows == 0) return p;  // no elements: no buffer to place columns in
  if (w.format == WeightFormat::kBF16) {
    p.data.Reset(p.panels() * panel * sizeof(uint16_t));
    auto* dst = reinterpret_cast<uint16_t*>(p.data.data());
    for (size_t j = 0; j < w.rows; ++j) {
      const auto* src = reinterpret_cast<const uint16_t*>(w.row(j));
      uint16_t* col = dst + j / kPackedPanel * panel + j % kPackedPanel;
      for (size_t q = 0; q < k; ++q) col[q * kPackedPanel] = src[q];
    }
    return p;
  }
  p.data.Reset(p.panels() * panel * sizeof(float));
  auto* dst = reinterpret_cast<float*>(p.data.data());
  std::vector<float> row(k);
  std::vector<uint8_t> blocks(FormatRowBytes(w.format, k));  // a repacked row as the file's blocks
  for (size_t j = 0; j < w.rows; ++j) {
    DequantizeRow(w.format, RowAsBlocks(w, j, blocks.data()), k, row.data());
    float* col = dst + j / kPackedPanel * panel + j % kPackedPanel;
    for (size_t q = 0; q < k; ++q) col[q * kPackedPanel] = row[q];
  }
  return p;
}

}  // namespace lfmvox::ops
#endif  // HWY_ONCE
