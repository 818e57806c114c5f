// The public detokenizer API: thin ownership wrappers over the model code.
#include "lfmvox/lfmvox.h"
#include "models/lfm25_audio/detokenizer.h"
#include "threading/thread_team.h"

namespace lfmvox {

DetokenizerModel::DetokenizerModel(std::unique_ptr<Lfm25Detokenizer> impl) : impl_(std::move(impl)) {}
DetokenizerModel::~DetokenizerModel() = default;

Result<std::shared_ptr<const DetokenizerModel>> DetokenizerModel::Load(const std::string& model_dir) {
  LFM_ASSIGN_OR_RETURN(std::unique_ptr<Lfm25Detokenizer> m, Lfm25Detokenizer::Load(model_dir));
  return std::shared_ptr<const DetokenizerModel>(new DetokenizerModel(std::move(m)));
}

int DetokenizerModel::sample_rate() const { return impl_->config().sample_rate; }
int DetokenizerModel::num_codebooks() const { return impl_->config().num_codebooks; }
int DetokenizerModel::codebook_size() const { return impl_->config().codebook_size; }
int DetokenizerModel::samples_per_frame() const { return impl_->config().samples_per_frame(); }
int DetokenizerModel::tail_samples() const { return (impl_->config().n_fft - impl_->config().hop) / 2; }

DetokenizerStream::~DetokenizerStream() = default;

Result<std::unique_ptr<DetokenizerStream>> DetokenizerStream::Create(
    std::shared_ptr<const DetokenizerModel> model, const StreamOptions& options) {
  if (model == nullptr) return InvalidArgument("DetokenizerStream::Create needs a loaded model");
  if (options.threads < 1 || options.threads > 256) return InvalidArgument("threads must be in [1, 256]");
  auto s = std::unique_ptr<DetokenizerStream>(new DetokenizerStream());
  LFM_ASSIGN_OR_RETURN(s->session_, Lfm25DetokenizerSession::Create(
                                        model->impl(), options.max_frames_per_call, options.threads));
  s->team_ = std::make_unique<ThreadTeam>(options.threads);
  s->model_ = std::move(model);
  return s;
}

Result<size_t> DetokenizerStream::Push(std::span<const int32_t> codes, std::span<float> pcm) {
  return session_->Decode(codes, pcm, *team_);
}

Result<size_t> DetokenizerStream::Flush(std::span<float> pcm) { return session_->Flush(pcm); }

void DetokenizerStream::Reset() { session_->Reset(); }

}  // namespace lfmvox
