// Wall-clock milliseconds on the steady clock, and the bookkeeping of the stage timings a generation
// reports (StageTimings, include/lfmvox/types.h).
#pragma once

#include <chrono>
#include <cstddef>

#include "lfmvox/types.h"

namespace lfmvox {

inline double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Charges one backbone pass that fed `rows` of a sequence's positions: prefill when it fed more than one,
// a decode step otherwise.
inline void ChargeBackbonePass(StageTimings& t, size_t rows, double ms) {
  if (rows > 1) {
    t.prefill_ms += ms;
    t.prefill_positions += static_cast<int>(rows);
  } else {
    t.backbone_step_ms += ms;
    ++t.backbone_steps;
  }
}

}  // namespace lfmvox
