// Small helpers every benchmark uses: a monotonic clock and what machine it runs on.
#pragma once

#include <chrono>
#include <fstream>
#include <string>

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

}  // namespace lfmvox::bench
