// What an Engine holds (Engine::Impl): the one thread pool, the lock that
// makes steps run one at a time, and one worker (step scratch) per model.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "api/family.h"
#include "lfmvox/lfmvox.h"
#include "threading/thread_team.h"

namespace lfmvox {

struct EngineCore {
  explicit EngineCore(const EngineOptions& o) : options(o), team(o.threads) {}

  // The worker for `model` on this engine, made on first use. Call with `mu` held.
  Result<std::shared_ptr<FamilyWorker>> WorkerFor(const std::shared_ptr<const AudioModel>& model,
                                                  const FamilyModel& family);

  EngineOptions options;
  ThreadTeam team;
  std::mutex mu;  // one step (or encode, or flush) at a time

 private:
  struct Entry {
    std::weak_ptr<const AudioModel> model;
    std::shared_ptr<FamilyWorker> worker;
  };
  std::vector<Entry> workers_;
};

struct Engine::Impl : EngineCore {
  using EngineCore::EngineCore;
  // Step's grouping, reserved once for max_batch conversations.
  std::vector<FamilySession*> group;
  std::vector<Conversation*> pending;
};

}  // namespace lfmvox
