// The public Engine: one pool, one lock, one worker per model, and the batched Step.
#include <algorithm>

#include "api/engine_core.h"
#include "base/guard.h"
#include "base/status.h"
#include "lfmvox/lfmvox.h"

namespace lfmvox {

Result<std::shared_ptr<FamilyWorker>> EngineCore::WorkerFor(const std::shared_ptr<const AudioModel>& model,
                                                            const FamilyModel& family) {
  // Forget the workers of models that are gone (their sessions hold their own references).
  std::erase_if(workers_, [](const Entry& e) { return e.model.expired(); });
  for (const Entry& e : workers_) {
    if (e.model.lock() == model) return e.worker;
  }
  LFM_ASSIGN_OR_RETURN(std::shared_ptr<FamilyWorker> w, family.CreateWorker(options));
  workers_.push_back({model, w});
  return w;
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

Result<std::shared_ptr<Engine>> Engine::Create(const EngineOptions& o) {
  return Guard("Engine::Create", [&]() -> Result<std::shared_ptr<Engine>> {
    if (o.threads < 1 || o.threads > kMaxThreads) {
      return InvalidArgument(StrFormat("threads must be in [1, %d]", kMaxThreads));
    }
    if (o.max_batch < 1 || o.max_batch > 1024) return InvalidArgument("max_batch must be in [1, 1024]");
    if (o.prefill_rows < 1 || o.prefill_rows > 4096)
      return InvalidArgument("prefill_rows must be in [1, 4096]");
    if (!(o.max_clip_seconds > 0 && o.max_clip_seconds <= 3600)) {
      return InvalidArgument("max_clip_seconds must be in (0, 3600]");
    }
    auto impl = std::make_unique<Impl>(o);
    impl->group.reserve(o.max_batch);
    impl->pending.reserve(o.max_batch);
    return std::shared_ptr<Engine>(new Engine(std::move(impl)));
  });
}

const EngineOptions& Engine::options() const { return impl_->options; }

}  // namespace lfmvox
