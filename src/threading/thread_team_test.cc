#include "threading/thread_team.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "threading/stage_policy.h"

namespace lfmvox {
namespace {

// Every task runs exactly once, whatever the team size; ParallelFor covers
// [0, n) with aligned, disjoint chunks.
TEST(ThreadTeam, EveryTaskRunsOnce) {
  for (int threads : {1, 2, 3}) {
    ThreadTeam team(threads);
    for (size_t n : {0u, 1u, 2u, 7u, 1000u}) {
      std::vector<std::atomic<int>> hits(n);
      for (int rep = 0; rep < 50; ++rep) {
        team.Run(n, [&](size_t t, int thread) {
          ASSERT_LT(thread, threads);
          hits[t].fetch_add(1);
        });
      }
      for (size_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 50) << "task " << i;
    }
  }
}

TEST(ThreadTeam, ParallelForCoversRangeWithAlignedChunks) {
  ThreadTeam team(2);
  for (size_t n : {1u, 15u, 16u, 17u, 1282u}) {
    std::vector<int> hits(n, 0);
    team.ParallelFor(n, 16, [&](size_t b, size_t e) {
      EXPECT_EQ(b % 16, 0u);
      for (size_t i = b; i < e; ++i) hits[i]++;
    });
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(hits[i], 1) << "n " << n << " i " << i;
  }
}

// Many short Runs back to back: a worker that read the job word of one Run
// and is preempted must never claim a task of a later Run (or of the same
// Run twice). Each Run checks that its tasks ran exactly once and nothing else.
TEST(ThreadTeam, RapidBackToBackRunsRunEachTaskOnce) {
  for (int threads : {2, 3}) {
    ThreadTeam team(threads);
    std::vector<std::atomic<int>> hits(16);
    std::atomic<int> bad_thread{0};
    std::atomic<int> on_workers{0};
    for (int rep = 0; rep < 20000; ++rep) {
      const size_t n = 2 + static_cast<size_t>(rep) % 15;
      team.Run(n, [&](size_t t, int thread) {
        if (thread < 0 || thread >= threads) bad_thread.fetch_add(1);
        if (thread != 0) on_workers.fetch_add(1, std::memory_order_relaxed);
        // A little work, so that workers take part in most Runs.
        volatile int spin = 0;
        for (int i = 0; i < 200; ++i) spin = spin + 1;
        hits[t].fetch_add(1, std::memory_order_relaxed);
      });
      for (size_t i = 0; i < hits.size(); ++i) {
        const int h = hits[i].exchange(0, std::memory_order_relaxed);
        ASSERT_EQ(h, i < n ? 1 : 0) << "threads " << threads << " rep " << rep << " task " << i;
      }
    }
    EXPECT_EQ(bad_thread.load(), 0);
    // Not a speed assertion: over 20000 Runs a worker claims at least one task.
    EXPECT_GT(on_workers.load(), 0);
    std::printf("threads %d: %d tasks ran on workers\n", threads, on_workers.load());
  }
}

// Chunks are aligned, disjoint and cover [0, n), with more chunks than
// threads when n allows (dynamic splitting), for every team size.
TEST(ThreadTeam, ParallelForChunksAlignedDisjointCovering) {
  for (int threads : {1, 2, 3}) {
    ThreadTeam team(threads);
    for (size_t align : {1u, 3u, 8u, 16u, 64u}) {
      for (size_t min_chunk : {0u, 1u, 32u, 100u}) {
        for (size_t n : {1u, 2u, 7u, 8u, 9u, 63u, 64u, 65u, 100u, 1000u, 1282u, 4096u, 8192u, 10007u}) {
          std::mutex mu;
          std::vector<std::pair<size_t, size_t>> chunks;
          // A team that degraded (a worker was preempted on a loaded machine)
          // may run the range inline as one chunk; one that did not, never.
          const bool may_run_inline = team.degraded();
          team.ParallelFor(n, align, min_chunk, [&](size_t b, size_t e) {
            std::lock_guard<std::mutex> lock(mu);
            chunks.emplace_back(b, e);
          });
          std::sort(chunks.begin(), chunks.end());
          ASSERT_FALSE(chunks.empty());
          size_t expect_begin = 0;
          for (const auto& [b, e] : chunks) {
            ASSERT_EQ(b, expect_begin) << "gap or overlap: n " << n << " align " << align;
            ASSERT_LT(b, e);
            ASSERT_EQ(b % align, 0u) << "n " << n << " align " << align;
            expect_begin = e;
          }
          ASSERT_EQ(expect_begin, n);
          if (threads > 1 && !(may_run_inline && chunks.size() == 1)) {
            const size_t chunk = team.ChunkSize(n, align, min_chunk);
            EXPECT_EQ(chunk % align, 0u);
            EXPECT_GE(chunk, min_chunk);
            EXPECT_EQ(chunks.size(), (n + chunk - 1) / chunk);
            // Enough work for several chunks a thread gets them.
            const size_t units = (n + align - 1) / align;
            if (min_chunk <= align && units >= ThreadTeam::kChunksPerThread * threads) {
              EXPECT_GT(chunks.size(), static_cast<size_t>(threads)) << "n " << n << " align " << align;
            }
          }
        }
      }
    }
  }
}

// Work on thread 1 is slow (a preempted or overloaded core): every task still
// runs once with the right result, however the team splits or degrades.
TEST(ThreadTeam, SlowWorkerStillCompletesCorrectly) {
  ThreadTeam team(2);
  std::vector<int64_t> out(256);
  for (int rep = 0; rep < 40; ++rep) {
    std::fill(out.begin(), out.end(), -1);
    team.Run(out.size(), [&](size_t t, int thread) {
      if (thread == 1) std::this_thread::sleep_for(std::chrono::microseconds(500));
      out[t] = static_cast<int64_t>(t) * t + rep;
    });
    for (size_t t = 0; t < out.size(); ++t) ASSERT_EQ(out[t], static_cast<int64_t>(t) * t + rep);
    std::vector<int> cover(1000, 0);
    team.ParallelFor(cover.size(), 8, [&](size_t b, size_t e) {
      if (b != 0) std::this_thread::sleep_for(std::chrono::microseconds(300));
      for (size_t i = b; i < e; ++i) cover[i]++;
    });
    for (size_t i = 0; i < cover.size(); ++i) ASSERT_EQ(cover[i], 1) << "i " << i;
  }
}

// A worker that keeps making the caller wait long puts the team into inline
// mode (everything on thread 0), which changes no result.
TEST(ThreadTeam, RepeatedStallsDegradeToInline) {
  ThreadTeam team(2);
  bool degraded = false;
  for (int rep = 0; rep < 400 && !degraded; ++rep) {
    team.Run(16, [&](size_t, int thread) {
      if (thread == 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      } else {
        const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
        while (std::chrono::steady_clock::now() < until) {
        }
      }
    });
    degraded = team.degraded();
  }
  ASSERT_TRUE(degraded);
  std::vector<int> on_thread(16, -1);
  team.Run(on_thread.size(), [&](size_t t, int thread) { on_thread[t] = thread; });
  for (int th : on_thread) EXPECT_EQ(th, 0);
}

// Destroying a team whose workers sleep on the futex (past their spin), or
// that never ran anything, joins cleanly.
TEST(ThreadTeam, DestructionWhileWorkersSleep) {
  for (int rep = 0; rep < 20; ++rep) {
    ThreadTeam idle(3);
    ThreadTeam team(3);
    std::atomic<int> sum{0};
    team.Run(10, [&](size_t t, int) { sum.fetch_add(static_cast<int>(t)); });
    EXPECT_EQ(sum.load(), 45);
    std::this_thread::sleep_for(std::chrono::milliseconds(rep % 2 == 0 ? 2 : 0));
  }
}

// Forced inline: every task exactly once, all on the caller; ParallelFor is one
// call over [0, n); scopes nest; the team dispatches again afterwards.
TEST(ThreadTeam, ScopedInlineRunsEveryTaskOnceOnCaller) {
  ThreadTeam team(3);
  constexpr size_t kTasks = 257;
  const std::thread::id caller = std::this_thread::get_id();
  {
    ThreadTeam::ScopedInline outer(team);
    EXPECT_TRUE(team.forced_inline());
    for (int rep = 0; rep < 20; ++rep) {
      std::vector<int> hits(kTasks, 0);  // plain ints: only the caller may touch them
      team.Run(kTasks, [&](size_t t, int thread) {
        EXPECT_EQ(thread, 0);
        EXPECT_EQ(std::this_thread::get_id(), caller);
        ++hits[t];
      });
      for (size_t i = 0; i < kTasks; ++i) ASSERT_EQ(hits[i], 1) << "task " << i;
    }
    {
      ThreadTeam::ScopedInline inner(team);
      int calls = 0;
      team.ParallelFor(1000, 16, [&](size_t b, size_t e) {
        EXPECT_EQ(b, 0u);
        EXPECT_EQ(e, 1000u);
        ++calls;
      });
      EXPECT_EQ(calls, 1);
    }
    EXPECT_TRUE(team.forced_inline());
  }
  EXPECT_FALSE(team.forced_inline());
  // Workers take part again: some task eventually runs on a thread other than 0.
  std::atomic<bool> elsewhere{false};
  for (int rep = 0; rep < 2000 && !elsewhere.load(); ++rep) {
    team.Run(64, [&](size_t, int) {
      if (std::this_thread::get_id() != caller) elsewhere.store(true);
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    });
  }
  EXPECT_TRUE(elsewhere.load());
}

// Drives an AdaptiveMode with synthetic per-unit times (no clock): `ns(inline)`.
template <typename F>
void Feed(AdaptiveMode& mode, int calls, F&& ns) {
  for (int i = 0; i < calls; ++i) {
    const bool in = mode.NextInline();
    mode.Record(ns(in), 1.0);
  }
}

TEST(AdaptiveMode, PicksInlineWhenParallelIsSlower) {
  AdaptiveMode mode;
  EXPECT_FALSE(mode.prefers_inline());  // parallel until measured otherwise
  Feed(mode, 64, [](bool in) { return in ? 1000 : 1150; });
  EXPECT_TRUE(mode.prefers_inline());
  EXPECT_EQ(mode.switches(), 1u);
  // Steady calls (not probes) then run inline.
  while (mode.probing()) Feed(mode, 1, [](bool in) { return in ? 1000 : 1150; });
  EXPECT_TRUE(mode.NextInline());
  mode.Record(1000, 1.0);
}

TEST(AdaptiveMode, KeepsParallelWhenFasterAndBacksOffProbing) {
  AdaptiveMode::Options o;
  AdaptiveMode mode(o);
  int inline_calls = 0;
  Feed(mode, 20000, [&](bool in) {
    inline_calls += in;
    return in ? 1000 : 600;
  });
  EXPECT_FALSE(mode.prefers_inline());
  EXPECT_EQ(mode.switches(), 0u);
  EXPECT_EQ(mode.period(), o.max_period);  // doubled after every win
  // Probing costs probe_calls slow calls per period: well under 2 % here.
  EXPECT_GT(inline_calls, 0);
  EXPECT_LT(inline_calls, 20000 / 50);
}

TEST(AdaptiveMode, WithinMarginKeepsCurrentMode) {
  AdaptiveMode mode;
  Feed(mode, 5000, [](bool in) { return in ? 990 : 1000; });  // 1 % faster inline: a tie
  EXPECT_FALSE(mode.prefers_inline());
}

// Conditions change (a competitor leaves): the next periodic probe (or the
// drift rule) switches back, within one period after the change.
TEST(AdaptiveMode, ReprobesAfterItsPeriod) {
  AdaptiveMode::Options o;
  o.drift = 10.0;  // disable the drift rule: only the period may find the change
  AdaptiveMode mode(o);
  Feed(mode, 200, [](bool in) { return in ? 1000 : 1300; });
  ASSERT_TRUE(mode.prefers_inline());
  const uint64_t probes = mode.probes();
  const uint32_t period = mode.period();
  // Now parallel is faster; nothing changes before the period is over ...
  int calls = 0;
  while (mode.prefers_inline() && calls < 10000) {
    Feed(mode, 1, [](bool in) { return in ? 1000 : 600; });
    ++calls;
  }
  EXPECT_FALSE(mode.prefers_inline());
  EXPECT_EQ(mode.probes(), probes + 1);
  EXPECT_LE(calls, static_cast<int>(period + 2 * o.probe_calls));
  EXPECT_GE(calls, static_cast<int>(2 * o.probe_calls));
  EXPECT_EQ(mode.period(), o.min_period);  // a switch restarts the back-off
}

// A sustained jump in the current mode's time probes at once, long before a
// backed-off period would.
TEST(AdaptiveMode, DriftProbesEarly) {
  AdaptiveMode::Options o;
  AdaptiveMode mode(o);
  Feed(mode, 5000, [](bool in) { return in ? 1000 : 600; });
  ASSERT_EQ(mode.period(), o.max_period);
  ASSERT_FALSE(mode.prefers_inline());
  int calls = 0;
  while (!mode.prefers_inline() && calls < 10000) {
    Feed(mode, 1, [](bool in) { return in ? 1000 : 1200; });  // parallel doubled: a competitor came
    ++calls;
  }
  EXPECT_TRUE(mode.prefers_inline());
  EXPECT_LE(calls, static_cast<int>(o.drift_calls + 2 * o.probe_calls));
}

// Calls of different sizes compare per unit of work.
TEST(AdaptiveMode, ComparesTimePerUnitOfWork) {
  AdaptiveMode mode;
  uint64_t lcg = 7;
  for (int i = 0; i < 3000; ++i) {
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    const double work = static_cast<double>(1 + (lcg >> 33) % 16);
    const bool in = mode.NextInline();
    // Inline is faster per unit (1000 vs 1100), whatever the call's size.
    mode.Record(static_cast<int64_t>(work * (in ? 1000 : 1100)), work);
  }
  EXPECT_TRUE(mode.prefers_inline());
}

// With a real team and clock: a stage whose parallel calls are slow in a way
// the team's own fallback cannot see (its serial part, as when the caller
// shares a core with another process: modelled by a sleep after a parallel
// Run) is found out and runs inline; every task still runs exactly once per
// call in either mode. Bounded by call count, not by time.
TEST(StageTimer, PicksInlineWhenParallelCallsAreSlow) {
  ThreadTeam team(2);
  AdaptiveMode mode;
  constexpr size_t kTasks = 8;
  int inline_calls = 0, calls = 0;
  for (; calls < 400 && !(mode.prefers_inline() && !mode.probing()); ++calls) {
    std::vector<std::atomic<int>> hits(kTasks);
    {
      const StageTimer timer(mode, team, 1.0);
      inline_calls += timer.runs_inline();
      EXPECT_EQ(team.forced_inline(), timer.runs_inline());
      team.Run(kTasks, [&](size_t t, int) { hits[t].fetch_add(1); });
      if (!timer.runs_inline()) std::this_thread::sleep_for(std::chrono::milliseconds(3));
    }
    EXPECT_FALSE(team.forced_inline());
    for (size_t t = 0; t < kTasks; ++t) ASSERT_EQ(hits[t].load(), 1);
  }
  EXPECT_TRUE(mode.prefers_inline()) << calls << " calls";
  EXPECT_GT(inline_calls, 0);
  const StageTimer timer(mode, team, 1.0);
  EXPECT_TRUE(timer.runs_inline());
  EXPECT_TRUE(team.forced_inline());
}

// Inactive for a team of one, inside an enclosing forced-inline scope, and
// when switched off: nothing is recorded.
TEST(StageTimer, InactiveWhereItCannotChoose) {
  AdaptiveMode mode;
  ThreadTeam one(1), two(2);
  for (int i = 0; i < 100; ++i) {
    const StageTimer t(mode, one);
    EXPECT_FALSE(t.runs_inline());
  }
  {
    ThreadTeam::ScopedInline outer(two);
    for (int i = 0; i < 100; ++i) {
      const StageTimer t(mode, two);
      EXPECT_FALSE(t.runs_inline());
    }
  }
  StageTimer::set_enabled(false);
  for (int i = 0; i < 100; ++i) {
    const StageTimer t(mode, two);
    EXPECT_FALSE(t.runs_inline());
    EXPECT_FALSE(two.forced_inline());
  }
  StageTimer::set_enabled(true);
  EXPECT_EQ(mode.probes(), 0u);
  EXPECT_FALSE(mode.probing());
}

}  // namespace
}  // namespace lfmvox
