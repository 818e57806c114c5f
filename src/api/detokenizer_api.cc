// The public detokenizer API: thin ownership wrappers over a family's speech decoder
// (FamilyCodec, api/family.h).
#include <mutex>

#include "api/engine_core.h"
#include "api/family.h"
#include "base/guard.h"
#include "base/status.h"
#include "blocks/weights.h"
#include "lfmvox/lfmvox.h"
#include "threading/thread_team.h"

namespace lfmvox {

struct DetokenizerModel::Impl {
  std::unique_ptr<FamilyCodec> codec;
};

struct DetokenizerStream::Impl {
  std::shared_ptr<Engine> engine;  // first: destroyed last
  std::shared_ptr<const DetokenizerModel> model;
  std::unique_ptr<FamilyCodecStream> session;
};

DetokenizerModel::DetokenizerModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DetokenizerModel::~DetokenizerModel() = default;

Result<std::shared_ptr<const DetokenizerModel>> DetokenizerModel::Load(const std::string& model_dir) {
  return Load(model_dir, ModelOptions{});
}

Result<std::shared_ptr<const DetokenizerModel>> DetokenizerModel::Load(const std::string& model_dir,
                                                                       const ModelOptions& options) {
  return Guard("DetokenizerModel::Load", [&]() -> Result<std::shared_ptr<const DetokenizerModel>> {
    if (!options.weights.empty()) {
      return InvalidArgument("DetokenizerModel::Load converts no weights; leave ModelOptions::weights empty");
    }
    auto impl = std::make_unique<Impl>();
    LFM_ASSIGN_OR_RETURN(impl->codec, LoadFamilyCodec(model_dir, options));
    return std::shared_ptr<const DetokenizerModel>(new DetokenizerModel(std::move(impl)));
  });
}

int DetokenizerModel::sample_rate() const { return impl_->codec->sample_rate(); }
int DetokenizerModel::num_codebooks() const { return impl_->codec->num_codebooks(); }
int DetokenizerModel::codebook_size() const { return impl_->codec->codebook_size(); }
int DetokenizerModel::samples_per_frame() const { return impl_->codec->samples_per_frame(); }
int DetokenizerModel::tail_samples() const { return impl_->codec->tail_samples(); }

DetokenizerStream::DetokenizerStream(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DetokenizerStream::~DetokenizerStream() = default;

Result<std::unique_ptr<DetokenizerStream>> DetokenizerStream::Create(
    std::shared_ptr<const DetokenizerModel> model, const StreamOptions& options) {
  return Guard("DetokenizerStream::Create", [&]() -> Result<std::unique_ptr<DetokenizerStream>> {
    if (model == nullptr) return InvalidArgument("DetokenizerStream::Create needs a loaded model");
    auto impl = std::make_unique<Impl>();
    impl->engine = options.engine;
    if (impl->engine == nullptr) {
      LFM_ASSIGN_OR_RETURN(impl->engine, Engine::Create({.threads = options.threads, .max_batch = 1}));
    }
    LFM_ASSIGN_OR_RETURN(impl->session, model->impl_->codec->CreateStream(options.max_frames_per_call,
                                                                          impl->engine->options().threads));
    impl->model = std::move(model);
    return std::unique_ptr<DetokenizerStream>(new DetokenizerStream(std::move(impl)));
  });
}

const DetokenizerModel& DetokenizerStream::model() const { return *impl_->model; }

Result<size_t> DetokenizerStream::Step(std::span<const int32_t> codes, std::span<float> pcm) {
  return Guard("DetokenizerStream::Step", [&]() -> Result<size_t> {
    EngineCore& core = *impl_->engine->impl_;
    std::lock_guard lock(core.mu);  // the engine's pool runs one step at a time
    LFM_ASSIGN_OR_RETURN(const size_t n, impl_->session->Step(codes, pcm, core.team));
    LFM_RETURN_IF_ERROR(CheckFiniteOutput(pcm.first(n), "the decoded speech"));
    return n;
  });
}

Result<size_t> DetokenizerStream::Flush(std::span<float> pcm) {
  return Guard("DetokenizerStream::Flush", [&]() -> Result<size_t> {
    LFM_ASSIGN_OR_RETURN(const size_t n, impl_->session->Flush(pcm));
    LFM_RETURN_IF_ERROR(CheckFiniteOutput(pcm.first(n), "the decoded speech"));
    return n;
  });
}

void DetokenizerStream::Reset() { impl_->session->Reset(); }

}  // namespace lfmvox
