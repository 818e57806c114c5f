#include "threading/thread_team.h"

#include <algorithm>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define LFM_PAUSE() _mm_pause()
#else
#define LFM_PAUSE() std::this_thread::yield()
#endif

namespace lfmvox {

namespace {
// Spin this many pauses (a few microseconds) before sleeping on the futex:
// back-to-back kernels in one decode step then hand over without a syscall.
constexpr int kSpinIterations = 20000;
}  // namespace

ThreadTeam::ThreadTeam(int num_threads) : size_(std::max(1, num_threads)) {
  workers_.reserve(static_cast<size_t>(size_ - 1));
  for (int t = 1; t < size_; ++t) workers_.emplace_back([this, t] { WorkerLoop(t); });
}

ThreadTeam::~ThreadTeam() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadTeam::Drain(int thread) {
  for (;;) {
    const size_t t = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (t >= num_tasks_) break;
    fn_(ctx_, t, thread);
  }
}

void ThreadTeam::Dispatch(size_t num_tasks, TaskFn fn, void* ctx) {
  fn_ = fn;
  ctx_ = ctx;
  num_tasks_ = num_tasks;
  next_task_.store(0, std::memory_order_relaxed);
  busy_.store(size_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  Drain(0);
  // Workers finish within microseconds unless the OS preempted one (another
  // process on the core): then yield the core instead of spinning against it.
  for (int spins = 0; busy_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < kSpinIterations) {
      LFM_PAUSE();
    } else {
      std::this_thread::yield();
    }
  }
}

void ThreadTeam::WorkerLoop(int thread) {
  uint32_t seen = 0;
  for (;;) {
    int spins = 0;
    uint32_t g;
    while ((g = generation_.load(std::memory_order_acquire)) == seen) {
      if (++spins < kSpinIterations) {
        LFM_PAUSE();
      } else {
        generation_.wait(seen, std::memory_order_acquire);
      }
    }
    seen = g;
    if (stop_.load(std::memory_order_acquire)) return;
    Drain(thread);
    busy_.fetch_sub(1, std::memory_order_release);
  }
}

}  // namespace lfmvox
