#include "threading/stage_policy.h"

#include <algorithm>
#include <atomic>

#include "threading/now.h"

namespace lfmvox {

namespace {

// Median of v[0, n) (n ≥ 1), sorting in place; n is at most kMaxProbeCalls.
double Median(double* v, uint32_t n) {
  std::sort(v, v + n);
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::atomic<bool> g_enabled{true};

}  // namespace

AdaptiveMode::AdaptiveMode(const Options& options) : opt_(options) {
  opt_.probe_calls = std::clamp<uint32_t>(opt_.probe_calls, 1, kMaxProbeCalls);
  opt_.min_period = std::max<uint32_t>(opt_.min_period, 1);
  opt_.max_period = std::max(opt_.max_period, opt_.min_period);
  period_ = opt_.min_period;
  // The first probe comes after first_probe steady calls.
  calls_ = period_ > opt_.first_probe ? period_ - opt_.first_probe : 0;
}

bool AdaptiveMode::NextInline() {
  if (probe_index_ < 0 && calls_ >= period_) StartProbe();
  // A probe alternates other, best, other, best, ...: call 2i is the other mode's i-th.
  pending_inline_ = probe_index_ >= 0 ? (probe_index_ % 2 == 0) != best_inline_ : best_inline_;
  return pending_inline_;
}

void AdaptiveMode::Record(int64_t ns, double work) {
  const double t = static_cast<double>(ns) / (work > 0 ? work : 1.0);
  if (probe_index_ >= 0) {
    const uint32_t i = static_cast<uint32_t>(probe_index_);
    (i % 2 == 0 ? other_t_ : best_t_)[i / 2] = t;
    if (++probe_index_ == static_cast<int>(2 * opt_.probe_calls)) FinishProbe();
    return;
  }
  ++calls_;
  if (ref_ > 0 && (t > ref_ * (1 + opt_.drift) || t * (1 + opt_.drift) < ref_)) {
    if (++drift_run_ >= opt_.drift_calls) StartProbe();
  } else {
    drift_run_ = 0;
  }
}

void AdaptiveMode::StartProbe() {
  probe_index_ = 0;
  drift_run_ = 0;
}

void AdaptiveMode::FinishProbe() {
  const double best = Median(best_t_.data(), opt_.probe_calls);
  const double other = Median(other_t_.data(), opt_.probe_calls);
  ++probes_;
  probe_index_ = -1;
  calls_ = 0;
  if (other < best * (1 - opt_.switch_margin)) {
    best_inline_ = !best_inline_;
    ++switches_;
    period_ = opt_.min_period;
    ref_ = other;
  } else {
    period_ = std::min(2 * period_, opt_.max_period);
    ref_ = best;
  }
}

void StageTimer::set_enabled(bool on) { g_enabled.store(on, std::memory_order_relaxed); }
bool StageTimer::enabled() { return g_enabled.load(std::memory_order_relaxed); }

StageTimer::StageTimer(AdaptiveMode& mode, ThreadTeam& team, double work) : work_(work) {
  if (team.size() == 1 || team.forced_inline() || !enabled()) return;
  mode_ = &mode;
  inline_ = mode.NextInline();
  if (inline_) scope_.emplace(team);
  t0_ = NowNs();
}

StageTimer::~StageTimer() {
  if (mode_ == nullptr) return;
  const int64_t ns = NowNs() - t0_;
  scope_.reset();
  mode_->Record(ns, work_);
}

}  // namespace lfmvox
