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

}  // namespace
}  // namespace lfmvox
