// What this CPU's bf16 instructions are worth for MatMul with bf16 weights:
// in-register throughput (everything in L1, one thread) of
//   * 24 independent f32 FMA chains and 24 independent vdpbf16ps chains
//     (instructions per second, zmm);
//   * the 6 × 4 tile of matmul-inl.h (6 X rows × 4 W rows, k = 512) with f32
//     W, with bf16 W widened to f32 (shift + unpack, then FMA: today's
//     path), and with bf16 W fed to vdpbf16ps against X split exactly into
//     three bf16 parts (hi + mid + lo = x, 3 vdpbf16ps per 32 weights: the
//     f32-level alternative) or rounded to one bf16 part (not f32-exact;
//     the upper bound of any vdpbf16ps path);
//   * AMX TDPBF16PS (16 × 16 × 32 per instruction, 4 accumulator tiles),
//     when the CPU has AMX-BF16 and the kernel grants the tile state;
//   * whole MatMuls at m = 6 (the codec's frame) with hot bf16 W: the
//     engine's ops::MatMul on one thread against a sketch of AMX with W
//     read in place and X split in 3 bf16 parts (packing included).
// GFLOP/s count 2·m·n·k useful flops (the split's 3 passes count once). Each
// tile case also reports its largest |y − exact| / Σ|x·w| on random data,
// against a double reference, in units of 2^-24.
//
// One JSON line per case. Usage: bench_bf16_probe [min_seconds_per_case, default 0.3]
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench_util.h"
#include "ops/ops.h"
#include "threading/thread_team.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

