// Small helpers every benchmark uses: a monotonic clock and what machine it runs on.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/aligned.h"
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

// DRAM read bandwidth with the team's threads, bytes/s: the best of 3 sums
// over a 1 GiB buffer (far beyond any L3), split as the kernels split work.
// 16-byte vector loads (SSE2, every x86-64) into 4 independent sums: the
// scalar loop under-read, one Zen 3 core 8.2 GB/s against 9.6 with these.
inline double MeasureReadBandwidth(ThreadTeam& team) {
  using V2 = uint64_t __attribute__((vector_size(16)));
  constexpr size_t kBytes = size_t{1} << 30, kVecs = kBytes / sizeof(V2);
  static AlignedBuffer<uint64_t> buf;
  if (buf.size() != kBytes / sizeof(uint64_t)) {
    buf.Reset(kBytes / sizeof(uint64_t));
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = i;
  }
  std::vector<uint64_t> sums(static_cast<size_t>(team.size()) * 4, 0);
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const double t0 = Now();
    const size_t tasks = static_cast<size_t>(team.size()) * 4, per = kVecs / tasks;
    team.Run(tasks, [&](size_t t, int) {
      V2 a0 = {0, 0}, a1 = a0, a2 = a0, a3 = a0;
      const V2* p = reinterpret_cast<const V2*>(buf.data()) + t * per;
      for (size_t i = 0; i + 4 <= per; i += 4) {
        a0 += p[i];
        a1 += p[i + 1];
        a2 += p[i + 2];
        a3 += p[i + 3];
      }
      const V2 a = a0 + a1 + a2 + a3;
      sums[t % sums.size()] += a[0] + a[1];
    });
    best = std::max(best, kBytes / (Now() - t0));
  }
  volatile uint64_t sink = sums[0];
  (void)sink;
  return best;
}

// The same with a team of `threads` made for the measurement, in GB/s: for benchmarks whose engine
// owns its own team (a Conversation, the server).
inline double MeasureReadGBs(int threads) {
  ThreadTeam team(threads);
  return MeasureReadBandwidth(team) * 1e-9;
}

}  // namespace lfmvox::bench
