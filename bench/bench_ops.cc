// MatMul throughput: Y[m, n] = X[m, k] · W[n, k]ᵀ with bf16 W, for the shapes
// the models use, at m = 1 (backbone decode), m = 6 (one detokenizer frame)
// and m = 64 (prefill), on 1 and 2 threads.
//
// Rates are weight bytes per second (GB/s, the limit at small m) and
// GFLOP/s (2·m·n·k per call, the limit at large m), each also as a fraction
// of this machine's floor: DRAM read ~15 GB/s on one core, ~28 GB/s on two;
// ~198 GFLOP/s f32 FMA per core with AVX-512 (half that with AVX2 only).
//
// "cold" cycles through enough copies of W (≥ 96 MiB in all, three times the
// L3) that every call streams its weights from DRAM, as a model whose layers
// do not fit the cache does; "hot" reuses one copy, resident in L2/L3.
//
// Usage: bench_ops [min_seconds_per_case, default 0.3] [small]
// "small" runs only the small-m cold cases on one thread (m = 1..8, the
// detokenizer's shapes), for tuning the small-m kernel; "hot" the cache-resident
// cases on one thread (the codec's shapes and a 1024 one, bf16 and f32), for
// tuning the compute-bound tiles; "tiles" the LFM3 depth decoder's shapes at
// m = 4, 12 and 24, BF16 as stored against WeightLayout::kTiles (AMX), hot and cold, 1 and 2 threads.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "base/aligned.h"
#include "ops/ops.h"
#include "tensor/dtype.h"
#include "tensor/quant.h"
#include "threading/thread_team.h"

