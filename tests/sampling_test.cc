// Token sampling (src/blocks/sampling.h): SplitMix64 known answers,
// greedy ties, top-k ties, the drawn distribution against softmax(l/T) by a
// chi-square bound, reproducibility, the repetition penalty, errors, and (when
// tests/data/lfm3_tiny is present) the LFM3 oracle's sampled depth frame
//   lfm3_tiny/traces/depth__sampled__{rng_seed,history,pass{p}__want,pass{p}__logits,draw_u,codes}.npy.
#include "blocks/sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <vector>

#include "trace_util.h"

namespace lfmvox {
namespace {

// ---------------------------------------------------------------------------
// Rng

TEST(Rng, SplitMix64KnownAnswers) {
  // Seed 0: the reference generator's published first outputs (also the LFM3
  // oracle's meta.splitmix64_selftest.seed0_next_u64_hex).
  Rng r0(0);
  EXPECT_EQ(r0.NextU64(), 0xe220a8397b1dcdafull);
  EXPECT_EQ(r0.NextU64(), 0x6e789e6aa1b965f4ull);
  // Seed 45: meta.splitmix64_selftest.next_u64_hex.
  Rng r45(45);
  for (uint64_t want :
       {0xf7e9f3f88cc04ad6ull, 0xfb624bd98f2be6c4ull, 0x87fc3f1dac740225ull, 0xda258f1151868b40ull}) {
    EXPECT_EQ(r45.NextU64(), want);
  }
}

TEST(Rng, NextFloatIsTheTop24Bits) {
  Rng a(99), b(99);
  for (int i = 0; i < 1000; ++i) {
    const uint64_t u = a.NextU64();
    const float f = b.NextFloat();
    EXPECT_EQ(f, static_cast<float>(u >> 40) / 16777216.0f);
    EXPECT_GE(f, 0.0f);
    EXPECT_LT(f, 1.0f);
  }
}

// ---------------------------------------------------------------------------
// Greedy and top-k

Sampler Make(const SamplingParams& p, size_t vocab = 64) {
  Result<Sampler> s = Sampler::Create(p, vocab);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(s).value();
}

int32_t Draw(Sampler& s, const std::vector<float>& logits, Rng& rng, std::span<const int32_t> history = {}) {
  Result<int32_t> r = s.Sample(logits, rng, history);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : -1;
}

TEST(Sampler, GreedyTakesTheFirstMaximumAndDrawsNothing) {
  Rng rng(5);
  Sampler greedy = Make(SamplingParams::Greedy());
  EXPECT_EQ(Draw(greedy, {1, 3, 3, 2}, rng), 1);
  EXPECT_EQ(Draw(greedy, {7, 7}, rng), 0);
  // A NaN or +inf logit is refused, greedy or not (it comes from broken weights or input; an argmax that
  // skipped it would emit an arbitrary token); -inf is a legal mask.
  for (float bad : {std::nanf(""), std::numeric_limits<float>::infinity()}) {
    Result<int32_t> r = greedy.Sample(std::vector<float>{-2, bad, -1}, rng);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("logit 1 is"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("non-finite"), std::string::npos) << r.status().message();
  }
  EXPECT_EQ(Draw(greedy, {-2, -std::numeric_limits<float>::infinity(), -1}, rng), 2);
  // liquid-audio: greedy when temperature <= 0 or top_k == 1.
  Sampler topk1 = Make({0.8f, 1, 1.0f, 0});
  EXPECT_EQ(Draw(topk1, {0, 5, 5, 1}, rng), 1);
  Sampler negative_t = Make({-1.0f, 64, 1.0f, 0});
  EXPECT_EQ(Draw(negative_t, {0, 5, 6, 6}, rng), 2);
  EXPECT_EQ(rng.state(), 5u);
}

// Upper bound on a chi-square statistic with `df` degrees of freedom that is
// exceeded with probability ~1e-6 under the null hypothesis: the
// Wilson–Hilferty cube-root normal approximation,
//   q = df·(1 − 2/(9df) + z·√(2/(9df)))³,  z = 4.753 (normal 1 − 1e-6 quantile),
// good to a few percent for df ≥ 3 (df 3: 32.7, df 4: 35.2, df 7: 41.9).
double ChiSquareBound(int df) {
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - a + 4.753 * std::sqrt(a), 3.0);
}

// Counts of n draws.
std::vector<long> Histogram(Sampler& s, const std::vector<float>& logits, uint64_t seed, long n) {
  std::vector<long> counts(logits.size(), 0);
  Rng rng(seed);
  for (long i = 0; i < n; ++i) ++counts[static_cast<size_t>(Draw(s, logits, rng))];
  return counts;
}

// softmax(logits / t) over the ids with keep[i].
std::vector<double> Expected(const std::vector<float>& logits, double t, const std::vector<bool>& keep) {
  std::vector<double> p(logits.size(), 0.0);
  double z = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (keep[i]) z += p[i] = std::exp(logits[i] / t);
  }
  for (double& v : p) v /= z;
  return p;
}

