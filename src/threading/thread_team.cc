#include "threading/thread_team.h"

#include <algorithm>
#include <chrono>
#include <climits>

#include "threading/now.h"

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define LFM_PAUSE() _mm_pause()
#else
#define LFM_PAUSE() std::this_thread::yield()
#endif

// Memory ordering, in one place.
//
// Publishing a job (caller, DispatchSlice): write fn_, ctx_, base_, reset
// done_ to 0, then store claim_ = [epoch+1 | next 0 | count] (seq_cst, so
// release). A claim is a compare-exchange on claim_ (acq_rel): a successful
// one reads a value in the release sequence of that store (the publishing
// store followed by other threads' claims, all read-modify-writes), so it
// synchronises with the caller and sees that job's fn_, ctx_, base_ and the
// reset of done_. A thread that read claim_ earlier (a worker preempted for
// any number of jobs) holds a stale value and its exchange fails; it rereads
// and claims from the current job or finds nothing. The epoch only makes a
// stale value unlikely to repeat (ABA); a repeat would be harmless anyway,
// since the exchange succeeds only on the current word and so claims a task
// of the current job, with that job's fields visible.
//
// Completion: a worker increments done_ (seq_cst) after its task returns;
// the caller waits until done_ equals the tasks it did not run itself (an
// acquire load), so every task's writes happen before Run returns, and no
// worker still reads fn_/ctx_/base_ when the caller writes the next job's.
// Workers that claimed nothing are never waited for.
//
// Sleeping (two futex words, each a Dekker pair of seq_cst operations, so a
// wake-up is never lost and no syscall is made when nobody sleeps):
//   worker: sleepers_++ ; s = wake_seq_ ; recheck claim_ and stop_ ; futex_wait(wake_seq_, s)
//   caller: store claim_ ; if sleepers_ > 0: wake_seq_++ ; futex_wake(wake_seq_)
// Either the worker's recheck sees the new job, or the caller sees the sleeper
// and bumps wake_seq_, and then futex_wait returns at once (value changed) or
// is woken. Likewise for the caller sleeping on done_:
//   caller: caller_waiting_ = 1 ; d = done_ ; if d != target: futex_wait(done_, d)
//   worker: done_++ ; if caller_waiting_: futex_wake(done_)

namespace lfmvox {

namespace {

// claim_ layout: [epoch:16 | next:24 | count:24].
constexpr int kCountBits = 24;
constexpr uint64_t kFieldMask = (uint64_t{1} << kCountBits) - 1;
constexpr uint64_t kNextOne = uint64_t{1} << kCountBits;
constexpr int kEpochShift = 2 * kCountBits;
constexpr size_t kMaxSlice = kFieldMask;  // tasks one published word can hold

inline uint32_t Next(uint64_t w) { return static_cast<uint32_t>((w >> kCountBits) & kFieldMask); }
inline uint32_t Count(uint64_t w) { return static_cast<uint32_t>(w & kFieldMask); }
inline bool Claimable(uint64_t w) { return Next(w) < Count(w); }

// Idle workers spin this long after their last task before sleeping: the
// kernels of one decode step follow each other within microseconds, and a
// futex wake-up costs more than that (tens of µs when a virtual CPU halted).
constexpr int64_t kWorkerSpinNs = 50'000;
// The caller spins this long for a claimed task before sleeping, so a worker
// that was preempted gets the core back instead of competing with a spinner.
constexpr int64_t kCallerSpinNs = 30'000;

// Degradation (NoteWait): each dispatch the caller estimates the time the
// workers saved it: half of what their tasks would have cost it inline, at its
// own pace per task, less the time it waited for them and spent waking them
// (negative when a preempted worker held a task). The sum is capped at
// kCreditCapNs, so old gains cannot hide a new loss; when it goes below
// -kDebtLimitNs (the workers lost 1 to 3 ms net: one wait of a scheduler
// slice, or several shorter ones) the team runs inline for kMinBackoffNs,
// doubled up to kMaxBackoffNs when it degrades again within
// kRelapseDispatches of the last probe. A dispatch's own credit and wait are
// summed before the cap, so one big dispatch judges itself.
constexpr int64_t kCreditCapNs = 2'000'000;
constexpr int64_t kDebtLimitNs = 1'000'000;
constexpr int64_t kMinBackoffNs = 4'000'000;
constexpr int64_t kMaxBackoffNs = 128'000'000;
constexpr uint32_t kRelapseDispatches = 256;

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) && std::atomic<uint32_t>::is_always_lock_free,
              "the futex words must be plain 32-bit integers");

void FutexWait(std::atomic<uint32_t>* word, uint32_t expected) {
#if defined(__linux__)
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
#else
  word->wait(expected, std::memory_order_seq_cst);
#endif
}

void FutexWake(std::atomic<uint32_t>* word, int count) {
#if defined(__linux__)
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, count, nullptr, nullptr, 0);
#else
  if (count == 1) {
    word->notify_one();
  } else {
    word->notify_all();
  }
#endif
}

}  // namespace

ThreadTeam::ThreadTeam(int num_threads) : size_(std::max(1, num_threads)) {
  workers_.reserve(static_cast<size_t>(size_ - 1));
  for (int t = 1; t < size_; ++t) workers_.emplace_back([this, t] { WorkerLoop(t); });
}

ThreadTeam::~ThreadTeam() {
  stop_.store(true, std::memory_order_seq_cst);
  wake_seq_.fetch_add(1, std::memory_order_seq_cst);
  FutexWake(&wake_seq_, INT_MAX);
  for (auto& w : workers_) w.join();
}

