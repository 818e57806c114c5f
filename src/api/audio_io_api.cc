#include <sndfile.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>

#include "base/file_write.h"
#include "base/guard.h"
#include "io/audio_file.h"
#include "io/codes_file.h"
#include "io/ffmpeg_audio.h"
#include "lfmvox/audio_io.h"

namespace lfmvox {

Result<std::vector<int32_t>> LoadCodes(const std::string& path, int num_codebooks) {
  return Guard("LoadCodes", [&]() -> Result<std::vector<int32_t>> {
    LFM_ASSIGN_OR_RETURN(CodeFrames frames, ReadCodesFile(path, num_codebooks));
    return std::move(frames.codes);
  });
}

Result<DecodedAudio> DecodeAudio(std::string_view bytes, double max_seconds) {
  LFM_ASSIGN_OR_RETURN(AudioBuffer a, ReadAudioMemory(bytes, AudioLimits{.max_seconds = max_seconds}));
  return DecodedAudio{a.sample_rate, a.channels, std::move(a.samples)};
}

namespace {

int SfFormat(AudioFileFormat f) {
  switch (f) {
    case AudioFileFormat::kWav:
      return SF_FORMAT_WAV | SF_FORMAT_PCM_16;
    case AudioFileFormat::kFlac:
      return SF_FORMAT_FLAC | SF_FORMAT_PCM_16;
    case AudioFileFormat::kOpus:
      return SF_FORMAT_OGG | SF_FORMAT_OPUS;
    case AudioFileFormat::kMp3:
      return SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III;
    case AudioFileFormat::kAac:
      return 0;  // FFmpeg's
  }
  return 0;
}

}  // namespace

bool CanEncodeAudio(AudioFileFormat format, int sample_rate) {
  if (format == AudioFileFormat::kAac) return CanEncodeFfmpeg(FfmpegFormat::kAdtsAac, sample_rate);
  return CanWriteAudioFormat(SfFormat(format), sample_rate);
}

Result<std::string> EncodeAudio(std::span<const float> mono, int sample_rate, AudioFileFormat format) {
  return Guard("EncodeAudio", [&]() -> Result<std::string> {
    if (format == AudioFileFormat::kAac) return EncodeFfmpegMemory(mono, sample_rate, FfmpegFormat::kAdtsAac);
    return WriteAudioMemory(mono, sample_rate, SfFormat(format));
  });
}

void AppendPcmBytes(std::span<const float> samples, PcmFormat format, std::string* out) {
  const size_t width = format == PcmFormat::kS16 ? 2 : 4;
  const size_t start = out->size();
  out->resize(start + samples.size() * width);
  char* p = out->data() + start;
  for (float x : samples) {
    uint32_t u;
    if (format == PcmFormat::kS16) {
      u = static_cast<uint16_t>(FloatToS16(x));
    } else {
      std::memcpy(&u, &x, 4);
    }
    for (size_t b = 0; b < width; ++b) *p++ = static_cast<char>(u >> (8 * b));
  }
}

namespace {

// The file outputs, all or nothing under OutputFile's policy (base/file_write.h): a failed write or
// close, or destruction without Close (a run that failed), leaves `path` as it was. WavWriter
// (libsndfile's containers) owns its OutputFile; FfmpegWriter (AAC) encodes into `out`'s stream.
template <class Writer>
class FileOutput final : public PcmOutput {
 public:
  FileOutput(Writer w, std::optional<OutputFile> out, std::string path)
      : w_(std::move(w)), out_(std::move(out)), path_(std::move(path)) {}
  Status Write(std::span<const float> s) override {
    if (!w_) return InvalidArgument("PcmOutput::Write after Close (" + path_ + ")");
    Status st = w_->Write(s);
    if (!st.ok()) Discard();
    return st;
  }
  Status Close() override {
    if (!w_) return failed_ ? IoError(path_ + " was not written (an earlier error)") : Status::Ok();
    Status st = w_->Close();
    if (st.ok() && out_) st = out_->Commit();
    if (!st.ok()) {
      Discard();
      return st;
    }
    w_.reset();
    out_.reset();
    return Status::Ok();
  }

