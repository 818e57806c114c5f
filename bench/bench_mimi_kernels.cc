// The kernels of Mimi's decoder (src/codecs/mimi) at its shapes, one core by default.
// ops::PackedMatMul: its transformer's products and
// its SEANet convolutions as PackedMatMul sees them (m output rows, n = out (· stride), k = taps · in,
// X rows `in` apart, so that consecutive rows overlap as a convolution window does), bf16 weights
// (as the checkpoint). One JSON line per shape: best and median µs over the repeats, GFLOP/s at the best,
// with W hot (in L2) and cold (cycling through 64 MB of copies), GB/s of W read at the cold best.
// ops::AttendOne: one call's attention at a full context (8 heads × 8 queries of 249 keys, 64 wide, rows of
// 512 as Mimi's K/V), hot (one layer's K/V) and cold (8 layers' K/V cycled, as a call reads them).
// ops::Elu over [7680, 64] (the last stage's input at 4 frames a call).
//   bench_mimi_kernels [--reps N] [--threads 1]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_util.h"
#include "ops/nn_ops.h"
#include "ops/ops.h"
#include "threading/thread_team.h"

using namespace lfmvox;

namespace {
struct Shape {
  const char* name;
  size_t m, n, k, ldx;
};
}  // namespace

int main(int argc, char** argv) {
  int reps = 30, threads = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--reps") reps = std::max(3, std::atoi(argv[i + 1]));
    if (a == "--threads") threads = std::max(1, std::atoi(argv[i + 1]));
  }
  // 4 frames a call: 8 latent steps.
  const Shape shapes[] = {
      {"tf_in_proj_m8", 8, 1536, 512, 512},      {"tf_linear1_m8", 8, 2048, 512, 512},
      {"tf_linear2_m8", 8, 512, 2048, 2048},     {"tf_in_proj_m2", 2, 1536, 512, 512},
      {"model0_m8", 8, 1024, 3584, 512},         {"model2_m8", 8, 4096, 2048, 1024},
      {"model3_res1_m64", 64, 256, 1536, 512},   {"model3_res2_m64", 64, 512, 256, 256},
      {"model5_m64", 64, 1536, 1024, 512},       {"model6_res1_m384", 384, 128, 768, 256},
      {"model6_res2_m384", 384, 256, 128, 128},  {"model8_m384", 384, 640, 512, 256},
      {"model9_res1_m1920", 1920, 64, 384, 128}, {"model9_res2_m1920", 1920, 128, 64, 64},
      {"model11_m1920", 1920, 256, 256, 128},    {"model12_res1_m7680", 7680, 32, 192, 64},
      {"model12_res2_m7680", 7680, 64, 32, 32},  {"model14_m7680", 7680, 1, 192, 64},
  };
  ThreadTeam team(threads);
  for (const Shape& s : shapes) {
    std::vector<uint16_t> w(s.n * s.k);
    uint32_t r = 1;
    for (auto& v : w) {
      r = r * 1664525u + 1013904223u;
      v = static_cast<uint16_t>(0x3c00 + ((r >> 16) & 0xff));  // bf16 in [0.0078, 0.0156)
    }
    // Hot: one weight, in L2 after the first call. Cold: copies cycled through, 64 MB in all (the Mimi
    // decoder reads 80 MB of weights a call, from L3 or DRAM).
    const ops::PackedWeight pw =
        ops::PackWeight(ops::Weight::Dense(WeightFormat::kBF16, w.data(), s.n, s.k, s.k));
    std::vector<ops::PackedWeight> cold;
    for (size_t b = 0; b < (64u << 20); b += pw.bytes())
      cold.push_back(ops::PackWeight(ops::Weight::Dense(WeightFormat::kBF16, w.data(), s.n, s.k, s.k)));
    std::vector<float> x((s.m - 1) * s.ldx + s.k, 0.5f), bias(s.n, 0.1f), y(s.m * s.n);
    std::vector<double> us, cold_us;
    for (int i = 0; i < reps; ++i) {
      const double t0 = bench::Now();
      ops::PackedMatMul(x.data(), s.m, s.ldx, pw, bias.data(), y.data(), s.n, team);
      us.push_back((bench::Now() - t0) * 1e6);
    }
    for (int i = 0; i < reps; ++i) {
      const double t0 = bench::Now();
      ops::PackedMatMul(x.data(), s.m, s.ldx, cold[i % cold.size()], bias.data(), y.data(), s.n, team);
      cold_us.push_back((bench::Now() - t0) * 1e6);
    }
    std::sort(us.begin(), us.end());
    std::sort(cold_us.begin(), cold_us.end());
    std::printf(
        "{\"bench\":\"packed_matmul\",\"simd\":\"%s\",\"threads\":%d,\"shape\":\"%s\",\"m\":%zu,\"n\":%zu,"
        "\"k\":%zu,\"best_us\":%.1f,\"median_us\":%.1f,\"gflops\":%.1f,\"cold_best_us\":%.1f,"
        "\"cold_median_us\":%.1f,\"cold_gbps\":%.1f,\"load\":%.2f}\n",
        ops::ChosenTarget(), threads, s.name, s.m, s.n, s.k, us[0], us[us.size() / 2],
        2.0 * s.m * s.n * s.k / (us[0] * 1e3), cold_us[0], cold_us[cold_us.size() / 2],
        static_cast<double>(pw.bytes()) / (cold_us[0] * 1e3), bench::LoadAverage());
  }
  {
    const size_t H = 512, hd = 64, heads = 8, queries = 8, keys = 249, layers = 8;
    std::vector<float> kv(2 * layers * keys * H), q(queries * H), scores(keys), out(H);
    uint32_t r = 7;
    for (auto& v : kv) {
      r = r * 1664525u + 1013904223u;
      v = static_cast<float>(r >> 8) * (1.0f / 16777216.0f) - 0.5f;
    }
    for (size_t i = 0; i < q.size(); ++i) q[i] = kv[i];
    auto call = [&](size_t layer) {
      const float* k = kv.data() + 2 * layer * keys * H;
      const float* v = k + keys * H;
      for (size_t h = 0; h < heads; ++h)
        for (size_t i = 0; i < queries; ++i)
          ops::AttendOne(q.data() + i * H + h * hd, k + h * hd, H, v + h * hd, H, keys, hd, 0.125f,
                         scores.data(), out.data());
    };
    std::vector<double> us, cold_us;
    for (int i = 0; i < reps; ++i) {
      const double t0 = bench::Now();
      call(0);
      us.push_back((bench::Now() - t0) * 1e6);
    }
    for (int i = 0; i < reps; ++i) {
      const double t0 = bench::Now();
      call(static_cast<size_t>(i) % layers);
      cold_us.push_back((bench::Now() - t0) * 1e6);
    }
    std::sort(us.begin(), us.end());
    std::sort(cold_us.begin(), cold_us.end());
    std::printf(
        "{\"bench\":\"attend_one\",\"simd\":\"%s\",\"shape\":\"8 heads x 8 queries x 249 keys x 64\","
        "\"best_us\":%.1f,\"median_us\":%.1f,\"cold_best_us\":%.1f,\"cold_median_us\":%.1f,\"load\":%.2f}\n",
        ops::ChosenTarget(), us[0], us[us.size() / 2], cold_us[0], cold_us[cold_us.size() / 2],
        bench::LoadAverage());
  }
  {  // ops::Elu over the last stage's input at 4 frames a call: [7680, 64], in L2-sized pieces as the decoder
    const size_t n = 7680 * 64;
    std::vector<float> x(n), y(n);
    uint32_t r = 3;
    for (auto& v : x) {
      r = r * 1664525u + 1013904223u;
      v = static_cast<float>(r >> 8) * (4.0f / 16777216.0f) - 2.0f;
    }
    std::vector<double> us;
    for (int i = 0; i < reps; ++i) {
      const double t0 = bench::Now();
      ops::Elu(x.data(), y.data(), n);
      us.push_back((bench::Now() - t0) * 1e6);
    }
    std::sort(us.begin(), us.end());
    std::printf(
        "{\"bench\":\"elu\",\"simd\":\"%s\",\"n\":%zu,\"best_us\":%.1f,\"median_us\":%.1f,"
        "\"ns_per_value\":%.3f,\"load\":%.2f}\n",
        ops::ChosenTarget(), n, us[0], us[us.size() / 2], us[0] * 1e3 / static_cast<double>(n),
        bench::LoadAverage());
  }
  return 0;
}
