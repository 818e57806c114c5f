#include "io/audio_file.h"
#include "io/codes_file.h"
#include "lfmvox/audio_io.h"

namespace lfmvox {

Result<std::vector<int32_t>> LoadCodes(const std::string& path, int num_codebooks) {
  LFM_ASSIGN_OR_RETURN(CodeFrames frames, ReadCodesFile(path, num_codebooks));
  return std::move(frames.codes);
}

namespace {

class WavOutput final : public PcmOutput {
 public:
  explicit WavOutput(WavWriter w) : w_(std::move(w)) {}
  Status Write(std::span<const float> s) override { return w_.Write(s); }
  Status Close() override { return w_.Close(); }

 private:
  WavWriter w_;
};

class StdoutOutput final : public PcmOutput {
 public:
  explicit StdoutOutput(PcmFormat f) : format_(f) {}
  Status Write(std::span<const float> s) override { return WriteRawPcm(stdout, s, format_); }
  Status Close() override {
    return std::fflush(stdout) == 0 ? Status::Ok() : IoError("flushing stdout failed");
  }

 private:
  PcmFormat format_;
};

}  // namespace

Result<std::unique_ptr<PcmOutput>> PcmOutput::Open(const std::string& path, int sample_rate,
                                                   PcmFormat format) {
  if (path == "-") return std::unique_ptr<PcmOutput>(new StdoutOutput(format));
  LFM_ASSIGN_OR_RETURN(WavWriter w, WavWriter::Create(path, sample_rate, 1, format));
  return std::unique_ptr<PcmOutput>(new WavOutput(std::move(w)));
}

}  // namespace lfmvox
