// MatMul for Q8_0 and Q4_0 W in WeightLayout::kSteps16 (tensor/matrix.h) with
// Intel AMX-INT8 (TDPBSSD: a 16 × 16 int32 tile += a 16 × K int8 tile times
// a K × 16 one), giving the bits of the AVX3_DL steps of matmul_quant-inl.h.
//
// That engine computes each output as 16 f32 lanes, lane l taking blocks
// l, 16 + l, 32 + l, ... of the row: acc_l ← fma(f32(isum_b), d_w,b·d_x,b,
// acc_l), the tail's blocks after the whole steps, then one fixed tree of
// lane sums and the bias. isum_b, the integer dot product of a 32-value
// block, is exact whichever unit forms it. Here TDPBSSD forms it with K = 32
// (one block a tile product: a tile of 16 X rows against a tile of 16 W
// rows), and the same FMA, product of scales, lane order and tree run on
// vectors across 16 W rows instead of across 16 blocks: every output sees
// the same operations on the same values, so the same bits, for any m,
// tile, team size or split (the determinism contract of ops.h holds across
// the two units).
//
// Per tile of 16 W rows (a task's share, in order): its blocks go once into
// TDPBSSD's second-operand order (8 rows of 16 × 4 bytes: row kk holds each
// W row's values [4kk, 4kk + 4); Q4_0's nibbles as q − 8) and its scales
// into vectors across the 16 rows (16 × 16 transposes); then every 16-row
// tile of X in turn runs two blocks at a time (tile registers 0-1 or 2-3 the
// sums, 4-5 X, 6-7 W: the unit fills one pair while the vector units fold
// the other into 16 × 16 lane accumulators in L1).
//
// Measured (Emerald Rapids Xeon, one core, a hot [2048×2048] W, GOP/s, best of
// interleaved runs on a host whose rate moved by half within minutes; the
// table in docs/benchmarks.md): Q4_0 m = 16 274–282 against the VNNI steps'
// 333, m = 32 348–362 / 333–345, m = 64 398–418 / 318–342, m = 256 407–429 /
// 314–331; two threads m = 256 830–926 / 620–677. The unit itself is far from
// its peak: every block's sums leave it as a 1 KiB tile store and are folded
// by vector FMAs (each needs its own d_w·d_x), so the stores and the folds,
// not the products, set the rate. Tried and no faster: a block at a time with
// four sum tiles in turn (stores and folds lagging 2–4 blocks), the blocks
// walked lane by lane with the accumulators in registers, blocks l and
// 16 + l paired so that a lane's accumulators are loaded once for both.
#include <algorithm>
#include <atomic>

#include "ops/matmul_kernels.h"
#include "ops/ops.h"
#include "tensor/quant.h"
#include "threading/thread_team.h"

#if defined(__x86_64__) && defined(__linux__) && (defined(__GNUC__) || defined(__clang__))
#define LFMVOX_HAVE_AMX_INT8 1
#include <immintrin.h>
#if !defined(__clang__)
// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized on their own "undefined" operands once inlined.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#else
#define LFMVOX_HAVE_AMX_INT8 0
#endif

namespace lfmvox::ops {

namespace {

constexpr size_t kRows = 16;         // X rows of an X tile, W rows of a W tile, lanes of a step
constexpr size_t kBTileBytes = 512;  // one block of a W tile as TDPBSSD's second operand: 8 × 64 bytes
// X rows from which the unit pays: each W tile's preparation (a 16 × 16 transpose per 64 code bytes
// of its rows) is shared by ⌈m / 16⌉ X tiles, and each block's sums leave the unit as a 1 KiB tile
// store. Measured (this file's header): m = 16 ran at 0.8 of the VNNI steps, m = 32 about level.
constexpr size_t kMinRows = 32;

std::atomic<bool> off_for_test{false};

#if LFMVOX_HAVE_AMX_INT8

#define LFMVOX_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,f16c")))

// r[i] lane l → r[l] lane i (16 × 16 of 32-bit lanes).
LFMVOX_AVX512 inline void Transpose16(__m512i r[16]) {
  __m512i t[16], u[16];
  for (size_t i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  // u[4g + c], 128-bit lane L: element 4L + c of rows 4g .. 4g + 3.
  for (size_t g = 0; g < 4; ++g) {
    const __m512i* a = t + 4 * g;
    u[4 * g + 0] = _mm512_unpacklo_epi64(a[0], a[2]);
    u[4 * g + 1] = _mm512_unpackhi_epi64(a[0], a[2]);
    u[4 * g + 2] = _mm512_unpacklo_epi64(a[1], a[3]);
    u[4 * g + 3] = _mm512_unpackhi_epi64(a[1], a[3]);
  }
  for (size_t c = 0; c < 4; ++c) {
    const __m512i v0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x88),
                  w0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xDD);
    const __m512i v1 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x88);
    const __m512i w1 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xDD);
    r[c] = _mm512_shuffle_i32x4(v0, v1, 0x88);
    r[8 + c] = _mm512_shuffle_i32x4(v0, v1, 0xDD);
    r[4 + c] = _mm512_shuffle_i32x4(w0, w1, 0x88);
    r[12 + c] = _mm512_shuffle_i32x4(w0, w1, 0xDD);
  }
}