// GCC 12's AVX-512 headers trip -Wuninitialized on their own "undefined"
// upper halves once inlined here (_mm512_reduce_add_ps and others).
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace lfmvox::bench {
namespace {

#define LFMVOX_PROBE_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,fma"), noinline))

constexpr int kR = 6, kNr = 4, kK = 512, kChunks = kK / 32;

// Best seconds per call of f over repeated timed batches of `calls` calls.
template <class F>
double BestSeconds(double min_seconds, int calls, F&& f) {
  double best = 1e30;
  const double start = Now();
  do {
    const double t0 = Now();
    for (int i = 0; i < calls; ++i) f();
    best = std::min(best, (Now() - t0) / calls);
  } while (Now() - start < min_seconds);
  return best;
}

template <bool kDot>
LFMVOX_PROBE_TARGET float Chains(long iters) {
  __m512 a[24];
  for (int i = 0; i < 24; ++i) a[i] = _mm512_set1_ps(static_cast<float>(i));
  __m512 xf = _mm512_set1_ps(1.0f), yf = _mm512_setzero_ps();
  __m512i xb = _mm512_set1_epi16(0x3f80), yb = _mm512_setzero_si512();
  asm("" : "+v"(xf), "+v"(yf), "+v"(xb), "+v"(yb));
  for (long i = 0; i < iters; ++i) {
#pragma GCC unroll 24
    for (int j = 0; j < 24; ++j) {
      if constexpr (kDot) {
        a[j] = _mm512_dpbf16_ps(a[j], reinterpret_cast<__m512bh>(xb), reinterpret_cast<__m512bh>(yb));
      } else {
        a[j] = _mm512_fmadd_ps(xf, yf, a[j]);
      }
    }
  }
  __m512 s = a[0];
  for (int i = 1; i < 24; ++i) s = _mm512_add_ps(s, a[i]);
  return _mm512_reduce_add_ps(s);
}

// W rows kK apart; X rows kK apart (f32) or, for the dot tiles, X split as
// [row][chunk][part][32 bf16].
enum class Tile { kF32, kWiden, kDot3, kDot1 };

// passes > 1 runs the k loop again into the same sums (for timing: the lane
// sums then cost little, as in a longer row).
template <Tile kT>
LFMVOX_PROBE_TARGET void RunTile(const float* x, const uint16_t* xs, const void* w, float* y, int passes) {
  __m512 acc[kR][kNr];
#pragma GCC unroll 8
  for (int r = 0; r < kR; ++r) {
#pragma GCC unroll 8
    for (int c = 0; c < kNr; ++c) acc[r][c] = _mm512_setzero_ps();
  }
  if constexpr (kT == Tile::kF32 || kT == Tile::kWiden) {
    for (int pass = 0, q = 0; pass < passes; q = (q + 16) % kK, pass += q == 0) {
      __m512 wv[kNr];
#pragma GCC unroll 8
      for (int c = 0; c < kNr; ++c) {
        if constexpr (kT == Tile::kF32) {
          wv[c] = _mm512_loadu_ps(static_cast<const float*>(w) + c * kK + q);
        } else {
          const __m256i h = _mm256_loadu_si256(
              reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(w) + c * kK + q));
          wv[c] = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
        }
      }
#pragma GCC unroll 8
      for (int r = 0; r < kR; ++r) {
        __m512 xv = _mm512_loadu_ps(x + r * kK + q);
        asm("" : "+v"(xv));
#pragma GCC unroll 8
        for (int c = 0; c < kNr; ++c) acc[r][c] = _mm512_fmadd_ps(xv, wv[c], acc[r][c]);
      }
    }
  } else {
    constexpr int kParts = kT == Tile::kDot3 ? 3 : 1;
    for (int pass = 0, q = 0; pass < passes; q = (q + 1) % kChunks, pass += q == 0) {
      __m512i wv[kNr];
#pragma GCC unroll 8
      for (int c = 0; c < kNr; ++c)
        wv[c] = _mm512_loadu_si512(static_cast<const uint16_t*>(w) + c * kK + q * 32);
#pragma GCC unroll 8
      for (int r = 0; r < kR; ++r) {
#pragma GCC unroll 3
        for (int p = 0; p < kParts; ++p) {
          __m512i xv = _mm512_loadu_si512(xs + ((r * kChunks + q) * 3 + p) * 32);
          asm("" : "+v"(xv));
#pragma GCC unroll 8
          for (int c = 0; c < kNr; ++c) {
            acc[r][c] = _mm512_dpbf16_ps(acc[r][c], reinterpret_cast<__m512bh>(xv),
                                         reinterpret_cast<__m512bh>(wv[c]));
          }
        }
      }
    }
  }
  for (int r = 0; r < kR; ++r) {
    for (int c = 0; c < kNr; ++c) y[r * kNr + c] = _mm512_reduce_add_ps(acc[r][c]);
  }
}

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// AMX: 4 × TDPBF16PS per iteration into 4 accumulator tiles.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
__attribute__((target("amx-tile,amx-bf16"), noinline)) void AmxLoop(const uint16_t* a, const uint16_t* b,
                                                                    float* c, long iters) {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  _tile_loadconfig(&cfg);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, a, 64);
  _tile_loadd(5, a + 512, 64);
  _tile_loadd(6, b, 64);
  _tile_loadd(7, b + 512, 64);
  for (long i = 0; i < iters; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, c, 64);
  _tile_release();
}