 private:
  void Discard() {
    failed_ = true;
    w_.reset();
    out_.reset();
  }

  std::optional<Writer> w_;
  std::optional<OutputFile> out_;
  std::string path_;
  bool failed_ = false;
};

// The container from the extension (case-insensitive): .flac, .ogg/.opus (Opus), .mp3, .m4a/.aac (AAC);
// anything else (.wav included) WAV of `format`. Returns the libsndfile format word (0: WAV), or through
// *ffmpeg an FFmpeg format. FLAC, Opus, MP3 and AAC hold 16-bit-range samples.
Result<int> FormatForPath(const std::string& path, int sample_rate, PcmFormat format,
                          std::optional<FfmpegFormat>* ffmpeg) {
  std::string ext = std::filesystem::path(path).extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  AudioFileFormat f;
  if (ext == ".m4a" || ext == ".aac") {
    *ffmpeg = ext == ".m4a" ? FfmpegFormat::kM4aAac : FfmpegFormat::kAdtsAac;
    f = AudioFileFormat::kAac;
  } else if (ext == ".flac") {
    f = AudioFileFormat::kFlac;
  } else if (ext == ".ogg" || ext == ".opus") {
    f = AudioFileFormat::kOpus;
  } else if (ext == ".mp3") {
    f = AudioFileFormat::kMp3;
  } else {
    return 0;
  }
  if (format == PcmFormat::kF32) {
    return InvalidArgument(path + ": " + ext + " files hold 16-bit samples; drop --pcm f32 or write a .wav");
  }
  if (!CanEncodeAudio(f, sample_rate)) {
    return Unimplemented(StrFormat("%s: this build cannot write %s at %d Hz; write a .wav or .flac",
                                   path.c_str(), ext.c_str(), sample_rate));
  }
  return SfFormat(f);
}

class StdoutOutput final : public PcmOutput {
 public:
  explicit StdoutOutput(PcmFormat f) : format_(f) {}
  Status Write(std::span<const float> s) override {
    const Status st = WriteRawPcm(stdout, s, format_);
    return st.ok() ? st : Failed(st);
  }
  Status Close() override {
    if (std::fflush(stdout) == 0) return Status::Ok();
    return Failed(IoError(std::string("cannot flush PCM: ") + std::strerror(errno)));
  }

 private:
  // errno is still the failed write's.
  static Status Failed(const Status& st) {
    if (errno == EPIPE) return IoError("cannot write PCM to stdout: its reader went away before the end");
    return st.WithContext("stdout");
  }

  PcmFormat format_;
};

}  // namespace

Result<std::unique_ptr<PcmOutput>> PcmOutput::Open(const std::string& path, int sample_rate,
                                                   PcmFormat format) {
  return Guard("PcmOutput::Open", [&]() -> Result<std::unique_ptr<PcmOutput>> {
    if (path == "-") return std::unique_ptr<PcmOutput>(new StdoutOutput(format));
    std::optional<FfmpegFormat> ffmpeg;
    LFM_ASSIGN_OR_RETURN(const int sf_format, FormatForPath(path, sample_rate, format, &ffmpeg));
    if (ffmpeg) {
      LFM_ASSIGN_OR_RETURN(OutputFile out, OutputFile::Open(path));
      FILE* file = out.stream();
      if (file == nullptr) return IoError("cannot write " + path + ": " + std::strerror(errno));
      Result<FfmpegWriter> w = FfmpegWriter::Create(file, nullptr, sample_rate, *ffmpeg);
      if (!w.ok()) return w.status().WithContext(path);
      return std::unique_ptr<PcmOutput>(
          new FileOutput<FfmpegWriter>(std::move(w).value(), std::move(out), path));
    }
    LFM_ASSIGN_OR_RETURN(WavWriter w, WavWriter::Create(path, sample_rate, 1, format, sf_format));
    return std::unique_ptr<PcmOutput>(new FileOutput<WavWriter>(std::move(w), std::nullopt, path));
  });
}

}  // namespace lfmvox
