// Per-stage choice between running a team's work in parallel or inline.
//
// ThreadTeam alone cannot see one cost of going parallel on a loaded machine:
// with one core of two held by another process, the caller may share that
// core, so the serial code between dispatches runs at half speed while the
// worker idles on the free one. Only the stage's total wall time shows it.
// So the owner of a stage (a session, a scratch object: one AdaptiveMode per
// stage kind per object) wraps each call in a StageTimer, which
//  - asks its AdaptiveMode whether this call runs in parallel or inline (a
//    ThreadTeam::ScopedInline for the call's duration),
//  - times the call and feeds the time per unit of work (frames, rows: the
//    caller's measure, so calls of different sizes compare) back to it.
// AdaptiveMode keeps the faster mode, and probes the other one every
// `period` calls: probe_calls calls each way, interleaved (other, current,
// other, ...), so both modes are measured under the same conditions; the
// medians decide. A mode that keeps winning doubles the period (up to
// max_period); a switch resets it. A run of calls whose time drifts far from
// the winner's median (a competitor came or went) probes early.
//
// Results never depend on the choice: every task of a team runs exactly once
// whatever the split, and kernels give the same output for any split. No
// allocation; not thread-safe (one owner, like the stage's state).
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "threading/thread_team.h"

namespace lfmvox {

class AdaptiveMode {
 public:
  struct Options {
    uint32_t first_probe = 4;   // calls before the first probe (warm-up)
    uint32_t min_period = 32;   // calls between probes after a switch
    uint32_t max_period = 512;  // the longest period, after repeated wins
    uint32_t probe_calls = 3;   // calls in each mode per probe (at most kMaxProbeCalls)
    // The other mode must be this much faster (a fraction of the current
    // mode's median) to take over: ties keep the current mode.
    double switch_margin = 0.03;
    // drift_calls calls in a row more than `drift` away (as a fraction) from
    // the winner's median at the last probe start a probe at once.
    double drift = 0.3;
    uint32_t drift_calls = 4;
  };
  static constexpr uint32_t kMaxProbeCalls = 8;

  AdaptiveMode() : AdaptiveMode(Options{}) {}
  explicit AdaptiveMode(const Options& options);

  // The mode of the next call: true for inline. Call Record with its time
  // before asking again.
  bool NextInline();
  // The call NextInline answered for took `ns` nanoseconds for `work` units
  // (> 0; a non-positive work counts as 1).
  void Record(int64_t ns, double work);

  // The mode that won the last probe (parallel before any).
  bool prefers_inline() const { return best_inline_; }
  uint32_t period() const { return period_; }
  uint64_t probes() const { return probes_; }  // finished probes
  uint64_t switches() const { return switches_; }
  bool probing() const { return probe_index_ >= 0; }

 private:
  void StartProbe();
  void FinishProbe();

  Options opt_;
  bool best_inline_ = false;
  bool pending_inline_ = false;  // what NextInline answered
  uint32_t period_ = 0;
  uint32_t calls_ = 0;      // steady calls since the last probe
  uint32_t drift_run_ = 0;  // consecutive steady calls outside the drift band
  double ref_ = 0;          // the winner's median per unit at the last probe; 0: none
  int probe_index_ = -1;    // the call of the probe being run; -1: not probing
  std::array<double, kMaxProbeCalls> best_t_{}, other_t_{};
  uint64_t probes_ = 0, switches_ = 0;
};

// RAII: one call of a stage, run in the mode `mode` picks and timed for it.
// Inactive (runs in the team's own way, records nothing) when the team has one
// thread or is already forced inline by an enclosing scope, so nested stages
// do not time calls they cannot choose for.
class StageTimer {
 public:
  // Process-wide switch (default on): off, every StageTimer is inactive, as
  // before this policy existed. For benchmarks comparing the two.
  static void set_enabled(bool on);
  static bool enabled();

  StageTimer(AdaptiveMode& mode, ThreadTeam& team, double work = 1.0);
  ~StageTimer();
  StageTimer(const StageTimer&) = delete;
  StageTimer& operator=(const StageTimer&) = delete;
  bool runs_inline() const { return inline_; }

 private:
  AdaptiveMode* mode_ = nullptr;  // null: inactive
  double work_ = 1.0;
  bool inline_ = false;
  std::optional<ThreadTeam::ScopedInline> scope_;
  int64_t t0_ = 0;
};

}  // namespace lfmvox
