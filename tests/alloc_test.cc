// A frame allocates nothing: counts heap allocations (global operator new)
// inside Decode and Flush after the stream's first frame, and inside
// StepStreams with two streams, with one and two threads, on the oracle
// detokenizer (tests/data/lfm25_detok).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "alloc_counter.h"
#include "models/lfm25_audio/detokenizer.h"
#include "threading/thread_team.h"
#include "trace_util.h"

namespace lfmvox {
namespace {

TEST(Allocation, NoHeapAllocationPerFrame) {
  auto model = Lfm25Detokenizer::Load(testing::DataPath("lfm25_detok"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  for (int threads : {1, 2}) {
    ThreadTeam team(threads);
    auto s = Lfm25DetokenizerSession::Create(**model, 1, threads);
    ASSERT_TRUE(s.ok());
    std::vector<int32_t> frame(8);
    std::vector<float> pcm(1920);
    for (int turn = 0; turn < 2; ++turn) {
      for (int f = 0; f < 40; ++f) {  // past the 30-key window, so the K/V rings wrap
        for (int k = 0; k < 8; ++k) frame[static_cast<size_t>(k)] = (f * 7 + k * 13) % 64;
        const long before = testing::AllocationCount();
        Result<size_t> w = (*s)->Step(frame, pcm, team);
        const long during = testing::AllocationCount() - before;
        ASSERT_TRUE(w.ok());
        if (f > 0 || turn > 0) {
          EXPECT_EQ(during, 0) << "frame " << f << ", turn " << turn << ", threads " << threads;
        }
      }
      const long before = testing::AllocationCount();
      Result<size_t> tail = (*s)->Flush(pcm);
      EXPECT_EQ(testing::AllocationCount() - before, 0) << "Flush";
      ASSERT_TRUE(tail.ok());
      EXPECT_EQ(*tail, 480u);
    }
  }
}

// StepStreams with two streams on one scratch: once warm, a pass allocates nothing, nor does
// a Flush (and the flushed stream restarting).
TEST(Allocation, StepStreamsNoHeapAllocationPerFrame) {
  auto model = Lfm25Detokenizer::Load(testing::DataPath("lfm25_detok"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  for (int threads : {1, 2}) {
    ThreadTeam team(threads);
    auto scratch = Lfm25DetokenizerScratch::Create(**model, 1, 2, threads);
    auto a = Lfm25DetokenizerState::Create(**model, 1);
    auto b = Lfm25DetokenizerState::Create(**model, 1);
    ASSERT_TRUE(scratch.ok() && a.ok() && b.ok());
    std::vector<int32_t> fa(8), fb(8);
    std::vector<float> pa(1920), pb(1920);
    std::vector<Lfm25DetokenizerRequest> requests = {{&*a, fa, pa}, {&*b, fb, pb}};
    for (int f = 0; f < 40; ++f) {  // past the 30-key window, so the K/V rings wrap
      for (int k = 0; k < 8; ++k) {
        fa[static_cast<size_t>(k)] = (f * 7 + k * 13) % 64;
        fb[static_cast<size_t>(k)] = (f * 5 + k * 11 + 3) % 64;
      }
      const long before = testing::AllocationCount();
      const Status st = StepStreams(**model, requests, *scratch, team);
      const long during = testing::AllocationCount() - before;
      ASSERT_TRUE(st.ok()) << st.ToString();
      if (f > 0) {
        EXPECT_EQ(during, 0) << "frame " << f << ", threads " << threads;
      }
      if (f == 20) {
        const long before_flush = testing::AllocationCount();
        Result<size_t> tail = Flush(**model, *b, pb);
        EXPECT_EQ(testing::AllocationCount() - before_flush, 0) << "Flush";
        ASSERT_TRUE(tail.ok());
        EXPECT_EQ(*tail, 480u);
      }
    }
  }
}

}  // namespace
}  // namespace lfmvox
