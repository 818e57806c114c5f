// One explicit team of threads, created once and passed to whoever needs it.
// Run() splits work into tasks; the calling thread takes part, so a team of
// size 1 runs everything inline with no synchronisation at all.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

namespace lfmvox {

// The largest team any API accepts (a sanity bound on user input, far above any real machine).
inline constexpr int kMaxThreads = 256;

class ThreadTeam {
 public:
  // num_threads counts the caller: ThreadTeam(2) starts one worker thread.
  explicit ThreadTeam(int num_threads = 1);
  ~ThreadTeam();
  ThreadTeam(const ThreadTeam&) = delete;
  ThreadTeam& operator=(const ThreadTeam&) = delete;

  int size() const { return size_; }

  // Calls fn(task, thread) for every task in [0, num_tasks) and returns when
  // all are done. thread is in [0, size()). Does not allocate.
  template <typename F>
  void Run(size_t num_tasks, F&& fn) {
    if (size_ == 1 || num_tasks <= 1) {
      for (size_t t = 0; t < num_tasks; ++t) fn(t, 0);
      return;
    }
    Dispatch(num_tasks, &Trampoline<F>, &fn);
  }

  // Splits [0, n) into about size() contiguous chunks whose bounds are
  // multiples of `align` and calls fn(begin, end).
  template <typename F>
  void ParallelFor(size_t n, size_t align, F&& fn) {
    if (n == 0) return;
    const size_t parts = static_cast<size_t>(size_);
    size_t chunk = (n + parts - 1) / parts;
    chunk = (chunk + align - 1) / align * align;
    const size_t tasks = (n + chunk - 1) / chunk;
    Run(tasks, [&](size_t t, int) {
      const size_t b = t * chunk;
      const size_t e = b + chunk < n ? b + chunk : n;
      fn(b, e);
    });
  }

 private:
  using TaskFn = void (*)(void* ctx, size_t task, int thread);
  template <typename F>
  static void Trampoline(void* ctx, size_t task, int thread) {
    (*static_cast<F*>(ctx))(task, thread);
  }
  void Dispatch(size_t num_tasks, TaskFn fn, void* ctx);
  void WorkerLoop(int thread);
  void Drain(int thread);

  int size_ = 1;
  std::vector<std::thread> workers_;
  // The current job, published by bumping generation_.
  TaskFn fn_ = nullptr;
  void* ctx_ = nullptr;
  size_t num_tasks_ = 0;
  std::atomic<size_t> next_task_{0};
  std::atomic<int> busy_{0};
  std::atomic<uint32_t> generation_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace lfmvox
