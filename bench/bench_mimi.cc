// Mimi decoder benchmark at the real size (src/codecs/mimi): streaming, 1 and 2 threads, one or several
// 80 ms frames per call. One JSON line per configuration:
//   ms_per_frame (mean, p50, p99 over the calls), x_real_time = 80 ms ÷ ms_per_frame,
//   gflop_per_frame (2 × the multiply-adds of MimiDecoder::macs_per_frame, attention at full context),
//   matmul_peak_gflops: the best rate ops::MatMul reaches on an in-cache f32 product with this team
//   (this build's practical FMA ceiling), compute_floor_ms = FLOPs ÷ that peak, fma_peak_gflops the core's
//   own (24 FMA chains in registers, 1 thread; 0 without AVX-512) and fma_floor_ms = FLOPs ÷ it (per thread),
//   weight_mb_per_call and bandwidth_floor_ms = weight bytes ÷ measured DRAM read bandwidth,
//   cpu_ms_per_frame: the process's CPU time over the timed calls (all threads, spinning included), which
//   on a shared, loaded machine says more than the wall clock about the code itself.
//   bench_mimi [--model PATH] [--frames N] [--per-call 1,4] [--threads 1,2]
// Without --model it uses ../shared/oracle/mimi_real when present, else writes a random real-size
// checkpoint (bf16, as the oracle) to a temp folder.
#include <time.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bench_util.h"
#include "codecs/mimi/mimi_decoder.h"
#include "ops/ops.h"
#include "threading/thread_team.h"
#include "tools/mimi_checkpoint_gen.h"

using namespace lfmvox;

namespace {

// GFLOP/s of ops::MatMul on X [384, 512] · W [256, 512]ᵀ (f32, 0.5 MiB of W: L2-resident), best of 5.
double MatMulPeak(ThreadTeam& team) {
  const size_t m = 384, n = 256, k = 512;
  std::vector<float> x(m * k, 0.5f), w(n * k, 0.25f), y(m * n);
  const ops::Weight wv = ops::Weight::Dense(WeightFormat::kF32, w.data(), n, k, k);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const double t0 = bench::Now();
    for (int i = 0; i < 20; ++i) ops::MatMul(x.data(), m, k, wv, nullptr, y.data(), n, team);
    best = std::max(best, 20.0 * 2.0 * m * n * k / (bench::Now() - t0));
  }
  return best / 1e9;
}

// The core's own f32 FMA ceiling: GFLOP/s of 24 independent zmm FMA chains in registers, one thread
// (bench_bf16_probe's probe; 0 where the CPU has no AVX-512). matmul_peak_gflops is what ops::MatMul
// reaches, this is what the hardware does.
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f"), noinline)) float FmaChains(long iters) {
  __m512 a[24];
  for (int i = 0; i < 24; ++i) a[i] = _mm512_set1_ps(static_cast<float>(i));
  __m512 x = _mm512_set1_ps(1.0f), y = _mm512_setzero_ps();
  asm("" : "+v"(x), "+v"(y));
  for (long i = 0; i < iters; ++i) {
#pragma GCC unroll 24
    for (int j = 0; j < 24; ++j) a[j] = _mm512_fmadd_ps(x, y, a[j]);
  }
  __m512 s = a[0];
  for (int i = 1; i < 24; ++i) s = _mm512_add_ps(s, a[i]);
  float out[16];
  _mm512_storeu_ps(out, s);
  return out[0];
}
double FmaPeakGflops() {
  if (!__builtin_cpu_supports("avx512f")) return 0;
  const long iters = 2000000;
  double best = 1e30;
  volatile float sink = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const double t0 = bench::Now();
    sink = sink + FmaChains(iters);
    best = std::min(best, bench::Now() - t0);
  }
  return 24.0 * 16 * 2 * static_cast<double>(iters) / best / 1e9;
}
#else
double FmaPeakGflops() { return 0; }
#endif

double ProcessCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Time between successive trace boundaries, summed per boundary name: where a frame's time goes.
class StageTimer : public TraceSink {
 public:
  void Start() { last_ = bench::Now(); }
  void Record(std::string_view name, const float*, size_t, size_t, size_t) override {
    const double t = bench::Now();
    for (auto& [n, s] : acc_) {
      if (n == name) {
        s += t - last_;
        last_ = t;
        return;
      }
    }
    acc_.emplace_back(std::string(name), t - last_);
    last_ = t;
  }
  void Stop() { Record("rest (last conv)", nullptr, 0, 0, 0); }
  std::vector<std::pair<std::string, double>> acc_;

