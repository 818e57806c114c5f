// MatMul throughput per weight format, F16 and BF16 (the float engine) against
// Q8_0, Q4_0 and Q6_K (the integer engine), for the backbone's shapes
// [8192×2048] (FFN up), [2048×8192] (FFN down) and [65536×2048] (the tied
// output head), at m = 1 (decode), 6, 64 and 256, on 1 and 2 threads.
//
// Weights are cold: enough copies (≥ 512 MiB) are cycled that every call
// streams W from DRAM. 96 MiB (three times a 32 MiB L3) was not enough on a
// Zen 5 VM whose reads slow down gradually up to ~256 MiB working sets (a
// cache the guest does not see: one core read 41 GB/s over 32 MiB, 33 over
// 64, 28 over 128, 22-24 over 256-512), so "cold" rates came out up to twice
// the floor.
// The floor is bench::MeasureReadBandwidth with the same thread count (the
// one every backbone benchmark uses: 1 GiB, vector loads, best of three);
// at small m MatMul should read W at close to it.
//
// One JSON line per configuration: "format", "n", "k", "m", "threads",
// "us" (fastest call) and "us_median", "gb_s" (weight bytes / fastest call),
// "floor_gb_s", "floor_fraction" and "gflops" (2·m·n·k / fastest call).
// Block weights are random bytes with small scales: the speed of a kernel
// does not depend on the values.
//
// Usage: bench_quant [min_seconds_per_case, default 0.2] [quick|hot|l2|all]
//                    [formats, e.g. q4_0,q6_k] [m list, e.g. 1,64] [threads, e.g. 1]
// "quick" runs m = 1 and 6 only; "hot" runs m = 1 and 6 on one [2048×2048]
// copy that stays in L3 (shared with other cores: on a shared machine its
// rate varies), "l2" on one [192×2048] copy that fits each core's 512 KiB L2:
// the kernels' compute limit, without DRAM or L3. The
// optional lists narrow (or, for m, replace) what runs. LFMVOX_BENCH_TARGET=AVX2 (a Highway target
// name) runs that target's kernels instead of the best this CPU has; LFMVOX_BENCH_AMX=0 keeps Q8_0 and
// Q4_0 off AMX-INT8 (bench_util.h; "amx_int8":true marks the configurations that ran on it).
#include <hwy/targets.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "base/aligned.h"
#include "bench_util.h"
#include "ops/matmul_kernels.h"  // internal::QuantAmxFor
#include "ops/ops.h"
#include "tensor/dtype.h"
#include "tensor/quant.h"
#include "threading/thread_team.h"

