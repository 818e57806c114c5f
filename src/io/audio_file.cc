#include "io/audio_file.h"

#include <sndfile.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>

namespace lfmvox {

static_assert(std::is_same_v<SNDFILE, sf_private_tag>, "the forward declaration must match sndfile.h");

namespace {

// Conversion happens through a fixed stack buffer, so streaming writes never allocate.
constexpr size_t kChunkSamples = 4096;

}  // namespace

int16_t FloatToS16(float x) {
  if (std::isnan(x)) return 0;
  x = std::clamp(x, -1.0f, 1.0f);
  return static_cast<int16_t>(std::lround(x * 32767.0f));
}

Result<WavWriter> WavWriter::Create(const std::string& path, int sample_rate, int channels,
                                    PcmFormat format) {
  if (sample_rate <= 0 || sample_rate > 1000000) {
    return InvalidArgument(StrFormat("sample rate %d Hz is not in (0, 1000000]", sample_rate));
  }
  if (channels < 1 || channels > 16)
    return InvalidArgument(StrFormat("%d channels is not in [1, 16]", channels));
  SF_INFO info{};
  info.samplerate = sample_rate;
  info.channels = channels;
  info.format = SF_FORMAT_WAV | (format == PcmFormat::kS16 ? SF_FORMAT_PCM_16 : SF_FORMAT_FLOAT);
  SNDFILE* sf = sf_open(path.c_str(), SFM_WRITE, &info);
  if (sf == nullptr) return IoError("cannot create " + path + ": " + sf_strerror(nullptr));
  // Keep the header current after every write, so a partial file is still a valid WAV.
  sf_command(sf, SFC_SET_UPDATE_HEADER_AUTO, nullptr, SF_TRUE);
  WavWriter w;
  w.sf_ = sf;
  w.path_ = path;
  w.channels_ = channels;
  w.format_ = format;
  return w;
}

WavWriter::WavWriter(WavWriter&& o) noexcept
    : sf_(std::exchange(o.sf_, nullptr)),
      path_(std::move(o.path_)),
      channels_(o.channels_),
      format_(o.format_),
      frames_written_(o.frames_written_) {}

WavWriter& WavWriter::operator=(WavWriter&& o) noexcept {
  if (this != &o) {
    if (sf_ != nullptr) sf_close(sf_);
    sf_ = std::exchange(o.sf_, nullptr);
    path_ = std::move(o.path_);
    channels_ = o.channels_;
    format_ = o.format_;
    frames_written_ = o.frames_written_;
  }
  return *this;
}

WavWriter::~WavWriter() {
  if (sf_ != nullptr) sf_close(sf_);
}

Status WavWriter::Write(std::span<const float> samples) {
  if (sf_ == nullptr) return InvalidArgument("WavWriter::Write on a closed writer (" + path_ + ")");
  const size_t ch = static_cast<size_t>(channels_);
  if (samples.size() % ch != 0) {
    return InvalidArgument(
        StrFormat("%zu samples is not a whole number of %d-channel frames", samples.size(), channels_));
  }
  size_t done = 0;
  while (done < samples.size()) {
    sf_count_t written = 0, wanted = 0;
    if (format_ == PcmFormat::kF32) {
      wanted = static_cast<sf_count_t>(samples.size() - done);
      written = sf_write_float(sf_, samples.data() + done, wanted);
    } else {
      short buf[kChunkSamples];  // [frames, channels], interleaved
      const size_t n = std::min(samples.size() - done, kChunkSamples / ch * ch);
      for (size_t i = 0; i < n; ++i) buf[i] = FloatToS16(samples[done + i]);
      wanted = static_cast<sf_count_t>(n);
      written = sf_write_short(sf_, buf, wanted);
    }
    if (written != wanted) return IoError("cannot write " + path_ + ": " + sf_strerror(sf_));
    done += static_cast<size_t>(wanted);
  }
  frames_written_ += static_cast<int64_t>(samples.size() / ch);
  return Status::Ok();
}

Status WavWriter::Close() {
  if (sf_ == nullptr) return Status::Ok();
  const int err = sf_close(std::exchange(sf_, nullptr));
  if (err != 0) return IoError("cannot finish " + path_ + ": " + sf_error_number(err));
  return Status::Ok();
}

Status WriteRawPcm(FILE* out, std::span<const float> samples, PcmFormat format) {
  unsigned char buf[kChunkSamples * 4];  // little-endian bytes of up to kChunkSamples samples
  const size_t width = format == PcmFormat::kS16 ? 2 : 4;
  for (size_t done = 0; done < samples.size();) {
    const size_t n = std::min(samples.size() - done, kChunkSamples);
    for (size_t i = 0; i < n; ++i) {
      uint32_t u;
      if (format == PcmFormat::kS16) {
        u = static_cast<uint16_t>(FloatToS16(samples[done + i]));
      } else {
        std::memcpy(&u, &samples[done + i], 4);
      }
      for (size_t b = 0; b < width; ++b) buf[i * width + b] = static_cast<unsigned char>(u >> (8 * b));
    }
    if (std::fwrite(buf, width, n, out) != n)
      return IoError(std::string("cannot write PCM: ") + std::strerror(errno));
    done += n;
  }
  if (std::fflush(out) != 0) return IoError(std::string("cannot flush PCM: ") + std::strerror(errno));
  return Status::Ok();
}

}  // namespace lfmvox
