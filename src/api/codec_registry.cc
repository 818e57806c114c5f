// The codecs of no model family, behind DetokenizerModel: Kyutai's Mimi decoder (src/codecs/mimi). It claims
// Kyutai's checkpoint (tokenizer-e351c8d8-checkpoint125.safetensors, or a folder with it: an LFM2-Audio-1.5B
// snapshot) and flat Mimi folders (config.json with its seanet/quantizer sections), but never a folder with
// audio_detokenizer/: LFM2.5-Audio ships the same Mimi file, and its speech output is its own detokenizer.
#include <filesystem>
#include <span>

#include "api/family.h"
#include "codecs/mimi/mimi_decoder.h"

namespace lfmvox {
namespace {

class MimiCodecStream final : public FamilyCodecStream {
 public:
  explicit MimiCodecStream(std::unique_ptr<MimiSession> s) : s_(std::move(s)) {}
  Result<size_t> Step(std::span<const int32_t> codes, std::span<float> pcm, ThreadTeam& team) override {
    return s_->Step(codes, pcm, team);
  }
  Result<size_t> Flush(std::span<float> pcm) override { return s_->Flush(pcm); }
  void Reset() override { s_->Reset(); }

 private:
  std::unique_ptr<MimiSession> s_;
};

class MimiCodec final : public FamilyCodec {
 public:
  explicit MimiCodec(std::unique_ptr<MimiDecoder> d) : d_(std::move(d)) {}
  int sample_rate() const override { return d_->config().sample_rate; }
  int num_codebooks() const override { return d_->config().num_codebooks; }
  int codebook_size() const override { return d_->config().codebook_size; }
  int samples_per_frame() const override { return static_cast<int>(d_->samples_per_frame()); }
  int tail_samples() const override { return 0; }  // no look-ahead: every frame is final when stepped
  // The official streaming decode (LFM2-Audio's demo: one frame per call in mimi.streaming(1)).
  Result<std::unique_ptr<FamilyCodecStream>> CreateStream(size_t max_frames_per_call,
                                                          int max_threads) const override {
    LFM_ASSIGN_OR_RETURN(std::unique_ptr<MimiSession> s,
                         MimiSession::Create(*d_, max_frames_per_call, max_threads, MimiWindow::kStreaming));
    return std::unique_ptr<FamilyCodecStream>(new MimiCodecStream(std::move(s)));
  }

 private:
  std::unique_ptr<MimiDecoder> d_;
};

bool ClaimsMimi(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(std::filesystem::path(path) / "audio_detokenizer", ec)) return false;
  return MimiDecoder::Recognizes(path);
}

Result<std::unique_ptr<FamilyCodec>> LoadMimi(const std::string& path, const ModelOptions& options) {
  LFM_ASSIGN_OR_RETURN(std::unique_ptr<MimiDecoder> d, MimiDecoder::Load(path, options.check_weights));
  return std::unique_ptr<FamilyCodec>(new MimiCodec(std::move(d)));
}

const CodecEntry kMimi = {"Mimi", &ClaimsMimi, &LoadMimi};
const CodecEntry* const kCodecs[] = {&kMimi};

}  // namespace

std::span<const CodecEntry* const> Codecs() { return kCodecs; }

}  // namespace lfmvox