// One tile of W rows [j, j + nv) of a kSteps16 matrix, prepared: b_tiles[b] its block b as TDPBSSD's
// second operand, dw[b] its d_w across the 16 rows (rows from nv on: zero codes and scales, never stored).
struct WTile {
  uint8_t* b_tiles;
  float* dw;
};

// The step (or the tail, `lanes` < 16 blocks) whose codes and scales are at `codes` / `scales` of each
// row: code register j (64-byte lane l: bytes [4j, 4j + 4) of block l) at codes + reg_stride·j.
LFMVOX_AVX512 void PrepareStep(WeightFormat f, const uint8_t* const* rows, size_t nv, size_t codes,
                               size_t reg_stride, size_t scales, size_t lanes, size_t b0, const WTile& out) {
  const __mmask16 mask = lanes >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << lanes) - 1);
  __m512i r[16];
  const size_t regs = f == WeightFormat::kQ8_0 ? 8 : 4;
  for (size_t j = 0; j < regs; ++j) {
    for (size_t n = 0; n < kRows; ++n)
      r[n] =
          n < nv ? _mm512_maskz_loadu_epi32(mask, rows[n] + codes + reg_stride * j) : _mm512_setzero_si512();
    Transpose16(r);  // r[l]: block b0 + l's bytes [4j, 4j + 4) of each row
    for (size_t l = 0; l < lanes; ++l) {
      uint8_t* bt = out.b_tiles + (b0 + l) * kBTileBytes;
      if (f == WeightFormat::kQ8_0) {
        _mm512_store_si512(bt + 64 * j, r[l]);
      } else {  // Q4_0: low nibbles are values [4j, 4j + 4), high ones [16 + 4j, 20 + 4j); each q − 8
        const __m512i m4 = _mm512_set1_epi8(0x0f), eight = _mm512_set1_epi8(8);
        _mm512_store_si512(bt + 64 * j, _mm512_sub_epi8(_mm512_and_si512(r[l], m4), eight));
        _mm512_store_si512(bt + 64 * (4 + j),
                           _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(r[l], 4), m4), eight));
      }
    }
  }
  for (size_t n = 0; n < kRows; ++n) {
    r[n] = n < nv ? _mm512_castps_si512(_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, rows[n] + scales)))
                  : _mm512_setzero_si512();
  }
  Transpose16(r);
  for (size_t l = 0; l < lanes; ++l) _mm512_store_si512(out.dw + 16 * (b0 + l), r[l]);
}

LFMVOX_AVX512 void PrepareWTile(const MatrixView& w, size_t j, size_t nv, size_t blocks, const WTile& out) {
  const size_t q = w.format == WeightFormat::kQ8_0 ? 32 : 16, C = 16 * q;  // code bytes a block, a step
  const size_t s = blocks / 16, t = blocks % 16;
  const uint8_t* rows[kRows];
  for (size_t n = 0; n < kRows; ++n)
    rows[n] = static_cast<const uint8_t*>(w.data) + (j + std::min(n, nv - 1)) * w.row_bytes;
  for (size_t p = 0; p < s; ++p)
    PrepareStep(w.format, rows, nv, Steps16CodesAt(p, s, C), 64, Steps16ScalesAt(p, s, C), 16, 16 * p, out);
  if (t > 0)
    PrepareStep(w.format, rows, nv, s * (C + 32), 4 * t, Steps16TailScalesAt(s, C, t, q), t, 16 * s, out);
}