// Pearson's statistic over the ids with p > 0; *df = that count − 1.
double ChiSquare(const std::vector<long>& counts, const std::vector<double>& p, long n, int* df) {
  double chi = 0;
  *df = -1;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (p[i] == 0) continue;
    const double e = p[i] * static_cast<double>(n);
    chi += (static_cast<double>(counts[i]) - e) * (static_cast<double>(counts[i]) - e) / e;
    ++*df;
  }
  return chi;
}

// The smallest expected count here is ~1000 (n = 200000, p ≥ 0.005), far
// above the ≥ 5 the chi-square approximation needs.
constexpr long kDraws = 200000;
const std::vector<float> kLogits = {1.0f, 0.3f, -0.5f, 2.0f, 1.7f, -1.2f, 0.0f, 0.9f};

TEST(Sampler, DrawsFollowSoftmaxOfLogitsOverTemperature) {
  const float t = 0.7f;
  Sampler s = Make({t, 0, 1.0f, 0});
  const std::vector<long> counts = Histogram(s, kLogits, 2024, kDraws);
  int df = 0;
  const double chi = ChiSquare(counts, Expected(kLogits, t, std::vector<bool>(8, true)), kDraws, &df);
  EXPECT_EQ(df, 7);
  EXPECT_LT(chi, ChiSquareBound(df)) << "chi-square " << chi;
  // The test has power: the same counts are far from softmax(l) at T = 1.
  const double wrong_t = ChiSquare(counts, Expected(kLogits, 1.0, std::vector<bool>(8, true)), kDraws, &df);
  EXPECT_GT(wrong_t, 100 * ChiSquareBound(df));
  std::printf("[sampler] T=0.7: chi-square %.2f (df 7, bound %.1f); vs T=1 hypothesis %.0f\n", chi,
              ChiSquareBound(7), wrong_t);
}

TEST(Sampler, TopKDrawsOnlyTheKeptIdsWithRenormalisedSoftmax) {
  const float t = 1.3f;
  Sampler s = Make({t, 5, 1.0f, 0});
  const std::vector<long> counts = Histogram(s, kLogits, 77, kDraws);
  // The 5 largest: 2.0, 1.7, 1.0, 0.9, 0.3 → ids 3, 4, 0, 7, 1.
  const std::vector<bool> keep = {true, true, false, true, true, false, false, true};
  for (size_t i = 0; i < 8; ++i) {
    if (!keep[i]) {
      EXPECT_EQ(counts[i], 0) << "id " << i << " is outside the top 5";
    }
  }
  int df = 0;
  const double chi = ChiSquare(counts, Expected(kLogits, t, keep), kDraws, &df);
  EXPECT_EQ(df, 4);
  EXPECT_LT(chi, ChiSquareBound(df)) << "chi-square " << chi;
  std::printf("[sampler] top-5, T=1.3: chi-square %.2f (df 4, bound %.1f)\n", chi, ChiSquareBound(4));
}

