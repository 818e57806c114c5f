// MatMul for BF16 W in WeightLayout::kTiles (tensor/matrix.h) with Intel AMX
// (TDPBF16PS: a 16 × 16 f32 tile += a 16 × 32 bf16 tile times a 32 × 16 one).
//
// X is split exactly into three bf16 parts, hi = x with its low 16 bits
// cleared, mid = the same of x − hi, lo = x − hi − mid (each takes the next
// ≤ 8 significant bits of x's 24, so hi + mid + lo = x for every x with
// |x| ≥ 2^-102, and every bf16 × bf16 product is exact in f32): the only
// error left is f32 accumulation, inside the unit in its own order. Per
// chunk of 32 columns, each accumulator tile takes the hi, then the mid, then
// the lo part; X rows go in blocks of 16, each computed the same way wherever
// it sits (the last block's tiles configured with its rows only), so a Y
// element depends only on its X row, its W row and the bias.
//
// A group of up to 64 W rows (4 accumulator tiles) runs every 16-row X block
// in turn: its tiles stream from memory once, then from L2. Tile registers:
// 0-3 accumulators, 4-6 the X block's hi / mid / lo at this chunk, 7 the W
// tile. Where AMX is missing or not granted, the same view is unpacked and
// takes the BF16 engine (its contract, its bits).
#include <algorithm>
#include <atomic>
#include <cstring>

#include "ops/matmul_kernels.h"
#include "ops/ops.h"
#include "tensor/quant.h"
#include "threading/thread_team.h"

#if defined(__x86_64__) && defined(__linux__) && (defined(__GNUC__) || defined(__clang__))
#define LFMVOX_HAVE_AMX 1
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#if !defined(__clang__)
// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized on their own "undefined" operands once inlined.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#else
#define LFMVOX_HAVE_AMX 0
#endif

namespace lfmvox::ops {

namespace {

// The layout's geometry (tensor/quant.h); 16 rows and 32 bf16 columns are also AMX's tile limits.
constexpr size_t kTileRows = kTilesTileRows, kTileCols = kTilesTileCols, kGroupTiles = kTilesGroupTiles;
constexpr size_t kTileElems = kTileRows * kTileCols;
static_assert(kTileRows == 16 && kTileCols * sizeof(uint16_t) == 64, "an AMX tile is 16 rows of 64 bytes");
static_assert(kGroupTiles == 4, "GroupBlock holds a group in accumulator tiles 0-3");
constexpr size_t kParts = 3;

std::atomic<bool> amx_off_for_test{false};

}  // namespace

// CPUID leaf 7: EBX bit 16 AVX512F, bit 30 AVX512BW; EDX bit 22 AMX-BF16, bit 24 AMX-TILE, bit 25
// AMX-INT8 (read directly: Clang 14's __builtin_cpu_supports knows no AMX). The tile state is asked of
// the kernel once (Linux: arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)).
internal::AmxUnits internal::AmxGranted() {
#if LFMVOX_HAVE_AMX
  static const AmxUnits granted = [] {
    AmxUnits none;
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return none;
    const bool avx512 = (b >> 16 & 1) && (b >> 30 & 1), tile = d >> 24 & 1;
    __builtin_cpu_init();
    if (!avx512 || !tile || !__builtin_cpu_supports("avx512bw")) return none;  // the OS's half of AVX-512
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) return none;
    return AmxUnits{(d >> 22 & 1) != 0, (d >> 25 & 1) != 0};
  }();
  return granted;
#else
  return {};
#endif
}

namespace {

bool UseAmx() { return !amx_off_for_test.load(std::memory_order_relaxed) && internal::AmxGranted().bf16; }

#if LFMVOX_HAVE_AMX

// The top 16 bits of each of 16 f32 lanes.
__attribute__((target("avx512f,avx512bw"))) inline __m256i Top16(__m512 v) {
  return _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(v), 16));
}