size_t ThreadTeam::ChunkSize(size_t n, size_t align, size_t min_chunk) const {
  align = std::max<size_t>(align, 1);
  const size_t parts = static_cast<size_t>(size_) * kChunksPerThread;
  size_t chunk = std::max((n + parts - 1) / parts, min_chunk);
  chunk = (chunk + align - 1) / align * align;
  return std::max(chunk, align);
}

bool ThreadTeam::StillInline() {
  if (NowNs() < inline_until_ns_) return true;
  inline_until_ns_ = 0;  // probe: dispatch to the workers again
  dispatches_since_probe_ = 0;
  return false;
}

uint32_t ThreadTeam::Drain(int thread) {
  uint32_t ran = 0;
  uint64_t w = claim_.load(std::memory_order_acquire);
  while (Claimable(w)) {
    if (!claim_.compare_exchange_weak(w, w + kNextOne, std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
      continue;  // w now holds the current word
    }
    fn_(ctx_, base_ + Next(w), thread);
    ++ran;
    if (thread != 0) {
      done_.fetch_add(1, std::memory_order_seq_cst);
      if (caller_waiting_.load(std::memory_order_seq_cst) != 0) FutexWake(&done_, 1);
    }
    w = claim_.load(std::memory_order_acquire);
  }
  return ran;
}

void ThreadTeam::Dispatch(size_t num_tasks, TaskFn fn, void* ctx) {
  fn_ = fn;
  ctx_ = ctx;
  for (size_t base = 0; base < num_tasks; base += kMaxSlice) {
    DispatchSlice(base, std::min(kMaxSlice, num_tasks - base));
  }
}

void ThreadTeam::DispatchSlice(size_t base, size_t count) {
  base_ = base;
  done_.store(0, std::memory_order_relaxed);
  const uint64_t epoch = ((claim_.load(std::memory_order_relaxed) >> kEpochShift) + 1) & 0xffff;
  const int64_t t0 = NowNs();
  claim_.store(epoch << kEpochShift | count, std::memory_order_seq_cst);
  // Waking sleepers is a cost of going parallel (a syscall, and an IPI to a
  // halted CPU): NoteWait counts it with the waiting, not as the caller's work.
  int64_t wake_ns = 0;
  if (sleepers_.load(std::memory_order_seq_cst) != 0) {
    wake_seq_.fetch_add(1, std::memory_order_seq_cst);
    FutexWake(&wake_seq_, static_cast<int>(std::min<size_t>(count - 1, static_cast<size_t>(size_ - 1))));
    wake_ns = NowNs() - t0;
  }
  const uint32_t own = Drain(0);
  const int64_t t1 = NowNs();
  // Every task is claimed now; wait only for those a worker is running.
  const uint32_t target = static_cast<uint32_t>(count) - own;
  if (done_.load(std::memory_order_acquire) == target) {
    return NoteWait(t1 - t0 - wake_ns, wake_ns, own, static_cast<uint32_t>(count));
  }
  const int64_t spin_until = t1 + kCallerSpinNs;
  bool finished = false;
  for (int i = 1;; ++i) {
    if (done_.load(std::memory_order_acquire) == target) {
      finished = true;
      break;
    }
    if ((i & 15) == 0 && NowNs() > spin_until) break;
    LFM_PAUSE();
  }
  if (!finished) {
    caller_waiting_.store(1, std::memory_order_seq_cst);
    for (;;) {
      const uint32_t d = done_.load(std::memory_order_seq_cst);
      if (d == target) break;
      FutexWait(&done_, d);
    }
    caller_waiting_.store(0, std::memory_order_relaxed);
  }
  NoteWait(t1 - t0 - wake_ns, NowNs() - t1 + wake_ns, own, static_cast<uint32_t>(count));
}

void ThreadTeam::NoteWait(int64_t work_ns, int64_t wait_ns, uint32_t own_tasks, uint32_t count) {
  ++dispatches_since_probe_;
  // Without a task of its own the caller has no pace to compare with: no verdict.
  if (own_tasks == 0) return;
  const int64_t inline_cost = work_ns / own_tasks * (count - own_tasks);
  // Half credit: the caller's pace next to a running worker (sharing memory
  // bandwidth) overstates what inline work would cost, and the rule should
  // keep workers only where they clearly win.
  balance_ns_ = std::min(balance_ns_ + inline_cost / 2 - wait_ns, kCreditCapNs);
  if (balance_ns_ > -kDebtLimitNs) return;
  balance_ns_ = 0;
  const bool relapse = backoff_ns_ != 0 && dispatches_since_probe_ <= kRelapseDispatches;
  backoff_ns_ = relapse ? std::min(2 * backoff_ns_, kMaxBackoffNs) : kMinBackoffNs;
  inline_until_ns_ = NowNs() + backoff_ns_;
}

void ThreadTeam::WorkerLoop(int thread) {
  for (;;) {
    int64_t spin_until = NowNs() + kWorkerSpinNs;
    for (int i = 1;; ++i) {
      if (stop_.load(std::memory_order_relaxed)) return;
      if (Claimable(claim_.load(std::memory_order_relaxed))) {
        Drain(thread);
        spin_until = NowNs() + kWorkerSpinNs;
        continue;
      }
      if ((i & 15) == 0 && NowNs() > spin_until) break;
      LFM_PAUSE();
    }
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t seq = wake_seq_.load(std::memory_order_seq_cst);
    if (!stop_.load(std::memory_order_seq_cst) && !Claimable(claim_.load(std::memory_order_seq_cst))) {
      FutexWait(&wake_seq_, seq);
    }
    sleepers_.fetch_sub(1, std::memory_order_seq_cst);
  }
}

}  // namespace lfmvox
