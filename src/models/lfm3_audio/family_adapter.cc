// The LFM3-Audio family behind the public API (src/api/family.h): today its speech decoder (the
// LiquidCodec, codec.h) behind DetokenizerModel, and the registry entry that claims its files. The
// backbone and the generation loop exist in the library (backbone.h, generation.h; no oracle, see the
// folder's README) but not behind FamilyModel yet, so loading it as an AudioModel is a clear error. Compiled
// into the API library (lfmvox_family in CMakeLists.txt), not into lfmvox_lfm3.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "api/family.h"
#include "models/lfm3_audio/codec.h"

namespace lfmvox {
namespace {

class Lfm3CodecStream final : public FamilyCodecStream {
 public:
  explicit Lfm3CodecStream(std::unique_ptr<Lfm3CodecSession> s) : s_(std::move(s)) {}
  Result<size_t> Step(std::span<const int32_t> codes, std::span<float> pcm, ThreadTeam& team) override {
    return s_->Step(codes, pcm, team);
  }
  Result<size_t> Flush(std::span<float> pcm) override { return s_->Flush(pcm); }
  void Reset() override { s_->Reset(); }

 private:
  std::unique_ptr<Lfm3CodecSession> s_;
};

class Lfm3FamilyCodec final : public FamilyCodec {
 public:
  explicit Lfm3FamilyCodec(std::unique_ptr<Lfm3Codec> c) : c_(std::move(c)) {}
  int sample_rate() const override { return c_->config().sample_rate; }
  int num_codebooks() const override { return static_cast<int>(c_->codebooks()); }
  // The end-of-audio code is never decoded: a stream takes [0, audio_eos).
  int codebook_size() const override { return c_->audio_eos(); }
  int samples_per_frame() const override { return static_cast<int>(c_->samples_per_frame()); }
  int tail_samples() const override { return static_cast<int>(c_->tail_samples()); }
  Result<std::unique_ptr<FamilyCodecStream>> CreateStream(size_t max_frames_per_call,
                                                          int max_threads) const override {
    LFM_ASSIGN_OR_RETURN(std::unique_ptr<Lfm3CodecSession> s,
                         Lfm3CodecSession::Create(*c_, max_frames_per_call, max_threads));
    return std::unique_ptr<FamilyCodecStream>(new Lfm3CodecStream(std::move(s)));
  }

 private:
  std::unique_ptr<Lfm3Codec> c_;
};

Result<std::unique_ptr<FamilyCodec>> LoadLfm3Codec(const std::string& dir) {
  LFM_ASSIGN_OR_RETURN(std::unique_ptr<Lfm3Codec> c, Lfm3Codec::Load(dir));
  return std::unique_ptr<FamilyCodec>(new Lfm3FamilyCodec(std::move(c)));
}

Result<std::unique_ptr<FamilyModel>> LoadLfm3Model(const std::string& dir, const ModelOptions&) {
  return Unimplemented(
      dir +
      " holds an LFM3-Audio model: lfmvox decodes its speech (DetokenizerModel, `lfmvox "
      "detokenize`) but does not yet run its backbone and generation loop behind the public API");
}

// The LFM3 speech-output layout (lfm3_config.h): a "model_type" naming LFM3, or the "depth_decoder"
// and "codec" sections side by side.
bool ClaimsLfm3(const FamilyFiles& f) {
  if (f.config == nullptr || !f.config->is_object()) return false;
  const nlohmann::json& c = *f.config;
  const auto type = c.find("model_type");
  if (type != c.end() && type->is_string() && type->get<std::string>().starts_with("lfm3")) return true;
  return c.contains("depth_decoder") && c.contains("codec");
}

}  // namespace

extern const FamilyEntry k_lfm3_family;
const FamilyEntry k_lfm3_family = {"LFM3-Audio", "model_type \"lfm3_audio…\"", &ClaimsLfm3, &LoadLfm3Model,
                                   &LoadLfm3Codec};

}  // namespace lfmvox