// X [m, k] split into its three parts, as AMX's first operand: block b of 16
// rows, chunk q, part p is the tile at ((b·KC + q)·3 + p)·512, row i of it
// the 32 values of X row 16b + i at columns 32q.. (zero past k; the last
// block's tiles have only its rows). A non-finite x gives NaN parts.
__attribute__((target("avx512f,avx512bw"))) void SplitX(const float* x, size_t m, size_t ldx, size_t k,
                                                        size_t kc, uint16_t* xp) {
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  for (size_t i = 0; i < m; ++i) {
    uint16_t* row = xp + i / kTileRows * kc * kParts * kTileElems + i % kTileRows * kTileCols;
    for (size_t q = 0; q < kc; ++q) {
      uint16_t* at = row + q * kParts * kTileElems;
      for (size_t h = 0; h < 2; ++h) {
        const size_t c = kTileCols * q + 16 * h;
        const size_t left = c < k ? std::min<size_t>(16, k - c) : 0;
        const __mmask16 mask = static_cast<__mmask16>((uint32_t{1} << left) - 1);
        const __m512 v = _mm512_maskz_loadu_ps(mask, x + i * ldx + c);
        const __m512 hi = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v), high));
        const __m512 r = _mm512_sub_ps(v, hi);
        const __m512 mid = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(r), high));
        const __m512 lo = _mm512_sub_ps(r, mid);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(at + 16 * h), Top16(hi));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(at + kTileElems + 16 * h), Top16(mid));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(at + 2 * kTileElems + 16 * h), Top16(lo));
      }
    }
  }
}

// One X block against TG tiles of W rows over all kc chunks into c[TG][16 × 16].
template <int TG>
__attribute__((target("amx-tile,amx-bf16"))) inline void GroupBlock(const uint16_t* wg, size_t kc,
                                                                    const uint16_t* xb, float* c) {
  _tile_zero(0);
  if constexpr (TG > 1) _tile_zero(1);
  if constexpr (TG > 2) _tile_zero(2);
  if constexpr (TG > 3) _tile_zero(3);
  for (size_t q = 0; q < kc; ++q) {
    const uint16_t* a = xb + q * kParts * kTileElems;
    _tile_loadd(4, a, 64);
    _tile_loadd(5, a + kTileElems, 64);
    _tile_loadd(6, a + 2 * kTileElems, 64);
    const uint16_t* b = wg + q * TG * kTileElems;
#define LFMVOX_AMX_TILE(T)                \
  _tile_loadd(7, b + (T)*kTileElems, 64); \
  _tile_dpbf16ps(T, 4, 7);                \
  _tile_dpbf16ps(T, 5, 7);                \
  _tile_dpbf16ps(T, 6, 7);
    LFMVOX_AMX_TILE(0)
    if constexpr (TG > 1) {
      LFMVOX_AMX_TILE(1)
    }
    if constexpr (TG > 2) {
      LFMVOX_AMX_TILE(2)
    }
    if constexpr (TG > 3) {
      LFMVOX_AMX_TILE(3)
    }
#undef LFMVOX_AMX_TILE
  }
  _tile_stored(0, c, 64);
  if constexpr (TG > 1) _tile_stored(1, c + 256, 64);
  if constexpr (TG > 2) _tile_stored(2, c + 512, 64);
  if constexpr (TG > 3) _tile_stored(3, c + 768, 64);
}

// The X tiles (4-6) and accumulators (0-3) with `rows` rows, W's (7) with 16 (its 32 columns as 16 pairs).
__attribute__((target("amx-tile"))) void ConfigureBf16Tiles(size_t rows) {
  internal::AmxTileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.rows[t] = static_cast<uint8_t>(t == 7 ? kTileRows : rows);
    cfg.colsb[t] = 64;
  }
  _tile_loadconfig(&cfg);
}

// Groups [g0, g1) of W against every X block; Y = tiles (+ bias).
__attribute__((target("amx-tile,amx-bf16,avx512f"))) void Groups(const MatrixView& w, size_t kc,
                                                                 const uint16_t* xp, size_t m,
                                                                 const float* bias, float* y, size_t ldy,
                                                                 size_t g0, size_t g1) {
  // Each block's tiles have as many rows as it has X rows: the unit's time goes with them.
  alignas(64) float c[kGroupTiles * 256];
  const auto* wt = static_cast<const uint16_t*>(w.data);
  const size_t tiles = (w.rows + kTileRows - 1) / kTileRows, blocks = (m + kTileRows - 1) / kTileRows;
  size_t configured = 0;
  for (size_t g = g0; g < g1; ++g) {
    const size_t tg = std::min(kGroupTiles, tiles - kGroupTiles * g);
    const uint16_t* wg = wt + g * kGroupTiles * kc * kTileElems;
    for (size_t b = 0; b < blocks; ++b) {
      const size_t rows = std::min(kTileRows, m - kTileRows * b);
      if (rows != configured) ConfigureBf16Tiles(configured = rows);
      const uint16_t* xb = xp + b * kc * kParts * kTileElems;
      switch (tg) {
        case 4:
          GroupBlock<4>(wg, kc, xb, c);
          break;
        case 3:
          GroupBlock<3>(wg, kc, xb, c);
          break;
        case 2:
          GroupBlock<2>(wg, kc, xb, c);
          break;
        default:
          GroupBlock<1>(wg, kc, xb, c);
      }
      for (size_t t = 0; t < tg; ++t) {
        const size_t j0 = kGroupTiles * kTileRows * g + kTileRows * t;
        const size_t cols = std::min(kTileRows, w.rows - j0);
        const __mmask16 mask = static_cast<__mmask16>((uint32_t{1} << cols) - 1);
        const __m512 bv = bias != nullptr ? _mm512_maskz_loadu_ps(mask, bias + j0) : _mm512_setzero_ps();
        for (size_t i = 0; i < rows; ++i) {
          __m512 v = _mm512_load_ps(c + t * 256 + i * kTileRows);
          if (bias != nullptr) v = _mm512_add_ps(v, bv);
          _mm512_mask_storeu_ps(y + (kTileRows * b + i) * ldy + j0, mask, v);
        }
      }
    }
  }
  _tile_release();
}

