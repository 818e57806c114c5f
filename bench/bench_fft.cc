// How the detokenizer's FFT was chosen: µs per 1280-point inverse real FFT for
// lfmvox's RealFft, kissfft (if found at configure time) and an O(n²) DFT,
// plus the rest of one iSTFT frame (polar conversion, whole Step).
//
//   bench_fft            # prints a table; single thread
//
// Each number is the best of 15 timed runs (~20 ms each) of the mean µs per
// call: on a shared machine other work only adds time, so the minimum is the
// steadiest estimate of the cost itself. The median is printed next to it.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numbers>
#include <random>
#include <vector>

#include "dsp/fft.h"
#include "dsp/istft.h"
#include "dsp/polar.h"

#if LFMVOX_HAVE_KISSFFT
#include <kiss_fftr.h>
#endif

namespace {

volatile float g_sink;  // keeps results observable

struct Timing {
  double best;    // µs per call, fastest run
  double median;  // µs per call, median run
};

template <typename F>
Timing MicrosPerCall(F&& fn) {
  using Clock = std::chrono::steady_clock;
  size_t iters = 1;
  for (;;) {  // calibrate to ~20 ms per run
    const auto t0 = Clock::now();
    for (size_t i = 0; i < iters; ++i) fn();
    if (Clock::now() - t0 > std::chrono::milliseconds(20)) break;
    iters *= 2;
  }
  std::vector<double> runs;
  for (int r = 0; r < 15; ++r) {
    const auto t0 = Clock::now();
    for (size_t i = 0; i < iters; ++i) fn();
    runs.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iters);
  }
  std::sort(runs.begin(), runs.end());
  return {runs.front(), runs[runs.size() / 2]};
}

void Row(const char* name, Timing t, double ours = 0) {
  if (ours > 0) {
    std::printf("%-40s %9.3f %9.3f %8.2f\n", name, t.best, t.median, t.best / ours);
  } else {
    std::printf("%-40s %9.3f %9.3f\n", name, t.best, t.median);
  }
}

std::vector<float> Uniform(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// O(n²) irfft in float with a cos/sin table: the baseline.
struct NaiveIrfft {
  explicit NaiveIrfft(size_t n) : n(n), c(n), s(n) {
    for (size_t i = 0; i < n; ++i) {
      c[i] = static_cast<float>(std::cos(2.0 * std::numbers::pi * i / n));
      s[i] = static_cast<float>(std::sin(2.0 * std::numbers::pi * i / n));
    }
  }
  void Run(const float* re, const float* im, float* out) const {
    const size_t m = n / 2;
    for (size_t j = 0; j < n; ++j) {
      float acc = re[0] + ((j % 2) ? -re[m] : re[m]);
      for (size_t k = 1, i = j; k < m; ++k, i = (i + j) % n) acc += 2.0f * (re[k] * c[i] - im[k] * s[i]);
      out[j] = acc / static_cast<float>(n);
    }
  }
  size_t n;
  std::vector<float> c, s;
};

}  // namespace

int main() {
  using lfmvox::dsp::RealFft;
  constexpr size_t n = 1280, bins = n / 2 + 1;
  auto plan = RealFft::Create(n);
  if (!plan.ok()) {
    std::fprintf(stderr, "%s\n", plan.status().ToString().c_str());
    return 1;
  }
  const std::vector<float> re = Uniform(bins, -1, 1, 1), im = Uniform(bins, -1, 1, 2);
  const std::vector<float> x = Uniform(n, -1, 1, 3);
  std::vector<float> out(n), fre(bins), fim(bins);

  std::printf("%-40s %9s %9s %8s\n", "1280-point real FFT, single thread", "best us", "median", "vs ours");
  const Timing ours_inv = MicrosPerCall([&] {
    plan->Inverse(re.data(), im.data(), out.data());
    g_sink = out[7];
  });
  const Timing ours_fwd = MicrosPerCall([&] {
    plan->Forward(x.data(), fre.data(), fim.data());
    g_sink = fre[7];
  });
  Row("lfmvox RealFft::Inverse", ours_inv, ours_inv.best);
  Row("lfmvox RealFft::Forward", ours_fwd, ours_fwd.best);

#if LFMVOX_HAVE_KISSFFT
  {
    // kissfft's inverse is unnormalised; the 1/n pass is left out, which
    // favours kissfft slightly. Ratios are against our transform of the same
    // direction.
    kiss_fftr_cfg inv = kiss_fftr_alloc(static_cast<int>(n), 1, nullptr, nullptr);
    kiss_fftr_cfg fwd = kiss_fftr_alloc(static_cast<int>(n), 0, nullptr, nullptr);
    std::vector<kiss_fft_cpx> spec(bins), spec_out(bins);
    for (size_t k = 0; k < bins; ++k) spec[k] = {re[k], im[k]};
    Row("kissfft kiss_fftri (no 1/n scaling)", MicrosPerCall([&] {
          kiss_fftri(inv, spec.data(), out.data());
          g_sink = out[7];
        }),
        ours_inv.best);
    Row("kissfft kiss_fftr (forward)", MicrosPerCall([&] {
          kiss_fftr(fwd, x.data(), spec_out.data());
          g_sink = spec_out[7].r;
        }),
        ours_fwd.best);
    kiss_fftr_free(inv);
    kiss_fftr_free(fwd);
  }
#else
  std::printf("%-40s not found at configure time\n", "kissfft");
#endif

  const NaiveIrfft naive(n);
  Row("naive O(n^2) inverse DFT", MicrosPerCall([&] {
        naive.Run(re.data(), im.data(), out.data());
        g_sink = out[7];
      }),
      ours_inv.best);

  // The rest of one spectral frame of the detokenizer's iSTFT.
  const std::vector<float> log_mag = Uniform(bins, -4, 5, 4), phase = Uniform(bins, -4, 4, 5);
  std::vector<float> sre(bins), sim(bins);
  std::printf("\n%-40s %9s %9s\n", "one spectral frame (641 bins)", "best us", "median");
  Row("PolarToRect (Highway exp/sin/cos)", MicrosPerCall([&] {
        lfmvox::dsp::PolarToRect(log_mag.data(), phase.data(), bins, sre.data(), sim.data());
        g_sink = sre[7];
      }));
  Row("PolarToRectRef (libm)", MicrosPerCall([&] {
        lfmvox::dsp::PolarToRectRef(log_mag.data(), phase.data(), bins, sre.data(), sim.data());
        g_sink = sre[7];
      }));
  lfmvox::dsp::StreamingIstft istft;
  std::vector<float> window(n);
  for (size_t i = 0; i < n; ++i)
    window[i] = static_cast<float>(0.5 - 0.5 * std::cos(2.0 * std::numbers::pi * i / n));
  if (!istft.Init(n, 320, window).ok()) return 1;
  std::vector<float> pcm(istft.max_output());
  const Timing push = MicrosPerCall([&] {
    istft.Step(log_mag.data(), phase.data(), pcm.data());
    g_sink = pcm[7];
  });
  Row("StreamingIstft::Step (all of it)", push);
  std::printf("(Step: %.0fx real time; a frame is 320 samples = 13.3 ms at 24 kHz)\n",
              320.0 / 24000.0 * 1e6 / push.best);
  return 0;
}
