// A frame allocates nothing: counts heap allocations (global operator new)
// inside Decode and Flush after the stream's first frame, with one and two
// threads, on the oracle detokenizer (tests/data/lfm25_detok).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "models/lfm25_audio/detokenizer.h"
#include "threading/thread_team.h"
#include "trace_util.h"

namespace {
std::atomic<long> g_allocations{0};
}  // namespace

void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new(std::size_t n, std::align_val_t a) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p =
          std::aligned_alloc(static_cast<size_t>(a), (n + static_cast<size_t>(a) - 1) /
                                                         static_cast<size_t>(a) * static_cast<size_t>(a)))
    return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }

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
        const long before = g_allocations.load();
        Result<size_t> w = (*s)->Decode(frame, pcm, team);
        const long during = g_allocations.load() - before;
        ASSERT_TRUE(w.ok());
        if (f > 0 || turn > 0) {
          EXPECT_EQ(during, 0) << "frame " << f << ", turn " << turn << ", threads " << threads;
        }
      }
      const long before = g_allocations.load();
      Result<size_t> tail = (*s)->Flush(pcm);
      EXPECT_EQ(g_allocations.load() - before, 0) << "Flush";
      ASSERT_TRUE(tail.ok());
      EXPECT_EQ(*tail, 480u);
    }
  }
}

}  // namespace
}  // namespace lfmvox