// Y[m, n] = X[m, k]·W[n, k]ᵀ on AMX with W in place (row-major bf16: a
// 16-row block of W is an A tile as it lies) and X split in 3 bf16 parts,
// packed as B tiles: xb[chunk][part][kk < 16][i < m][2] = part(X[i][32·chunk + 2·kk + {0,1}]).
// Per 64 W rows and chunk: 3 B loads, 4 A loads, 12 TDPBF16PS (hi, mid, lo
// in turn into each of 4 accumulators). n a multiple of 64, k of 32, m ≤ 16.
__attribute__((target("amx-tile,amx-bf16"), noinline)) void AmxMatMul(const uint16_t* w, size_t n, size_t k,
                                                                      const uint16_t* xb, size_t m,
                                                                      float* y) {
  TileConfig cfg;
  const auto mb = static_cast<uint16_t>(4 * m);
  for (int t = 0; t < 8; ++t) {
    cfg.rows[t] = 16;
    cfg.colsb[t] = t == 4 ? 64 : mb;
  }
  _tile_loadconfig(&cfg);
  alignas(64) float c[4][16 * 16];
  const size_t chunks = k / 32, part_elems = 16 * 2 * m;
  for (size_t jb = 0; jb < n; jb += 64) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (size_t q = 0; q < chunks; ++q) {
      const uint16_t* b = xb + q * 3 * part_elems;
      _tile_loadd(5, b, mb);
      _tile_loadd(6, b + part_elems, mb);
      _tile_loadd(7, b + 2 * part_elems, mb);
      const uint16_t* a = w + jb * k + q * 32;
      // The next block's 64 lines at this chunk (past the end of W harmless).
      for (size_t r = 0; r < 64; ++r)
        _mm_prefetch(reinterpret_cast<const char*>(a + (64 + r) * k), _MM_HINT_T0);
#define LFMVOX_PROBE_BLOCK(T)            \
  _tile_loadd(4, a + (T)*16 * k, 2 * k); \
  _tile_dpbf16ps(T, 4, 5);               \
  _tile_dpbf16ps(T, 4, 6);               \
  _tile_dpbf16ps(T, 4, 7);
      LFMVOX_PROBE_BLOCK(0)
      LFMVOX_PROBE_BLOCK(1)
      LFMVOX_PROBE_BLOCK(2)
      LFMVOX_PROBE_BLOCK(3)
#undef LFMVOX_PROBE_BLOCK
    }
    _tile_stored(0, c[0], mb);
    _tile_stored(1, c[1], mb);
    _tile_stored(2, c[2], mb);
    _tile_stored(3, c[3], mb);
    for (size_t h = 0; h < 4; ++h) {
      for (size_t r = 0; r < 16; ++r) {
        for (size_t i = 0; i < m; ++i) y[i * n + jb + 16 * h + r] = c[h][r * m + i];
      }
    }
  }
  _tile_release();
}

// The same with hi and mid as column groups of one B tile (2m columns) and lo
// in a second (m columns): 2 TDPs per A tile instead of 3, then y = (hi-sum +
// mid-sum) + lo-sum. xb[chunk]: [kk < 16][hi pairs of i < m, mid pairs of
// i < m], then [kk < 16][lo pairs of i < m]. Per 32 W rows and chunk: 2 A
// loads, 2 B loads, 4 TDPs into 4 accumulators. m ≤ 8.
__attribute__((target("amx-tile,amx-bf16"), noinline)) void AmxMatMulCols(const uint16_t* w, size_t n,
                                                                          size_t k, const uint16_t* xb,
                                                                          size_t m, float* y) {
  TileConfig cfg;
  const auto m4 = static_cast<uint16_t>(4 * m), m8 = static_cast<uint16_t>(8 * m);
  const uint16_t colsb[8] = {m8, m4, m8, m4, 64, 64, m8, m4};
  for (int t = 0; t < 8; ++t) {
    cfg.rows[t] = 16;
    cfg.colsb[t] = colsb[t];
  }
  _tile_loadconfig(&cfg);
  alignas(64) float hm[2][16 * 16], lo[2][16 * 8];
  const size_t chunks = k / 32, chunk_elems = 96 * m;
  for (size_t jb = 0; jb < n; jb += 32) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (size_t q = 0; q < chunks; ++q) {
      const uint16_t* b = xb + q * chunk_elems;
      _tile_loadd(6, b, m8);
      _tile_loadd(7, b + 64 * m, m4);
      _tile_loadd(4, w + jb * k + q * 32, 2 * k);
      _tile_loadd(5, w + (jb + 16) * k + q * 32, 2 * k);
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, hm[0], m8);
    _tile_stored(1, lo[0], m4);
    _tile_stored(2, hm[1], m8);
    _tile_stored(3, lo[1], m4);
    for (size_t h = 0; h < 2; ++h) {
      for (size_t r = 0; r < 16; ++r) {
        for (size_t i = 0; i < m; ++i)
          y[i * n + jb + 16 * h + r] = (hm[h][r * 2 * m + i] + hm[h][r * 2 * m + m + i]) + lo[h][r * m + i];
      }
    }
  }
  _tile_release();
}

