// The scheduler: one thread owns the Engine and steps every active session together (Engine::Step),
// so N clients share batched passes. Network threads only submit jobs and take the events they
// produce; they never touch a Conversation. Thread-safe (Submit and the Job methods from any thread).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "lfmvox/lfmvox.h"
#include "metrics.h"

namespace lfmvox::server {

// A generated assistant turn as the history holds it (JobSpec::record_turn): each item a text token id
// (≥ 0) or an audio frame (−1 − its index into codes, frame-major [frames, num_codebooks]), in order; a
// later request replays it into its conversation (AddTokens / AddAudioOut) for the exact history.
struct RecordedTurn {
  std::vector<int32_t> items;
  std::vector<int32_t> codes;
  size_t num_codebooks = 0;
  size_t bytes() const { return (items.size() + codes.size()) * sizeof(int32_t); }
  // StartTurn("assistant"), the items, EndTurn.
  Status Replay(Conversation& c) const;
};

// One thing a job produced, in order.
struct Event {
  enum Kind { kText, kPcm, kDone, kError } kind = kText;
  std::string text;                          // kText: the piece (control tokens are left out)
  std::vector<float> pcm;                    // kPcm: up to 80 ms of 24 kHz speech
  GenerateSummary summary;                   // kDone
  std::shared_ptr<const RecordedTurn> turn;  // kDone, with JobSpec::record_turn
  Status error;                              // kError: the request failed inside the engine (after admission)

  static Event Text(std::string t) {
    Event e;
    e.text = std::move(t);
    return e;
  }
  static Event Pcm(std::vector<float> p) {
    Event e;
    e.kind = kPcm;
    e.pcm = std::move(p);
    return e;
  }
  static Event Done(const GenerateSummary& s) {
    Event e;
    e.kind = kDone;
    e.summary = s;
    return e;
  }
  static Event Error(Status s) {
    Event e;
    e.kind = kError;
    e.error = std::move(s);
    return e;
  }
};

// What a request asks the engine to do.
struct JobSpec {
  // Builds the prompt on a fresh conversation (runs on the scheduler thread).
  std::function<Status(Conversation&)> prompt;
  GenerateOptions options;
  uint64_t seed = 0;
  bool want_pcm = true;
  bool text_only = false;    // stop at the first audio frame (a text-only chat answer)
  bool record_turn = false;  // the Done event carries the generated turn (RecordedTurn)
  // A conversation that outlives the job (a realtime session's, created on engine()): the prompt
  // continues it instead of a fresh one. Only the scheduler thread touches it while the job runs.
  std::shared_ptr<Conversation> conversation;
};

class Job {
 public:
  // Network side. Moves out every queued event; *finished once kDone or kError has been taken.
  std::vector<Event> Take(bool* finished);
  // Called (from the scheduler thread) after events are queued; set it before reading.
  void SetNotify(std::function<void()> notify);
  // The client is gone or asked to stop: the scheduler cancels the session at its next step.
  void Cancel() { cancel_.store(true); }
  bool cancelled() const { return cancel_.load(); }

  // Scheduler side.
  void Push(Event e);

  JobSpec spec;
  std::chrono::steady_clock::time_point admitted;
  bool first_audio_seen = false;
  size_t pcm_samples = 0;
  std::shared_ptr<RecordedTurn> recording;  // with spec.record_turn (scheduler thread)

 private:
  std::mutex mu_;
  std::deque<Event> events_;
  bool finished_ = false;
  std::function<void()> notify_;
  std::atomic<bool> cancel_{false};
};

struct SchedulerOptions {
  int threads = 1;
  size_t max_sessions = 4;  // sessions stepped together (the engine's max_batch)
  size_t max_queued = 16;   // admitted requests waiting for a slot; more is refused
  size_t context = 4096;
  double max_clip_seconds = 60;
};

class Scheduler {
 public:
  static Result<std::unique_ptr<Scheduler>> Create(std::shared_ptr<const AudioModel> model,
                                                   const SchedulerOptions& options, Metrics* metrics);
  ~Scheduler();  // cancels every session and joins the thread

  // Queues a request. OutOfRange when max_queued requests are already waiting.
  Result<std::shared_ptr<Job>> Submit(JobSpec spec);

  size_t active() const { return active_count_.load(); }
  size_t queued() const;
  const AudioModel& model() const { return *model_; }
  const std::shared_ptr<const AudioModel>& model_ptr() const { return model_; }
  const std::shared_ptr<Engine>& engine() const { return engine_; }
  const SchedulerOptions& options() const { return options_; }

 private:
  Scheduler() = default;
  void Run();
  struct Session {
    std::shared_ptr<Job> job;
    std::shared_ptr<Conversation> conv;
    bool cancel_sent = false;
  };
  void Start(std::shared_ptr<Job> job);
  void Finish(Session& s);

  std::shared_ptr<const AudioModel> model_;
  std::shared_ptr<Engine> engine_;
  SchedulerOptions options_;
  Metrics* metrics_ = nullptr;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> pending_;
  bool stop_ = false;
  std::atomic<size_t> active_count_{0};
  std::vector<Session> sessions_;  // scheduler thread only
  std::thread thread_;
};

}  // namespace lfmvox::server