TEST(Sampler, TopKKeepsTiesAtTheThreshold) {
  // top_k 2: the 2nd largest is 4, and all three 4s stay (torch's mask is
  // `logits < topk(logits, k).values[-1]`).
  const std::vector<float> logits = {5, 4, 4, 4, 1, 0};
  Sampler s = Make({1.0f, 2, 1.0f, 0});
  const std::vector<long> counts = Histogram(s, logits, 3, kDraws);
  const std::vector<bool> keep = {true, true, true, true, false, false};
  EXPECT_EQ(counts[4] + counts[5], 0);
  int df = 0;
  const double chi = ChiSquare(counts, Expected(logits, 1.0, keep), kDraws, &df);
  EXPECT_EQ(df, 3);
  EXPECT_LT(chi, ChiSquareBound(df)) << "chi-square " << chi;
}

TEST(Sampler, SameSeedSameSequence) {
  Sampler a = Make(SamplingParams::Lfm25TtsAudio(), 2049);
  Sampler b = Make(SamplingParams::Lfm25TtsAudio(), 2049);
  std::vector<float> logits(2049);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(0.37f * static_cast<float>(i)) * 3.0f;
  Rng r1(123), r2(123), r3(124);
  int differ = 0;
  for (int i = 0; i < 500; ++i) {
    const int32_t x = Draw(a, logits, r1);
    EXPECT_EQ(x, Draw(b, logits, r2)) << "draw " << i;
    differ += x != Draw(b, logits, r3);
  }
  EXPECT_GT(differ, 100) << "another seed should give another sequence";
}

// ---------------------------------------------------------------------------
// Repetition penalty (greedy, so the effect is exact)

TEST(Sampler, RepetitionPenaltyScalesEachDistinctRecentIdOnce) {
  Rng rng(0);
  Sampler s = Make({0.0f, 0, 1.1f, 2});
  const std::vector<int32_t> h0 = {0};
  EXPECT_EQ(Draw(s, {3.0f, 2.9f}, rng, h0), 1);  // 3/1.1 = 2.73 < 2.9
  const std::vector<int32_t> h00 = {0, 0};
  EXPECT_EQ(Draw(s, {3.0f, 2.6f}, rng, h00), 0);    // once: 2.73 > 2.6 (twice would be 2.48)
  EXPECT_EQ(Draw(s, {-1.0f, -1.05f}, rng, h0), 1);  // negative: −1·1.1 = −1.1 < −1.05
  // Only the last penalty_window = 2 ids count: id 0 is outside the window.
  const std::vector<int32_t> h011 = {0, 1, 1};
  EXPECT_EQ(Draw(s, {3.0f, 2.9f}, rng, h011), 0);
  // The caller's logits are untouched, and no marks leak into the next call.
  const std::vector<float> logits = {3.0f, 2.9f};
  EXPECT_EQ(Draw(s, logits, rng, h0), 1);
  EXPECT_EQ(logits[0], 3.0f);
  EXPECT_EQ(Draw(s, logits, rng), 0);
  const std::vector<int32_t> bad = {0, 2};
  Result<int32_t> r = s.Sample(logits, rng, bad);
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);
}