// Sums 0-3 and X 4-5 with `rows` rows (64 / 32 bytes), W 6-7 with 8 rows of 64 bytes (K = 32).
__attribute__((target("amx-tile"))) void ConfigureQuantTiles(size_t rows) {
  internal::AmxTileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.rows[t] = static_cast<uint8_t>(t >= 6 ? 8 : rows);
    cfg.colsb[t] = t == 4 || t == 5 ? 32 : 64;
  }
  _tile_loadconfig(&cfg);
}

// Blocks 2p and 2p + 1 (when `two`) of the X tile (A tiles at xa, 512 bytes a block) against the W
// tile's (bt) into sum tiles S and S + 1 of set p % 2 (S = 0 or 2: the unit fills one set while the
// vector units fold the other). GCC's tile intrinsics paste their register numbers: literals only.
#define LFMVOX_AMX_ISSUE_PAIR(S0, S1)       \
  do {                                      \
    _tile_zero(S0);                         \
    _tile_loadd(4, xa, 32);                 \
    _tile_loadd(6, bt, 64);                 \
    _tile_dpbssd(S0, 4, 6);                 \
    if (two) {                              \
      _tile_zero(S1);                       \
      _tile_loadd(5, xa + 512, 32);         \
      _tile_loadd(7, bt + kBTileBytes, 64); \
      _tile_dpbssd(S1, 5, 7);               \
    }                                       \
  } while (0)
__attribute__((target("amx-tile,amx-int8"))) inline void IssuePair(size_t set, const int8_t* xa,
                                                                   const uint8_t* bt, bool two) {
  if (set == 0) {
    LFMVOX_AMX_ISSUE_PAIR(0, 1);
  } else {
    LFMVOX_AMX_ISSUE_PAIR(2, 3);
  }
}
#undef LFMVOX_AMX_ISSUE_PAIR
// Set `set`'s sums to c (256 int32 a block).
__attribute__((target("amx-tile"))) inline void StorePair(size_t set, int32_t* c, bool two) {
  if (set == 0) {
    _tile_stored(0, c, 64);
    if (two) _tile_stored(1, c + 256, 64);
  } else {
    _tile_stored(2, c, 64);
    if (two) _tile_stored(3, c + 256, 64);
  }
}

// X tile t (`rows` rows, packed: see QuantMatMulAmx) against the prepared W tile (columns [j, j + nv)
// of Y). acc: 16 × 16 vectors (lane l, row i at 16·l + i), c: 2 × 2 × 256 int32, both the thread's.
__attribute__((target("amx-tile,amx-int8,avx512f"))) void XTile(const int8_t* xa, const float* xd,
                                                                size_t blocks, size_t i0, size_t rows,
                                                                const WTile& wt, size_t j, size_t nv,
                                                                const float* bias, float* y, size_t ldy,
                                                                __m512* acc, int32_t* c) {
  for (size_t a = 0; a < 16 * kRows; ++a) acc[a] = _mm512_setzero_ps();
  const size_t pairs = (blocks + 1) / 2;
  auto issue = [&](size_t p) {  // pair p into set p % 2
    IssuePair(p % 2, xa + 2 * p * 512, wt.b_tiles + 2 * p * kBTileBytes, 2 * p + 1 < blocks);
  };
  auto store = [&](size_t p) { StorePair(p % 2, c + 512 * (p % 2), 2 * p + 1 < blocks); };
  issue(0);
  store(0);
  for (size_t p = 0; p < pairs; ++p) {
    if (p + 1 < pairs) issue(p + 1);
    for (size_t b = 2 * p; b < std::min(blocks, 2 * p + 2); ++b) {
      const __m512 dw = _mm512_load_ps(wt.dw + 16 * b);
      const int32_t* sums = c + 512 * (p % 2) + 256 * (b % 2);
      const float* dx = xd + 16 * b;
      __m512* al = acc + 16 * (b % 16);
      for (size_t i = 0; i < rows; ++i) {
        // matmul_quant-inl.h: QStepMulAdd(isum, QStepMul(d_w, d_x), acc).
        const __m512 v = _mm512_cvtepi32_ps(_mm512_load_si512(sums + 16 * i));
        al[i] = _mm512_fmadd_ps(v, _mm512_mul_ps(dw, _mm512_set1_ps(dx[i])), al[i]);
      }
    }
    if (p + 1 < pairs) store(p + 1);
  }
  // QStepSums' tree: h_e = a_e + a_(e+8), s_e = h_e + h_(e+4), (s_0 + s_2) + (s_1 + s_3); then the bias.
  const __mmask16 mask = static_cast<__mmask16>((uint32_t{1} << nv) - 1);
  const __m512 bv = bias != nullptr ? _mm512_maskz_loadu_ps(mask, bias + j) : _mm512_setzero_ps();
  for (size_t i = 0; i < rows; ++i) {
    __m512 h[8], s[4];
    for (size_t e = 0; e < 8; ++e) h[e] = _mm512_add_ps(acc[16 * e + i], acc[16 * (e + 8) + i]);
    for (size_t e = 0; e < 4; ++e) s[e] = _mm512_add_ps(h[e], h[e + 4]);
    __m512 r = _mm512_add_ps(_mm512_add_ps(s[0], s[2]), _mm512_add_ps(s[1], s[3]));
    if (bias != nullptr) r = _mm512_add_ps(r, bv);
    _mm512_mask_storeu_ps(y + (i0 + i) * ldy + j, mask, r);
  }
}

