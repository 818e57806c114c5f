// Wall-clock milliseconds on the steady clock, for the stage timings a generation reports (StageTimings).
#pragma once

#include <chrono>

namespace lfmvox {

inline double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace lfmvox