void Run(double min_seconds) {
  const double load = LoadAverage();
  if (!__builtin_cpu_supports("avx512bf16")) {
    std::printf("{\"bench\":\"bf16_probe\",\"skipped\":\"no AVX512_BF16\",\"load\":%.2f}\n", load);
    return;
  }
  const char* cpu_json = "\"cpu\":\"%s\",\"load\":%.2f";
  const std::string cpu = CpuModel();

  // Instruction throughput.
  constexpr long kIters = 200000;
  volatile float sink = 0;
  const double fma_s = BestSeconds(min_seconds, 1, [&] { sink = sink + Chains<false>(kIters); });
  const double dot_s = BestSeconds(min_seconds, 1, [&] { sink = sink + Chains<true>(kIters); });
  const double fma_rate = 24.0 * kIters / fma_s, dot_rate = 24.0 * kIters / dot_s;
  std::printf("{\"bench\":\"bf16_probe\",\"case\":\"chains\",");
  std::printf(cpu_json, cpu.c_str(), load);
  std::printf(",\"fma_zmm_G_per_s\":%.3f,\"vdpbf16ps_zmm_G_per_s\":%.3f,\"fma_per_vdpbf16ps\":%.2f}\n",
              fma_rate / 1e9, dot_rate / 1e9, fma_rate / dot_rate);

  // Tiles on random data.
  std::vector<float> x(kR * kK), w32(kNr * kK);
  std::vector<uint16_t> w16(kNr * kK), xs3(kR * kK * 3), xs1(kR * kK * 3, 0);
  uint64_t s = 0x9E3779B97F4A7C15ull;
  auto next = [&] {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return static_cast<float>(static_cast<int64_t>(s >> 40) - (int64_t{1} << 23)) /
           static_cast<float>(1 << 23);
  };
  for (float& v : x) v = next();
  for (size_t i = 0; i < w16.size(); ++i) {
    w16[i] = static_cast<uint16_t>(Bits(next() * 0.1f) >> 16);  // truncated to bf16
    w32[i] = FromBits(uint32_t{w16[i]} << 16);
  }
  // The exact split by truncation: hi = top 16 bits of x, mid = top 16 bits
  // of x − hi (exact in f32), lo = x − hi − mid (≤ 8 significant bits left,
  // so exact in bf16); hi + mid + lo = x for every normal x whose parts stay
  // normal (|x| ≥ ~2^-100).
  for (int r = 0; r < kR; ++r) {
    for (int q = 0; q < kK; ++q) {
      const float v = x[r * kK + q];
      const float hi = FromBits(Bits(v) & 0xffff0000u);
      const float mid = FromBits(Bits(v - hi) & 0xffff0000u);
      const float lo = v - hi - mid;
      const size_t at = (static_cast<size_t>(r) * kChunks + q / 32) * 3 * 32 + q % 32;
      xs3[at] = static_cast<uint16_t>(Bits(hi) >> 16);
      xs3[at + 32] = static_cast<uint16_t>(Bits(mid) >> 16);
      xs3[at + 64] = static_cast<uint16_t>(Bits(lo) >> 16);
      if (FromBits(uint32_t{xs3[at + 64]} << 16) != lo) std::abort();  // the split must be exact
      xs1[at] = static_cast<uint16_t>((Bits(v) + 0x7fff + ((Bits(v) >> 16) & 1)) >> 16);  // RNE
    }
  }
  struct TileCase {
    const char* name;
    Tile t;
  };
  for (const TileCase tc :
       {TileCase{"tile6x4_f32_w", Tile::kF32}, TileCase{"tile6x4_bf16_widen_fma", Tile::kWiden},
        TileCase{"tile6x4_bf16_vdpbf16ps_x3", Tile::kDot3},
        TileCase{"tile6x4_bf16_vdpbf16ps_x1_inexact", Tile::kDot1}}) {
    float y[kR * kNr];
    auto call = [&](int passes) {
      switch (tc.t) {
        case Tile::kF32:
          RunTile<Tile::kF32>(x.data(), nullptr, w32.data(), y, passes);
          break;
        case Tile::kWiden:
          RunTile<Tile::kWiden>(x.data(), nullptr, w16.data(), y, passes);
          break;
        case Tile::kDot3:
          RunTile<Tile::kDot3>(nullptr, xs3.data(), w16.data(), y, passes);
          break;
        case Tile::kDot1:
          RunTile<Tile::kDot1>(nullptr, xs1.data(), w16.data(), y, passes);
          break;
      }
    };
    constexpr int kLoopPasses = 16;
    const double sec_loop = BestSeconds(min_seconds, 200, [&] { call(kLoopPasses); });
    const double sec = BestSeconds(min_seconds, 2000, [&] { call(1); });  // last: y for the check
    double worst = 0;  // max |y − exact| / Σ|x·w|, in units of 2^-24
    for (int r = 0; r < kR; ++r) {
      for (int c = 0; c < kNr; ++c) {
        double exact = 0, mag = 0;
        for (int q = 0; q < kK; ++q) {
          exact += double{x[r * kK + q]} * w32[c * kK + q];
          mag += std::abs(double{x[r * kK + q]} * w32[c * kK + q]);
        }
        worst = std::max(worst, std::abs(y[r * kNr + c] - exact) / mag / 0x1p-24);
      }
    }
    std::printf("{\"bench\":\"bf16_probe\",\"case\":\"%s\",", tc.name);
    std::printf(cpu_json, cpu.c_str(), load);
    const double flops = 2.0 * kR * kNr * kK;
    std::printf(",\"k\":%d,\"us\":%.4f,\"gflops\":%.1f,\"gflops_loop\":%.1f,\"max_err_u\":%.3g}\n", kK,
                sec * 1e6, flops / sec / 1e9, flops * kLoopPasses / sec_loop / 1e9, worst);
  }

  // AMX, when there and granted (ARCH_REQ_XCOMP_PERM for XTILEDATA).
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  if (!__builtin_cpu_supports("amx-bf16") ||
      syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) {
    std::printf(
        "{\"bench\":\"bf16_probe\",\"case\":\"amx_tdpbf16ps\",\"skipped\":\"no AMX-BF16 or not granted\"}\n");
    return;
  }
  std::vector<uint16_t> a(1024, 0x3f80), b(1024, 0);
  std::vector<float> c(256);
  constexpr long kAmxIters = 100000;
  const double amx_s = BestSeconds(min_seconds, 1, [&] { AmxLoop(a.data(), b.data(), c.data(), kAmxIters); });
  const double macs = 4.0 * kAmxIters * 16 * 16 * 32;
  std::printf("{\"bench\":\"bf16_probe\",\"case\":\"amx_tdpbf16ps\",");
  std::printf(cpu_json, cpu.c_str(), load);
  std::printf(",\"G_tdp_per_s\":%.3f,\"raw_gflops\":%.0f}\n", 4.0 * kAmxIters / amx_s / 1e9,
              2 * macs / amx_s / 1e9);

  // The codec's shapes, m = 6: the engine's MatMul (1 thread) against AMX
  // with the 3-way split (its packing of X included), hot W (one copy) and
  // W from L3 (40 copies, 94 MB, as the codec's 73 MB a frame).
  ThreadTeam team(1);
  struct Shape {
    size_t n, k, copies;
  };
  for (const Shape sh : {Shape{512, 512, 1}, Shape{2304, 512, 1}, Shape{512, 2304, 1}, Shape{2304, 512, 40},
                         Shape{512, 2304, 40}}) {
    constexpr size_t m = 6;
    const size_t n = sh.n, k = sh.k;
    std::vector<float> xm(m * k), ye(m * n), ya(m * n), yc(m * n);
    std::vector<uint16_t> wm(n * k * sh.copies), xb(k / 32 * 96 * m), xc(k / 32 * 96 * m);
    for (float& v : xm) v = next();
    for (uint16_t& v : wm) v = static_cast<uint16_t>(Bits(next() * 0.1f) >> 16);
    std::vector<ops::Weight> wv;
    for (size_t c = 0; c < sh.copies; ++c)
      wv.push_back(ops::Weight::Dense(WeightFormat::kBF16, wm.data() + c * n * k, n, k, k));
    auto pack = [&] {
      for (size_t i = 0; i < m; ++i) {
        for (size_t q = 0; q < k; ++q) {
          const float v = xm[i * k + q];
          const float hi = FromBits(Bits(v) & 0xffff0000u);
          const float mid = FromBits(Bits(v - hi) & 0xffff0000u);
          const auto h16 = static_cast<uint16_t>(Bits(hi) >> 16),
                     m16 = static_cast<uint16_t>(Bits(mid) >> 16),
                     l16 = static_cast<uint16_t>(Bits(v - hi - mid) >> 16);
          const size_t chunk = (q / 32) * 96 * m, kk = (q % 32) / 2, j = q % 2;
          const size_t at = chunk + kk * 2 * m + 2 * i + j;  // 3 parts as 3 B tiles
          xb[at] = h16;
          xb[at + 32 * m] = m16;
          xb[at + 64 * m] = l16;
          xc[chunk + kk * 4 * m + 2 * i + j] = h16;  // hi | mid as one B tile, lo another
          xc[chunk + kk * 4 * m + 2 * (m + i) + j] = m16;
          xc[chunk + 64 * m + kk * 2 * m + 2 * i + j] = l16;
        }
      }
    };
    size_t at = 0;
    const double t_engine = BestSeconds(min_seconds, 20, [&] {
      ops::MatMul(xm.data(), m, k, wv[at], nullptr, ye.data(), n, team);
      at = (at + 1) % sh.copies;
    });
    const double t_amx = BestSeconds(min_seconds, 20, [&] {
      pack();
      AmxMatMul(wm.data() + at * n * k, n, k, xb.data(), m, ya.data());
      at = (at + 1) % sh.copies;
    });
    const double t_cols = BestSeconds(min_seconds, 20, [&] {
      pack();
      AmxMatMulCols(wm.data() + at * n * k, n, k, xc.data(), m, yc.data());
      at = (at + 1) % sh.copies;
    });
    // The three last ran on copy at − 1 each; recompute all on copy 0.
    ops::MatMul(xm.data(), m, k, wv[0], nullptr, ye.data(), n, team);
    AmxMatMul(wm.data(), n, k, xb.data(), m, ya.data());
    AmxMatMulCols(wm.data(), n, k, xc.data(), m, yc.data());
    double worst_e = 0, worst_a = 0, worst_c = 0;
    for (size_t i = 0; i < m; ++i) {
      for (size_t j = 0; j < n; ++j) {
        double exact = 0, mag = 0;
        for (size_t q = 0; q < k; ++q) {
          const double p = double{xm[i * k + q]} * FromBits(uint32_t{wm[j * k + q]} << 16);
          exact += p;
          mag += std::abs(p);
        }
        worst_e = std::max(worst_e, std::abs(ye[i * n + j] - exact) / mag / 0x1p-24);
        worst_a = std::max(worst_a, std::abs(ya[i * n + j] - exact) / mag / 0x1p-24);
        worst_c = std::max(worst_c, std::abs(yc[i * n + j] - exact) / mag / 0x1p-24);
      }
    }
    std::printf("{\"bench\":\"bf16_probe\",\"case\":\"matmul_m6_%s\",", sh.copies > 1 ? "l3" : "hot");
    std::printf(cpu_json, cpu.c_str(), load);
    std::printf(
        ",\"n\":%zu,\"k\":%zu,\"engine_us\":%.2f,\"amx_x3_us\":%.2f,\"amx_cols_us\":%.2f,"
        "\"engine_max_err_u\":%.3g,\"amx_x3_max_err_u\":%.3g,\"amx_cols_max_err_u\":%.3g}\n",
        n, k, t_engine * 1e6, t_amx * 1e6, t_cols * 1e6, worst_e, worst_a, worst_c);
  }
}

}  // namespace
}  // namespace lfmvox::bench

int main(int argc, char** argv) {
  lfmvox::bench::Run(argc > 1 ? std::atof(argv[1]) : 0.3);
  return 0;
}
#else
int main() {
  std::printf("{\"bench\":\"bf16_probe\",\"skipped\":\"x86-64 GCC/Clang only\"}\n");
  return 0;
}
#endif