namespace lfmvox {
namespace {

constexpr double kDramGBs[3] = {0, 15.0, 28.0};  // by thread count
constexpr double kFmaGflopsPerCore = 198.0;
constexpr size_t kColdBytes = size_t{96} << 20;

// Cheap deterministic values in [-1, 1): the fill of ~100 MiB must not
// dominate the run.
struct XorShift {
  uint64_t s = 0x9E3779B97F4A7C15ull;
  float Next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return static_cast<float>(static_cast<int64_t>(s >> 40) - (int64_t{1} << 23)) /
           static_cast<float>(1 << 23);
  }
};

struct Case {
  size_t n, k;  // W [n, k]
};

void RunCase(ThreadTeam& team, DType dtype, Case c, size_t m, bool cold, double min_seconds,
             bool tiles = false) {
  const size_t elem = DTypeSize(dtype);
  WeightFormat format = WeightFormat::kF32;
  WeightFormatForDType(dtype, &format);  // F32 or BF16 here
  const size_t w_bytes = c.n * c.k * elem;
  const size_t copies = cold ? std::max<size_t>(1, (kColdBytes + w_bytes - 1) / w_bytes) : 1;
  XorShift rng;
  AlignedBuffer<uint8_t> wmem(copies * w_bytes);  // [copies, n, k] of dtype
  if (dtype == DType::kBF16) {
    auto* w = reinterpret_cast<uint16_t*>(wmem.data());
    for (size_t i = 0; i < copies * c.n * c.k; ++i) w[i] = F32ToBf16(0.05f * rng.Next());
  } else {
    auto* w = reinterpret_cast<float*>(wmem.data());
    for (size_t i = 0; i < copies * c.n * c.k; ++i) w[i] = 0.05f * rng.Next();
  }
  AlignedBuffer<float> x(m * c.k);  // [m, k]
  AlignedBuffer<float> y(m * c.n);  // [m, n]
  for (size_t i = 0; i < m * c.k; ++i) x[i] = rng.Next();

  // tiles: each copy repacked into WeightLayout::kTiles (AMX; the same values).
  const size_t t_bytes = tiles ? TilesLayoutBytes(c.n, c.k) : 0;
  AlignedBuffer<uint8_t> tmem(copies * t_bytes);
  std::vector<ops::Weight> views;
  for (size_t i = 0; i < copies; ++i) {
    const auto w = ops::Weight::Dense(format, wmem.data() + i * w_bytes, c.n, c.k, c.k);
    views.push_back(tiles ? RepackTiles(w, tmem.data() + i * t_bytes) : w);
  }
  auto call = [&](size_t i) {
    ops::MatMul(x.data(), m, c.k, views[i % copies], nullptr, y.data(), c.n, team);
  };
  for (size_t i = 0; i < copies; ++i) call(i);  // warm up: page in, spin up the team

  // Each call is timed on its own; rates use the fastest call, since on a
  // shared machine the slower ones measure the neighbours. The median is
  // printed alongside to show how noisy the run was.
  using Clock = std::chrono::steady_clock;
  std::vector<double> times;  // seconds per call
  double total = 0.0;
  for (size_t i = 0; total < min_seconds || times.size() < 5; ++i) {
    const auto t0 = Clock::now();
    call(i);
    times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    total += times.back();
  }
  std::sort(times.begin(), times.end());
  const double best = times.front(), median = times[times.size() / 2];
  const double gbs = static_cast<double>(w_bytes) / best * 1e-9;
  const double gflops = 2.0 * static_cast<double>(m * c.n * c.k) / best * 1e-9;
  const int threads = team.size();
  std::printf(
      "%-5s %5zux%-5zu m=%-3zu thr=%d %-4s best %8.1f us (median %8.1f) %6.2f GB/s (%4.0f%% of DRAM) "
      "%6.2f GFLOP/s (%3.0f%% of FMA)\n",
      tiles ? "BF16T" : DTypeName(dtype), c.n, c.k, m, threads, cold ? "cold" : "hot", best * 1e6,
      median * 1e6, gbs, 100.0 * gbs / kDramGBs[threads], gflops,
      100.0 * gflops / (kFmaGflopsPerCore * threads));
  std::fflush(stdout);
}

int Main(int argc, char** argv) {
  const double min_seconds = argc > 1 ? std::atof(argv[1]) : 0.3;
  std::printf("ops target: %s\n", ops::ChosenTarget());
  const Case cases[] = {{2304, 512}, {512, 2304}, {8192, 2048}, {2048, 8192}};
  if (argc > 2 && std::string_view(argv[2]) == "small") {
    ThreadTeam team(1);
    for (const Case& c : {cases[0], cases[1], cases[2]}) {
      for (size_t m : {1, 2, 3, 4, 6, 8}) RunCase(team, DType::kBF16, c, m, /*cold=*/true, min_seconds);
    }
    return 0;
  }
  if (argc > 2 && std::string_view(argv[2]) == "hot") {
    ThreadTeam team(1);
    for (const Case& c : {Case{512, 512}, cases[0], cases[1], Case{1024, 1024}}) {
      for (size_t m : {1, 6, 64}) RunCase(team, DType::kBF16, c, m, /*cold=*/false, min_seconds);
    }
    for (size_t m : {1, 6, 64}) RunCase(team, DType::kF32, cases[0], m, /*cold=*/false, min_seconds);
    return 0;
  }
  if (argc > 2 && std::string_view(argv[2]) == "tiles") {
    // The LFM3 depth decoder's matrices (width 1024, FFN 2816, 8 KV heads of 32) at its pass's rows: the
    // stored BF16 layout against kTiles (AMX where ops::PrefersTilesLayout, else the same kernel).
    std::printf("kTiles preferred for BF16 here: %s\n",
                ops::PrefersTilesLayout(WeightFormat::kBF16) ? "yes" : "no");
    for (int threads : {1, 2}) {
      ThreadTeam team(threads);
      for (const Case& c : {Case{1024, 1024}, Case{256, 1024}, Case{2816, 1024}, Case{1024, 2816}}) {
        for (size_t m : {4, 12, 24}) {
          for (bool cold : {false, true}) {
            for (bool tiles : {false, true}) RunCase(team, DType::kBF16, c, m, cold, min_seconds, tiles);
          }
        }
      }
    }
    return 0;
  }
  for (int threads : {1, 2}) {
    ThreadTeam team(threads);
    for (const Case& c : cases) {
      for (size_t m : {1, 6, 64}) RunCase(team, DType::kBF16, c, m, /*cold=*/true, min_seconds);
    }
    for (size_t m : {1, 6}) RunCase(team, DType::kBF16, cases[0], m, /*cold=*/false, min_seconds);
    RunCase(team, DType::kF32, cases[2], 1, /*cold=*/true, min_seconds);
  }
  return 0;
}

}  // namespace
}  // namespace lfmvox

int main(int argc, char** argv) { return lfmvox::Main(argc, argv); }
