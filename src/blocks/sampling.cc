#include "blocks/sampling.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "ops/ops.h"

namespace lfmvox {

namespace {

Status NonFiniteLogit(const float* row, size_t i) {
  return InvalidArgument(
      StrFormat("logit %zu is %s: the model's weights or its input produced non-finite values, so no "
                "token can be chosen; generation stopped (load the model with the weight check on, the "
                "default, to find a damaged tensor)",
                i, std::isnan(row[i]) ? "NaN" : "+inf"));
}

}  // namespace

Result<Sampler> Sampler::Create(const SamplingParams& p, size_t max_vocab) {
  if (!std::isfinite(p.temperature)) return InvalidArgument("sampling temperature must be a finite number");
  if (p.top_k < 0) {
    return InvalidArgument(StrFormat("sampling top_k = %d; use 0 for off or a positive count", p.top_k));
  }
  if (!(p.repetition_penalty > 0) || !std::isfinite(p.repetition_penalty)) {
    return InvalidArgument(StrFormat("repetition_penalty = %g; it must be a positive number (1 = off)",
                                     static_cast<double>(p.repetition_penalty)));
  }
  if (p.penalty_window < 0) return InvalidArgument("penalty_window must be >= 0");
  if (p.repetition_penalty != 1.0f && p.penalty_window == 0) {
    return InvalidArgument(
        "a repetition_penalty other than 1 needs penalty_window > 0 (the ids it looks at)");
  }
  if (max_vocab == 0 || max_vocab > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return InvalidArgument(StrFormat("a sampler vocabulary of %zu entries is not supported", max_vocab));
  }
  Sampler s;
  s.params_ = p;
  s.work_.Reset(max_vocab);
  if (!p.greedy()) {
    s.weight_.Reset(max_vocab);
    if (p.top_k > 0) s.select_.Reset(max_vocab);
  }
  if (p.repetition_penalty != 1.0f) s.seen_.Reset(max_vocab);
  return s;
}

Result<const float*> Sampler::Penalize(std::span<const float> logits, std::span<const int32_t> history) {
  const float pen = params_.repetition_penalty;
  if (pen == 1.0f) return logits.data();
  const size_t n = logits.size();
  const size_t window = std::min(history.size(), static_cast<size_t>(params_.penalty_window));
  const std::span<const int32_t> recent = history.last(window);
  for (int32_t id : recent) {
    if (id < 0 || static_cast<size_t>(id) >= n) {
      return OutOfRange(StrFormat("history id %d is outside the %zu logits", id, n));
    }
  }
  std::copy(logits.begin(), logits.end(), work_.data());
  for (int32_t id : recent) {
    uint8_t& mark = seen_[static_cast<size_t>(id)];
    if (mark) continue;  // presence, not frequency: each distinct id once
    mark = 1;
    float& v = work_[static_cast<size_t>(id)];
    v = v < 0 ? v * pen : v / pen;
  }
  for (int32_t id : recent) seen_[static_cast<size_t>(id)] = 0;
  return work_.data();
}

Result<int32_t> Sampler::Sample(std::span<const float> logits, Rng& rng, std::span<const int32_t> history) {
  const size_t n = logits.size();
  if (n == 0 || n > work_.size()) {
    return OutOfRange(StrFormat("%zu logits; this sampler takes 1 to %zu", n, work_.size()));
  }
  LFM_ASSIGN_OR_RETURN(const float* row, Penalize(logits, history));
  // NaN or +inf logits mean broken weights or input: refuse them rather than emit a token (greedy
  // ArgMax would skip a NaN and pick an arbitrary id, e.g. <|pad|> forever).
  if (const size_t bad = ops::FindNanOrPosInf(row, n); bad != n) return NonFiniteLogit(row, bad);
  if (params_.greedy()) return static_cast<int32_t>(ops::ArgMax(row, n));

  // Temperature, in f32 as torch's `logits /= temperature`; find the max.
  const float t = params_.temperature;
  float* x = work_.data();  // [n]
  float mx = -std::numeric_limits<float>::infinity();
  bool overflow = false;
  for (size_t i = 0; i < n; ++i) {
    const float v = row[i] / t;
    // A finite logit over a tiny positive temperature (1e-37) overflows: that is the t -> 0 limit, where
    // all the probability sits on the largest logit, so the draw is the greedy one.
    if (std::isfinite(row[i]) && v == std::numeric_limits<float>::infinity()) {
      overflow = true;
      continue;
    }
    x[i] = v;
    mx = std::max(mx, v);
  }
  if (overflow) return static_cast<int32_t>(ops::ArgMax(row, n));
  if (mx == -std::numeric_limits<float>::infinity()) {
    return InvalidArgument("every logit is -inf; nothing to sample");
  }

  // The k-th largest value is the keep threshold (nth_element does not allocate).
  float threshold = -std::numeric_limits<float>::infinity();
  const size_t k = static_cast<size_t>(params_.top_k);
  if (k > 0 && k < n) {
    float* sel = select_.data();  // [n]
    std::copy(x, x + n, sel);
    std::nth_element(sel, sel + (k - 1), sel + n, std::greater<float>());
    threshold = sel[k - 1];
  }

  double* w = weight_.data();  // [n]
  double total = 0;
  for (size_t i = 0; i < n; ++i) {
    w[i] = x[i] >= threshold ? std::exp(static_cast<double>(x[i] - mx)) : 0.0;
    total += w[i];
  }
  // Walk the ids with positive weight in ascending order; rounding can leave
  // r a hair above 0 after the last one, which then takes the draw.
  double r = static_cast<double>(rng.NextFloat()) * total;
  size_t last = 0;
  for (size_t i = 0; i < n; ++i) {
    if (w[i] <= 0) continue;
    last = i;
    r -= w[i];
    if (r <= 0) break;
  }
  return static_cast<int32_t>(last);
}

}  // namespace lfmvox