 private:
  double last_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  std::string model_path;
  int frames = 100;
  std::vector<std::string> per_call = {"1", "4"}, thread_list = {"1", "2"};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--model")
      model_path = argv[i + 1];
    else if (k == "--frames")
      frames = std::max(10, std::atoi(argv[i + 1]));
    else if (k == "--per-call")
      per_call = bench::SplitList(argv[i + 1]);
    else if (k == "--threads")
      thread_list = bench::SplitList(argv[i + 1]);
  }
  if (model_path.empty()) {
    const std::string oracle = std::string(LFMVOX_SOURCE_DIR) + "/../shared/oracle/mimi_real";
    if (std::filesystem::exists(oracle + "/model.safetensors")) {
      model_path = oracle;
    } else {
      model_path = (std::filesystem::temp_directory_path() / "lfmvox_bench_mimi").string();
      if (!std::filesystem::exists(model_path + "/model.safetensors")) {
        std::fprintf(stderr, "writing a random real-size Mimi decoder to %s ...\n", model_path.c_str());
        tools::MimiShape s;
        s.bf16 = true;
        if (Status st = tools::WriteRandomMimi(model_path, s); !st.ok()) {
          std::fprintf(stderr, "%s\n", st.ToString().c_str());
          return 1;
        }
      }
    }
  }
  auto model = MimiDecoder::Load(model_path);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().ToString().c_str());
    return 1;
  }
  const MimiDecoder& m = **model;
  const size_t C = m.codebooks(), spf = m.samples_per_frame();
  const double frame_ms = 1e3 * static_cast<double>(spf) / m.config().sample_rate;
  const double flops = 2.0 * m.macs_per_frame();
  std::vector<int32_t> codes(static_cast<size_t>(frames) * C);
  uint64_t r = 12345;
  for (auto& x : codes) {
    r = r * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<int32_t>((r >> 33) % m.codebook_size());
  }
  for (const std::string& ts : thread_list) {
    const int threads = std::max(1, std::atoi(ts.c_str()));
    ThreadTeam team(threads);
    const double peak = MatMulPeak(team), fma_peak = FmaPeakGflops();
    const double bw = bench::MeasureReadBandwidth(team);
    for (const std::string& ps : per_call) {
      const size_t fpc = std::max(1, std::atoi(ps.c_str()));
      auto s = MimiSession::Create(m, fpc, threads);
      if (!s.ok()) {
        std::fprintf(stderr, "%s\n", s.status().ToString().c_str());
        return 1;
      }
      std::vector<float> pcm(fpc * spf);
      std::vector<double> per_frame;
      const size_t calls = static_cast<size_t>(frames) / fpc;
      for (size_t warm = 0; warm < 2; ++warm) (void)(*s)->Step(std::span(codes).first(fpc * C), pcm, team);
      (*s)->Reset();
      const double t_all = bench::Now(), cpu0 = ProcessCpuSeconds();
      for (size_t i = 0; i < calls; ++i) {
        const double t0 = bench::Now();
        Result<size_t> n = (*s)->Step(std::span(codes).subspan(i * fpc * C, fpc * C), pcm, team);
        if (!n.ok()) {
          std::fprintf(stderr, "%s\n", n.status().ToString().c_str());
          return 1;
        }
        per_frame.push_back((bench::Now() - t0) * 1e3 / static_cast<double>(fpc));
      }
      const double mean = (bench::Now() - t_all) * 1e3 / static_cast<double>(calls * fpc);
      const double cpu_ms = (ProcessCpuSeconds() - cpu0) * 1e3 / static_cast<double>(calls * fpc);
      std::sort(per_frame.begin(), per_frame.end());
      const double p50 = per_frame[per_frame.size() / 2], p99 = per_frame[per_frame.size() * 99 / 100];
      const double wbytes = static_cast<double>(m.weight_bytes());
      std::printf(
          "{\"bench\":\"mimi\",\"cpu\":\"%s\",\"simd\":\"%s\",\"threads\":%d,\"frames_per_call\":%zu,"
          "\"frames\":%zu,"
          "\"ms_per_frame\":%.3f,\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"x_real_time\":%.2f,\"gflop_per_frame\":%."
          "3f,"
          "\"gflops\":%.1f,\"matmul_peak_gflops\":%.1f,\"fma_peak_gflops\":%.1f,\"compute_floor_ms\":%.3f,"
          "\"fma_floor_ms\":%.3f,\"weight_mb_per_call\":%.1f,"
          "\"dram_gbps\":%.1f,\"bandwidth_floor_ms\":%.3f,\"cpu_ms_per_frame\":%.3f,\"load\":%.2f}\n",
          bench::CpuModel().c_str(), ops::ChosenTarget(), threads, fpc, calls * fpc, mean, p50, p99,
          frame_ms / mean, flops / 1e9, flops / (mean * 1e-3) / 1e9, peak, fma_peak,
          flops / (peak * 1e9) * 1e3, fma_peak > 0 ? flops / (fma_peak * 1e9) * 1e3 : 0.0, wbytes / 1e6,
          bw / 1e9, wbytes / bw * 1e3 / static_cast<double>(fpc), cpu_ms, bench::LoadAverage());
      std::fflush(stdout);
      {  // where the time goes, per frame (the boundaries cost one call each)
        StageTimer timer;
        (*s)->Reset();
        for (size_t i = 0; i < calls; ++i) {
          timer.Start();
          (void)(*s)->Step(std::span(codes).subspan(i * fpc * C, fpc * C), pcm, team, &timer);
          timer.Stop();
        }
        std::printf("{\"bench\":\"mimi_stages\",\"threads\":%d,\"frames_per_call\":%zu", threads, fpc);
        for (const auto& [n, t] : timer.acc_)
          std::printf(",\"%s_ms\":%.3f", n.c_str(), t * 1e3 / static_cast<double>(calls * fpc));
        std::printf("}\n");
      }
    }
  }
  return 0;
}
