// One explicit team of threads, created once and passed to whoever needs it.
// Run() splits work into tasks; the calling thread takes part, so a team of
// size 1 runs everything inline with no synchronisation at all.
//
// Built to degrade gracefully on a loaded machine (other processes on the
// cores), where a worker may be preempted for milliseconds:
//  - tasks are claimed one at a time, and the caller waits only for tasks a
//    worker has claimed, never for a worker to wake up: a preempted worker
//    that claimed nothing costs nothing;
//  - ParallelFor makes several chunks per thread, so a thread that runs takes
//    the share of one that does not;
//  - idle workers spin for tens of microseconds, then sleep on a futex; the
//    caller, waiting for a claimed task, spins as briefly and then sleeps too,
//    leaving the core to the thread it waits for;
//  - when the caller keeps waiting long for workers anyway, the team runs
//    work inline for a while (exponential back-off) and then probes again;
//  - a caller that knows better (threading/stage_policy.h: a stage timed in
//    both modes) can force inline work for a scope with ScopedInline.
// None of this changes results: every task runs exactly once whatever the
// split, and kernels guarantee that an output does not depend on the split.
//
// Thread safety: one Run/ParallelFor at a time per team (the caller is the
// team's thread 0); a task must not call back into its own team. Different
// teams are independent.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

#include "lfmvox/types.h"  // kMaxThreads

namespace lfmvox {

class ThreadTeam {
 public:
  // num_threads counts the caller: ThreadTeam(2) starts one worker thread.
  explicit ThreadTeam(int num_threads = 1);
  ~ThreadTeam();
  ThreadTeam(const ThreadTeam&) = delete;
  ThreadTeam& operator=(const ThreadTeam&) = delete;

  int size() const { return size_; }

  // Calls fn(task, thread) for every task in [0, num_tasks) exactly once and
  // returns when all are done. thread is in [0, size()); which thread runs a
  // task, and in what order, is unspecified. Does not allocate.
  template <typename F>
  void Run(size_t num_tasks, F&& fn) {
    if (size_ == 1 || num_tasks <= 1 || forced_inline_ != 0 || RunInline()) {
      for (size_t t = 0; t < num_tasks; ++t) fn(t, 0);
      return;
    }
    Dispatch(num_tasks, &Trampoline<F>, &fn);
  }

  // Splits [0, n) into contiguous, disjoint chunks and calls fn(begin, end)
  // for each: every begin is a multiple of `align` and the last end is n.
  // About kChunksPerThread chunks per thread, so that a thread that runs takes
  // the share of one that does not; none shorter than `min_chunk` (rounded up
  // to `align`, default `align`) but the last, so that kernel tiles stay
  // whole and long. Inline (size 1, or while the team runs inline) it is one
  // call fn(0, n). fn must give the same results for any split (it must not
  // split a reduction across chunks). Does not allocate.
  template <typename F>
  void ParallelFor(size_t n, size_t align, size_t min_chunk, F&& fn) {
    if (n == 0) return;
    if (size_ == 1 || forced_inline_ != 0 || RunInline()) {
      fn(size_t{0}, n);
      return;
    }
    const size_t chunk = ChunkSize(n, align, min_chunk);
    const size_t tasks = (n + chunk - 1) / chunk;
    Run(tasks, [&](size_t t, int) {
      const size_t b = t * chunk;
      const size_t e = chunk < n - b ? b + chunk : n;
      fn(b, e);
    });
  }
  template <typename F>
  void ParallelFor(size_t n, size_t align, F&& fn) {
    ParallelFor(n, align, align, static_cast<F&&>(fn));
  }

  // ParallelFor's chunk length for size() threads (exposed for tests).
  size_t ChunkSize(size_t n, size_t align, size_t min_chunk) const;

  static constexpr size_t kChunksPerThread = 4;

  // True while the team runs work inline after workers cost the caller more
  // than they saved (see NoteWait in thread_team.cc); for tests and benchmarks.
  bool degraded() const { return inline_until_ns_ != 0; }

  // While one lives, every Run and ParallelFor of `team` (nested calls
  // included) runs inline on the caller, as in a team of size 1; workers stay
  // asleep. Scopes nest. Only the team's caller thread may create one, and
  // not from inside a task. Results do not change (see above).
  class ScopedInline {
   public:
    explicit ScopedInline(ThreadTeam& team) : team_(team) { ++team_.forced_inline_; }
    ~ScopedInline() { --team_.forced_inline_; }
    ScopedInline(const ScopedInline&) = delete;
    ScopedInline& operator=(const ScopedInline&) = delete;

   private:
    ThreadTeam& team_;
  };
  bool forced_inline() const { return forced_inline_ != 0; }

 private:
  using TaskFn = void (*)(void* ctx, size_t task, int thread);
  template <typename F>
  static void Trampoline(void* ctx, size_t task, int thread) {
    (*static_cast<F*>(ctx))(task, thread);
  }
  bool RunInline() { return inline_until_ns_ != 0 && StillInline(); }
  bool StillInline();
  void Dispatch(size_t num_tasks, TaskFn fn, void* ctx);
  void DispatchSlice(size_t base, size_t count);
  void WorkerLoop(int thread);
  // Claims and runs tasks of the job published in claim_ until none is left;
  // returns how many it ran.
  uint32_t Drain(int thread);
  void NoteWait(int64_t work_ns, int64_t wait_ns, uint32_t own_tasks, uint32_t count);

  int size_ = 1;
  std::vector<std::thread> workers_;

  // The job. claim_ packs [epoch:16 | next:24 | count:24]; a task is claimed by
  // a compare-exchange that advances `next`, so claiming needs nothing but
  // this word and a stale value can never claim: the exchange fails unless
  // the word is current. fn_, ctx_ and base_ are written by the caller before
  // it publishes claim_ (release) and read by a worker only after a
  // successful claim (acquire); they cannot change while a claimed task is
  // unfinished, because the caller waits for it first.
  alignas(64) std::atomic<uint64_t> claim_{0};
  TaskFn fn_ = nullptr;
  void* ctx_ = nullptr;
  size_t base_ = 0;  // the first task of this slice (a Run of more than 2^24 - 1 tasks has several)
  // Tasks of this slice finished by workers; the caller sleeps on it (a
  // futex word) when caller_waiting_ is set.
  alignas(64) std::atomic<uint32_t> done_{0};
  std::atomic<uint32_t> caller_waiting_{0};
  // Sleeping workers: the futex word is wake_seq_, bumped for every wake-up;
  // sleepers_ lets the caller skip the syscall when nobody sleeps.
  alignas(64) std::atomic<uint32_t> wake_seq_{0};
  std::atomic<uint32_t> sleepers_{0};
  std::atomic<bool> stop_{false};

  // Degradation state, touched only by the calling thread (see NoteWait).
  alignas(64) int64_t balance_ns_ = 0;  // time the workers saved the caller, net
  int64_t inline_until_ns_ = 0;         // run inline until this steady-clock time; 0: not degraded
  int64_t backoff_ns_ = 0;              // the next inline period
  uint32_t dispatches_since_probe_ = 0;
  int forced_inline_ = 0;  // live ScopedInline scopes (caller thread only)
};

}  // namespace lfmvox
