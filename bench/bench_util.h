// Small helpers every benchmark uses: a monotonic clock and what machine it runs on.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/aligned.h"
#include "ops/matmul_kernels.h"  // internal::AmxGranted, Set…AmxForTest
#include "ops/ops.h"
#include "threading/thread_team.h"

namespace lfmvox::bench {

// Seconds on the steady clock.
inline double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// /proc/cpuinfo's first "model name", or "unknown".
inline std::string CpuModel() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown";
}

// The 1-minute load average (other processes competing for the cores), or -1.
inline double LoadAverage() {
  std::ifstream f("/proc/loadavg");
  double one = -1;
  f >> one;
  return one;
}

// What a model path holds, for the "format" key: the quantization suffix of a
// GGUF release ("Q4_0" from LFM2.5-Audio-1.5B-Q4_0.gguf), else "BF16" (a
// Hugging Face snapshot as released).
inline std::string ModelFormat(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path file(path);
  if (fs::is_directory(file, ec)) {
    file.clear();
    for (const auto& e : fs::directory_iterator(path, ec)) {
      if (e.path().extension() == ".gguf" && e.path().filename().string().rfind("LFM2", 0) == 0)
        file = e.path();
    }
    if (file.empty()) return "BF16";
  }
  const std::string stem = file.stem().string();
  const size_t dash = stem.rfind('-');
  return dash == std::string::npos ? stem : stem.substr(dash + 1);
}

// "1,2" → {"1", "2"}.
inline std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// DRAM read bandwidth with the team's threads, bytes/s: the best of 3 scans
// of a 1 GiB buffer (far beyond any L3), split as the kernels split work. The
// scan is ops::FindNonFinite over F32 (the buffer holds no NaN or inf, so it
// reads every byte): Highway's widest vectors on this CPU, four loads per test.
// The width matters: one Xeon (Emerald Rapids) core read 11.3 GB/s with
// 16-byte loads and 16.6 with 64-byte ones (its fill buffers hold lines, not
// loads), so the 16-byte probe this replaced set a floor ~1.45 times too low
// there (kernels at "1.4 of the floor"); on Zen 4 the two agreed.
inline double MeasureReadBandwidth(ThreadTeam& team) {
  constexpr size_t kBytes = size_t{1} << 30, kWords = kBytes / sizeof(uint32_t);
  static AlignedBuffer<uint32_t> buf;
  if (buf.size() != kWords) {
    buf.Reset(kWords);
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<uint32_t>(i & 0xFFFFFF);  // finite floats
  }
  const size_t tasks = static_cast<size_t>(team.size()) * 4, per = kWords / tasks;
  std::vector<size_t> found(tasks, 0);
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const double t0 = Now();
    team.Run(tasks,
             [&](size_t t, int) { found[t] = ops::FindNonFinite(DType::kF32, buf.data() + t * per, per); });
    best = std::max(best, static_cast<double>(per * tasks * sizeof(uint32_t)) / (Now() - t0));
  }
  volatile size_t sink = found[0];
  (void)sink;
  return best;
}

// The same with a team of `threads` made for the measurement, in GB/s: for benchmarks whose engine
// owns its own team (a Conversation, the server).
inline double MeasureReadGBs(int threads) {
  ThreadTeam team(threads);
  return MeasureReadBandwidth(team) * 1e-9;
}

// LFMVOX_BENCH_AMX=0 runs the kernels as on a CPU without AMX (no BF16 tiles made at load, Q8_0 /
// Q4_0 on the AVX-512 VNNI steps), so that one build compares the units; call it before loading a
// model. Returns whether AMX is in use (a benchmark's "amx" key).
inline bool ApplyAmxSetting() {
  if (const char* v = std::getenv("LFMVOX_BENCH_AMX"); v != nullptr && *v == '0') {
    ops::internal::SetTilesAmxForTest(false);
    ops::internal::SetQuantAmxForTest(false);
    return false;
  }
  const ops::internal::AmxUnits u = ops::internal::AmxGranted();
  return u.bf16 || u.int8;
}

}  // namespace lfmvox::bench