namespace lfmvox {
namespace {

constexpr size_t kColdBytes = size_t{512} << 20;

struct XorShift {
  uint64_t s = 0x9E3779B97F4A7C15ull;
  uint64_t Next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
  float Uniform() {  // [-1, 1)
    return static_cast<float>(static_cast<int64_t>(Next() >> 40) - (int64_t{1} << 23)) /
           static_cast<float>(1 << 23);
  }
};

struct Case {
  size_t n, k;  // W [n, k]
};

void RunCase(ThreadTeam& team, double floor_gbs, WeightFormat f, Case c, size_t m, double min_seconds,
             bool cold = true) {
  const size_t rb = FormatRowBytes(f, c.k), w_bytes = c.n * rb;
  const size_t copies = cold ? std::max<size_t>(1, (kColdBytes + w_bytes - 1) / w_bytes) : 1;
  AlignedBuffer<uint8_t> wmem(copies * w_bytes);
  XorShift rng;
  if (f == WeightFormat::kBF16 || f == WeightFormat::kF16) {
    auto* w = reinterpret_cast<uint16_t*>(wmem.data());
    for (size_t i = 0; i < copies * c.n * c.k; ++i) {
      const float v = 0.05f * rng.Uniform();
      w[i] = f == WeightFormat::kBF16 ? F32ToBf16(v) : F32ToF16(v);
    }
  } else {
    // Random codes; each block's f16 d set to 2^-10 so the sums stay finite.
    auto* w = reinterpret_cast<uint64_t*>(wmem.data());
    for (size_t i = 0; i < wmem.size() / 8; ++i) w[i] = rng.Next();
    const size_t block_bytes = FormatRowBytes(f, FormatBlockElements(f));
    const size_t d_at = f == WeightFormat::kQ6_K ? kQ6_KD : 0;
    const uint16_t d = 0x1400;
    for (size_t b = 0; b < wmem.size() / block_bytes; ++b)
      std::memcpy(wmem.data() + b * block_bytes + d_at, &d, 2);
  }
  // The layout the model loader gives this CPU (blocks/weights.cc: LoadMatrix repacks into
  // WeightLayout::kSteps16 where ops::PrefersSteps16Layout); BENCH_QUANT_BLOCKS=1 keeps the file's.
  const char* keep = std::getenv("BENCH_QUANT_BLOCKS");
  const bool steps16 =
      HasSteps16Layout(f) && ops::PrefersSteps16Layout(f) && (keep == nullptr || *keep != '1');
  if (steps16) {
    std::vector<uint8_t> tmp(rb);
    for (size_t r = 0; r < copies * c.n; ++r) {
      RepackRowSteps16(f, wmem.data() + r * rb, c.k, tmp.data());
      std::memcpy(wmem.data() + r * rb, tmp.data(), rb);
    }
  }
  AlignedBuffer<float> x(m * c.k), y(m * c.n);
  for (size_t i = 0; i < m * c.k; ++i) x[i] = rng.Uniform();
  auto call = [&](size_t i) {
    auto w = ops::Weight::Dense(f, wmem.data() + (i % copies) * w_bytes, c.n, c.k, c.k);
    if (steps16) w.layout = WeightLayout::kSteps16;
    ops::MatMul(x.data(), m, c.k, w, nullptr, y.data(), c.n, team);
  };
  for (size_t i = 0; i < copies; ++i) call(i);  // page in, grow the scratch, spin up the team
  std::vector<double> times;
  double total = 0.0;
  for (size_t i = 0; total < min_seconds || times.size() < 3; ++i) {
    const double t0 = bench::Now();
    call(i);
    times.push_back(bench::Now() - t0);
    total += times.back();
  }
  std::sort(times.begin(), times.end());
  const double best = times.front(), median = times[times.size() / 2];
  const double gbs = static_cast<double>(w_bytes) / best * 1e-9;
  const bool amx = steps16 && ops::internal::QuantAmxFor(f, m);
  std::printf(
      "{\"format\":\"%s\",%s%s%s\"n\":%zu,\"k\":%zu,\"m\":%zu,\"threads\":%d,\"us\":%.1f,\"us_median\":%.1f,"
      "\"gb_s\":%.2f,\"floor_gb_s\":%.2f,\"floor_fraction\":%.3f,\"gflops\":%.2f}\n",
      WeightFormatName(f), cold ? "" : "\"hot\":true,", steps16 ? "\"layout\":\"steps16\"," : "",
      amx ? "\"amx_int8\":true," : "", c.n, c.k, m, team.size(), best * 1e6, median * 1e6, gbs, floor_gbs,
      gbs / floor_gbs, 2.0 * static_cast<double>(m * c.n * c.k) / best * 1e-9);
  std::fflush(stdout);
}

int Main(int argc, char** argv) {
  // LFMVOX_BENCH_TARGET=AVX2 (or AVX3, SSE4, ...): run the kernels of that compiled target on this CPU.
  if (const char* want = std::getenv("LFMVOX_BENCH_TARGET")) {
    bool found = false;
    for (int64_t t : hwy::SupportedAndGeneratedTargets()) {
      if (std::string_view(hwy::TargetName(t)) == want) {
        hwy::SetSupportedTargetsForTest(t);
        found = true;
      }
    }
    if (!found) {
      std::fprintf(stderr, "LFMVOX_BENCH_TARGET=%s: not a target this CPU runs and this build has\n", want);
      return 2;
    }
  }
  bench::ApplyAmxSetting();
  const double min_seconds = argc > 1 ? std::atof(argv[1]) : 0.2;
  const bool quick = argc > 2 && std::string_view(argv[2]) == "quick";
  const bool l2 = argc > 2 && std::string_view(argv[2]) == "l2";
  const bool hot = l2 || (argc > 2 && std::string_view(argv[2]) == "hot");
  std::printf("{\"ops_target\":\"%s\",\"cpu\":\"%s\",\"load\":%.2f}\n", ops::ChosenTarget(),
              bench::CpuModel().c_str(), bench::LoadAverage());
  const Case cases[] = {{8192, 2048}, {2048, 8192}, {65536, 2048}};
  const WeightFormat formats[] = {WeightFormat::kF16, WeightFormat::kBF16, WeightFormat::kQ8_0,
                                  WeightFormat::kQ4_0, WeightFormat::kQ6_K};
  std::vector<size_t> ms = {1, 6};
  if (!quick && !hot) ms.insert(ms.end(), {64, 256});
  const std::string_view only_formats = argc > 3 ? argv[3] : "";
  if (argc > 4) {
    ms.clear();
    for (const char* p = argv[4]; *p != '\0';) {
      char* end = nullptr;
      ms.push_back(std::strtoul(p, &end, 10));
      if (end == p) break;
      p = *end == ',' ? end + 1 : end;
    }
  }
  std::vector<int> thread_counts = {1, 2};
  if (argc > 5) thread_counts = {std::atoi(argv[5])};
  auto wanted = [&](WeightFormat f) {
    if (only_formats.empty()) return true;
    std::string name = WeightFormatName(f);
    for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return only_formats.find(name) != std::string_view::npos;
  };
  for (int threads : thread_counts) {
    ThreadTeam team(threads);
    const double floor_gbs = bench::MeasureReadBandwidth(team) * 1e-9;
    std::printf("{\"read_floor_gb_s\":%.2f,\"threads\":%d}\n", floor_gbs, threads);
    if (hot) {
      for (size_t m : ms) {
        for (WeightFormat f : formats) {
          if (wanted(f))
            RunCase(team, floor_gbs, f, Case{l2 ? size_t{192} : 2048, 2048}, m, min_seconds, false);
        }
      }
      continue;
    }
    for (const Case& c : cases) {
      for (size_t m : ms) {
        for (WeightFormat f : formats) {
          if (wanted(f)) RunCase(team, floor_gbs, f, c, m, min_seconds);
        }
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace lfmvox

int main(int argc, char** argv) { return lfmvox::Main(argc, argv); }
