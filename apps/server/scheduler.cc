#include "scheduler.h"

#include <algorithm>

namespace lfmvox::server {

std::vector<Event> Job::Take(bool* finished) {
  std::lock_guard lock(mu_);
  std::vector<Event> out(std::make_move_iterator(events_.begin()), std::make_move_iterator(events_.end()));
  events_.clear();
  *finished = finished_;
  return out;
}

void Job::SetNotify(std::function<void()> notify) {
  std::lock_guard lock(mu_);
  notify_ = std::move(notify);
}

void Job::Push(Event e) {
  std::function<void()> notify;
  {
    std::lock_guard lock(mu_);
    if (e.kind == Event::kDone || e.kind == Event::kError) finished_ = true;
    events_.push_back(std::move(e));
    notify = notify_;
  }
  if (notify) notify();
}

Status RecordedTurn::Replay(Conversation& c) const {
  if (Status st = c.StartTurn("assistant"); !st.ok()) return st;
  const size_t C = num_codebooks;
  for (int32_t i : items) {
    if (i >= 0) {
      if (Status st = c.AddTokens({&i, 1}); !st.ok()) return st;
    } else {
      if (Status st = c.AddAudioOut({codes.data() + static_cast<size_t>(-1 - i) * C, C}); !st.ok()) return st;
    }
  }
  return c.EndTurn();
}

Result<std::unique_ptr<Scheduler>> Scheduler::Create(std::shared_ptr<const AudioModel> model,
                                                     const SchedulerOptions& options, Metrics* metrics) {
  if (options.max_sessions < 1) return InvalidArgument("max_sessions must be at least 1");
  auto engine = Engine::Create({.threads = options.threads,
                                .max_batch = options.max_sessions,
                                .max_clip_seconds = options.max_clip_seconds});
  if (!engine.ok()) return engine.status();
  std::unique_ptr<Scheduler> s(new Scheduler());
  s->model_ = std::move(model);
  s->engine_ = *engine;
  s->options_ = options;
  s->metrics_ = metrics;
  s->thread_ = std::thread([p = s.get()] { p->Run(); });
  return s;
}

Scheduler::~Scheduler() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

size_t Scheduler::queued() const {
  std::lock_guard lock(mu_);
  return pending_.size();
}

Result<std::shared_ptr<Job>> Scheduler::Submit(JobSpec spec) {
  auto job = std::make_shared<Job>();
  job->spec = std::move(spec);
  job->admitted = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mu_);
    if (pending_.size() >= options_.max_queued) {
      return OutOfRange("the server is busy: " + std::to_string(pending_.size()) +
                        " requests are already waiting; retry shortly");
    }
    pending_.push_back(job);
  }
  cv_.notify_all();
  return job;
}

void Scheduler::Start(std::shared_ptr<Job> job) {
  if (job->cancelled() && !job->spec.conversation) {
    job->Push(Event::Error(Cancelled("the client went away before its turn")));
    return;
  }
  std::shared_ptr<Conversation> conv = job->spec.conversation;
  Status st;
  if (!conv) {
    auto c = Conversation::Create(model_,
                                  {.context = options_.context, .seed = job->spec.seed, .engine = engine_});
    if (c.ok()) {
      conv = std::move(c).value();
    } else {
      st = c.status();
    }
  }
  if (st.ok()) st = job->spec.prompt(*conv);
  OutputCallbacks cb;
  Job* j = job.get();
  const AudioModel* model = model_.get();
  Metrics* metrics = metrics_;
  if (job->spec.record_turn) job->recording = std::make_shared<RecordedTurn>();
  RecordedTurn* rec = job->recording.get();
  cb.on_text = [j, model, rec](int32_t id, std::string_view piece) {
    if (rec) rec->items.push_back(id);
    if (!model->IsSpecialToken(id) && !piece.empty()) j->Push(Event::Text(std::string(piece)));
    return Status::Ok();
  };
  if (job->spec.text_only) {
    cb.on_audio_frame = [j](std::span<const int32_t>, bool) {
      j->Cancel();  // the answer turned to speech: a text-only answer ends here
      return Status::Ok();
    };
  } else if (rec) {
    cb.on_audio_frame = [rec](std::span<const int32_t> codes, bool) {
      rec->num_codebooks = codes.size();
      rec->items.push_back(-1 - static_cast<int32_t>(rec->codes.size() / codes.size()));
      rec->codes.insert(rec->codes.end(), codes.begin(), codes.end());
      return Status::Ok();
    };
  }
  if (job->spec.want_pcm) {
    cb.on_pcm = [j, metrics](std::span<const float> pcm) {
      if (!j->first_audio_seen && !pcm.empty()) {
        j->first_audio_seen = true;
        metrics->time_to_first_audio().Observe(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - j->admitted).count());
      }
      j->pcm_samples += pcm.size();
      j->Push(Event::Pcm(std::vector<float>(pcm.begin(), pcm.end())));
      return Status::Ok();
    };
  }
  if (st.ok()) st = conv->BeginGenerate(job->spec.options, cb);
  if (!st.ok()) {
    job->Push(Event::Error(st));
    return;
  }
  sessions_.push_back({std::move(job), std::move(conv)});
}

void Scheduler::Finish(Session& s) {
  auto r = s.conv->FinishGenerate();
  if (!r.ok()) {
    s.job->Push(Event::Error(r.status()));
    return;
  }
  const double audio = static_cast<double>(r->pcm_samples) / model_->sample_rate();
  if (audio > 0) {
    metrics_->AddAudioOut(audio);
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - s.job->admitted).count();
    metrics_->real_time_factor().Observe(wall / audio);
  }
  Event done = Event::Done(*r);
  done.turn = std::move(s.job->recording);
  s.job->Push(std::move(done));
}

void Scheduler::Run() {
  std::vector<Conversation*> batch;
  for (;;) {
    std::vector<std::shared_ptr<Job>> starting;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !pending_.empty() || !sessions_.empty(); });
      if (stop_) break;
      while (!pending_.empty() && sessions_.size() + starting.size() < options_.max_sessions) {
        starting.push_back(std::move(pending_.front()));
        pending_.pop_front();
      }
    }
    for (auto& job : starting) Start(std::move(job));
    active_count_.store(sessions_.size());
    batch.clear();
    for (Session& s : sessions_) {
      if (s.job->cancelled() && !s.cancel_sent) {
        s.conv->Cancel();
        s.cancel_sent = true;
      }
      batch.push_back(s.conv.get());
    }
    if (!batch.empty()) {
      auto left = engine_->Step(batch);
      if (!left.ok()) {
        // A broken step fails every session in it (the engine said why).
        for (Session& s : sessions_) {
          (void)s.conv->FinishGenerate();
          s.job->Push(Event::Error(left.status()));
        }
        sessions_.clear();
      }
    }
    for (size_t i = 0; i < sessions_.size();) {
      if (!sessions_[i].conv->generating()) {
        Finish(sessions_[i]);
        sessions_.erase(sessions_.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
    active_count_.store(sessions_.size());
  }
  for (Session& s : sessions_) {
    s.conv->Cancel();
    (void)s.conv->FinishGenerate();
    s.job->Push(Event::Error(Cancelled("the server is shutting down")));
  }
  sessions_.clear();
  std::lock_guard lock(mu_);
  for (auto& job : pending_) job->Push(Event::Error(Cancelled("the server is shutting down")));
  pending_.clear();
  active_count_.store(0);
}

}  // namespace lfmvox::server