// W tiles [t0, t1) against every X tile.
__attribute__((target("amx-tile"))) void WTiles(const int8_t* xa, const float* xd, size_t m,
                                                const MatrixView& w, const float* bias, float* y, size_t ldy,
                                                size_t t0, size_t t1) {
  const size_t blocks = w.cols / 32;
  internal::QuantScratch& scratch = internal::ThreadQuantScratch();
  uint8_t* buf = scratch.ReserveW(blocks * (kBTileBytes + 64));
  const WTile wt{buf, reinterpret_cast<float*>(buf + blocks * kBTileBytes)};
  uint8_t* work = scratch.ReserveCarry(16 * kRows * sizeof(__m512) + 4 * 256 * sizeof(int32_t));
  auto* acc = reinterpret_cast<__m512*>(work);
  auto* c = reinterpret_cast<int32_t*>(work + 16 * kRows * sizeof(__m512));
  size_t configured = 0;
  for (size_t t = t0; t < t1; ++t) {
    const size_t j = kRows * t, nv = std::min(kRows, w.rows - j);
    PrepareWTile(w, j, nv, blocks, wt);
    for (size_t i0 = 0; i0 < m; i0 += kRows) {
      const size_t rows = std::min(kRows, m - i0), xt = i0 / kRows;
      if (rows != configured) ConfigureQuantTiles(configured = rows);
      XTile(xa + xt * blocks * 512, xd + xt * blocks * 16, blocks, i0, rows, wt, j, nv, bias, y, ldy, acc, c);
    }
  }
  if (configured != 0) _tile_release();
}

#endif  // LFMVOX_HAVE_AMX_INT8

}  // namespace

bool internal::QuantAmxFor(WeightFormat f, size_t m) {
  return m >= kMinRows && (f == WeightFormat::kQ8_0 || f == WeightFormat::kQ4_0) &&
         !off_for_test.load(std::memory_order_relaxed) && AmxGranted().int8;
}

void internal::SetQuantAmxForTest(bool on) { off_for_test.store(!on, std::memory_order_relaxed); }

void internal::QuantMatMulAmx([[maybe_unused]] const int8_t* xa, [[maybe_unused]] const float* xd,
                              [[maybe_unused]] size_t m, [[maybe_unused]] const MatrixView& w,
                              [[maybe_unused]] const float* bias, [[maybe_unused]] float* y,
                              [[maybe_unused]] size_t ldy, [[maybe_unused]] ThreadTeam& team) {
#if LFMVOX_HAVE_AMX_INT8
  const size_t tiles = (w.rows + kRows - 1) / kRows;
  team.ParallelFor(tiles, 1, 1, [&](size_t t0, size_t t1) { WTiles(xa, xd, m, w, bias, y, ldy, t0, t1); });
#endif
}

}  // namespace lfmvox::ops