TEST(Sampler, Errors) {
  EXPECT_FALSE(Sampler::Create({1.0f, -1, 1.0f, 0}, 8).ok());
  EXPECT_FALSE(Sampler::Create({std::nanf(""), 0, 1.0f, 0}, 8).ok());
  EXPECT_FALSE(Sampler::Create({1.0f, 0, 0.0f, 4}, 8).ok());
  EXPECT_FALSE(Sampler::Create({1.0f, 0, 1.2f, 0}, 8).ok()) << "a penalty needs a window";
  EXPECT_FALSE(Sampler::Create({1.0f, 0, 1.0f, 0}, 0).ok());
  Sampler s = Make({1.0f, 0, 1.0f, 0}, 4);
  Rng rng(1);
  EXPECT_EQ(s.Sample(std::vector<float>(5), rng).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(s.Sample(std::vector<float>{}, rng).status().code(), StatusCode::kOutOfRange);
  EXPECT_FALSE(s.Sample(std::vector<float>{0, std::nanf(""), 1}, rng).ok());
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(s.Sample(std::vector<float>{0, inf}, rng).ok());
  EXPECT_FALSE(s.Sample(std::vector<float>{-inf, -inf}, rng).ok());
  // -inf entries are legal masks and never drawn.
  for (int i = 0; i < 100; ++i) EXPECT_EQ(*s.Sample(std::vector<float>{-inf, 0, -inf}, rng), 1);
}

// A tiny positive temperature (1e-37, inside the documented range) makes finite logits overflow to +inf after
// the division; that is the t -> 0 limit, the largest logit, not an error.
TEST(Sampler, TinyTemperatureIsTheGreedyLimit) {
  Sampler s = Make({1e-37f, 0, 1.0f, 0}, 4);
  Rng rng(7);
  for (int i = 0; i < 20; ++i) {
    Result<int32_t> id = s.Sample(std::vector<float>{5.0f, -30.0f, 50.0f, 40.0f}, rng);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    EXPECT_EQ(*id, 2);
  }
  // A NaN anywhere is still refused.
  EXPECT_FALSE(s.Sample(std::vector<float>{2.0f, std::nanf("")}, rng).ok());
}

// ---------------------------------------------------------------------------
// The LFM3 oracle's sampled depth frame: temperature 1.0, top_k 128, penalty
// f32(1.1) over a 4096-frame window, SplitMix64 seeded from rng_seed; per
// frame 11 NextU64 for its codebook shuffle come first, then one NextFloat per
// codebook in pass order (oracle README, decisions 6 and 7). The oracle's
// smallest draw margin is 1.1e-3 of the total weight and its top-k boundary
// gap 7.1e-4, far above f32 rounding, so the codes must match exactly.

TEST(Sampler, ReproducesTheLfm3OracleSampledFrame) {
  const std::string pre = "lfm3_tiny/traces/depth__sampled__";
  if (!std::filesystem::exists(testing::DataPath(pre + "codes.npy"))) {
    GTEST_SKIP() << "tests/data/lfm3_tiny is not present";
  }
  const std::vector<int64_t> history = testing::LoadTrace(pre + "history.npy").ToInt64();  // [6, 12]
  const std::vector<int64_t> codes = testing::LoadTrace(pre + "codes.npy").ToInt64();      // [12]
  const std::vector<float> draw_u = testing::LoadTrace(pre + "draw_u.npy").ToFloat();      // [12]
  const uint64_t seed = static_cast<uint64_t>(testing::LoadTrace(pre + "rng_seed.npy").ToInt64().at(0));
  const size_t cbs = 12, vocab = 2017, frames = history.size() / cbs;

  Sampler s = Make({1.0f, 128, 1.1f, 4096}, vocab);
  Rng rng(seed);
  for (int i = 0; i < 11; ++i) rng.NextU64();
  size_t draw = 0;
  for (int p = 0; p < 3; ++p) {
    const std::string pass = pre + "pass" + std::to_string(p) + "__";
    const std::vector<int64_t> want = testing::LoadTrace(pass + "want.npy").ToInt64();    // [4]
    const std::vector<float> logits = testing::LoadTrace(pass + "logits.npy").ToFloat();  // [4, 2017]
    for (size_t i = 0; i < want.size(); ++i, ++draw) {
      const size_t cb = static_cast<size_t>(want[i]);
      std::vector<int32_t> hist(frames);
      for (size_t f = 0; f < frames; ++f) hist[f] = static_cast<int32_t>(history[f * cbs + cb]);
      Rng probe = rng;
      EXPECT_EQ(probe.NextFloat(), draw_u[draw]) << "draw " << draw;
      const std::vector<float> row(logits.begin() + static_cast<long>(i * vocab),
                                   logits.begin() + static_cast<long>((i + 1) * vocab));
      EXPECT_EQ(Draw(s, row, rng, hist), codes[cb]) << "codebook " << cb;
    }
  }
  EXPECT_EQ(draw, cbs);
}

}  // namespace
}  // namespace lfmvox
