// The steady clock in nanoseconds: what the team's spin budget and the stage timers measure with.
#pragma once

#include <chrono>
#include <cstdint>

namespace lfmvox {

inline int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace lfmvox
