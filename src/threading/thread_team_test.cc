#include "threading/thread_team.h"

#include <gtest/gtest.h>

#include <atomic>
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

}  // namespace
}  // namespace lfmvox