size_t GroupCount(const MatrixView& w) {
  return (w.rows + kGroupTiles * kTileRows - 1) / (kGroupTiles * kTileRows);
}

// X split once (the calling thread's scratch), then the groups of every output's W as one range split
// across the team; k = cols of every W.
void MatMulAmx(const float* x, size_t m, size_t ldx, size_t k, std::span<const MatMulOut> outs,
               ThreadTeam& team) {
  const size_t kc = (k + kTileCols - 1) / kTileCols;
  const size_t blocks = (m + kTileRows - 1) / kTileRows;
  auto* xp = reinterpret_cast<uint16_t*>(
      internal::ThreadQuantScratch().Reserve(blocks * kc * kParts * kTileElems * sizeof(uint16_t)));
  SplitX(x, m, ldx, k, kc, xp);
  size_t total = 0;
  for (const MatMulOut& o : outs) total += GroupCount(*o.w);
  team.ParallelFor(total, 1, 1, [&](size_t g0, size_t g1) {
    size_t first = 0;  // the range's groups, output by output
    for (const MatMulOut& o : outs) {
      const size_t n = GroupCount(*o.w), lo = std::max(g0, first), hi = std::min(g1, first + n);
      if (lo < hi) Groups(*o.w, kc, xp, m, o.bias, o.y, o.ldy, lo - first, hi - first);
      first += n;
    }
  });
}

#endif  // LFMVOX_HAVE_AMX

// No AMX: the rows unpacked (the thread's scratch) for the BF16 engine.
void MatMulUnpacked(const float* x, size_t m, size_t ldx, const MatrixView& w, const float* bias, float* y,
                    size_t ldy, ThreadTeam& team) {
  const size_t rb = w.cols * sizeof(uint16_t);
  thread_local AlignedBuffer<uint8_t> unpacked;  // not QuantScratch::w: the BF16 engine widens into that
  if (unpacked.size() < w.rows * rb) unpacked.Reset(w.rows * rb);
  uint8_t* rows = unpacked.data();
  for (size_t r = 0; r < w.rows; ++r) {
    const uint8_t* row = RowAsBlocks(w, r, rows + r * rb);
    if (row != rows + r * rb) std::memcpy(rows + r * rb, row, rb);
  }
  internal::MatMulBf16(x, m, ldx, MatrixView::Dense(WeightFormat::kBF16, rows, w.rows, w.cols, w.cols), bias,
                       y, ldy, team);
}

}  // namespace

bool PrefersTilesLayout(WeightFormat f) { return f == WeightFormat::kBF16 && UseAmx(); }

void internal::SetTilesAmxForTest(bool on) { amx_off_for_test.store(!on, std::memory_order_relaxed); }

void internal::MatMulTiles(const float* x, size_t m, size_t ldx, const MatrixView& w, const float* bias,
                           float* y, size_t ldy, ThreadTeam& team) {
  const MatMulOut out{&w, bias, y, ldy};
  MatMulTilesShared(x, m, ldx, {&out, 1}, team);
}

void internal::MatMulTilesShared(const float* x, size_t m, size_t ldx, std::span<const MatMulOut> outs,
                                 ThreadTeam& team) {
  if (m == 0) return;
#if LFMVOX_HAVE_AMX
  const size_t k = outs.front().w->cols;
  const bool same_k =
      std::all_of(outs.begin(), outs.end(), [&](const MatMulOut& o) { return o.w->cols == k; });
  if (UseAmx() && k > 0 && same_k) return MatMulAmx(x, m, ldx, k, outs, team);
#endif
  for (const MatMulOut& o : outs) {
    if (o.w->rows > 0) MatMulUnpacked(x, m, ldx, *o.w, o.bias, o.y, o.ldy, team);
  }
}

}  // namespace lfmvox::ops
