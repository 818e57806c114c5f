#include "io/audio_file.h"

#include <sndfile.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <type_traits>
#include <utility>

#include "io/ffmpeg_audio.h"

namespace lfmvox {

static_assert(std::is_same_v<SNDFILE, sf_private_tag>, "the forward declaration must match sndfile.h");

namespace {

// Conversion happens through a fixed stack buffer, so streaming writes never allocate.
constexpr size_t kChunkSamples = 4096;

// ---- Reading ----

// Decoding reads this many frames per call; the buffer grows with what was actually decoded, never with
// what a header claims.
constexpr sf_count_t kReadFrames = 16384;

Status CheckFormat(int sample_rate, int channels, const std::string& what) {
  if (sample_rate < 1 || sample_rate > kMaxAudioSampleRate) {
    return InvalidArgument(
        StrFormat("%s: sample rate %d Hz is not in [1, %d]; the header is corrupt or "
                  "the rate is not supported",
                  what.c_str(), sample_rate, kMaxAudioSampleRate));
  }
  if (channels < 1 || channels > kMaxAudioChannels) {
    return InvalidArgument(
        StrFormat("%s: %d channels is not in [1, %d]", what.c_str(), channels, kMaxAudioChannels));
  }
  return Status::Ok();
}

// The most frames a clip of this rate and channel count may have under `limits`.
int64_t MaxFrames(int sample_rate, int channels, const AudioLimits& limits) {
  const double by_time = std::floor(std::max(0.0, limits.max_seconds) * sample_rate);
  const int64_t by_samples = std::max<int64_t>(0, limits.max_samples) / channels;
  return by_time < static_cast<double>(by_samples) ? static_cast<int64_t>(by_time) : by_samples;
}

Status TooLong(int64_t frames, bool at_least, int sample_rate, int channels, const AudioLimits& limits,
               const std::string& what) {
  return OutOfRange(
      StrFormat("%s: %s%lld frames (%.1f s at %d Hz, %d channels) is over the limit of %g s "
                "and %lld samples; cut the audio into shorter clips",
                what.c_str(), at_least ? "at least " : "", static_cast<long long>(frames),
                static_cast<double>(frames) / sample_rate, sample_rate, channels, limits.max_seconds,
                static_cast<long long>(limits.max_samples)));
}

// Refuses NaN and Inf: see ReadAudioFile in the header for why.
Status CheckFinite(const AudioBuffer& a, const std::string& what) {
  for (size_t i = 0; i < a.samples.size(); ++i) {
    if (!std::isfinite(a.samples[i])) {
      const size_t ch = static_cast<size_t>(a.channels);
      return InvalidArgument(StrFormat(
          "%s: sample %zu of channel %zu (%.3f s) is %s; audio must be finite", what.c_str(), i / ch, i % ch,
          static_cast<double>(i / ch) / a.sample_rate, std::isnan(a.samples[i]) ? "NaN" : "infinite"));
    }
  }
  return Status::Ok();
}

// A read-only file image for sf_open_virtual.
struct MemoryFile {
  std::string_view bytes;
  sf_count_t pos = 0;
};

sf_count_t MemLength(void* user) {
  return static_cast<sf_count_t>(static_cast<MemoryFile*>(user)->bytes.size());
}

sf_count_t MemSeek(sf_count_t offset, int whence, void* user) {
  auto* m = static_cast<MemoryFile*>(user);
  const sf_count_t size = static_cast<sf_count_t>(m->bytes.size());
  sf_count_t base = 0;
  if (whence == SEEK_CUR) base = m->pos;
  if (whence == SEEK_END) base = size;
  // Offsets come from file headers, so they can be anything: saturate instead of overflowing, and keep
  // the position inside the image (a read past the end then returns nothing).
  sf_count_t target = 0;
  if (__builtin_add_overflow(base, offset, &target)) target = offset < 0 ? 0 : size;
  m->pos = std::clamp<sf_count_t>(target, 0, size);
  return m->pos;
}

sf_count_t MemRead(void* ptr, sf_count_t count, void* user) {
  auto* m = static_cast<MemoryFile*>(user);
  const sf_count_t n = std::clamp<sf_count_t>(count, 0, static_cast<sf_count_t>(m->bytes.size()) - m->pos);
  if (n > 0) std::memcpy(ptr, m->bytes.data() + m->pos, static_cast<size_t>(n));
  m->pos += n;
  return n;
}

sf_count_t MemWrite(const void*, sf_count_t, void*) { return 0; }

sf_count_t MemTell(void* user) { return static_cast<MemoryFile*>(user)->pos; }

// libsndfile behind the AudioDecoder interface. An in-memory image is read through `memory`.
class SndfileDecoder final : public AudioDecoder {
 public:
  ~SndfileDecoder() override {
    if (sf_ != nullptr) sf_close(sf_);
  }

  // Opens `path`, or the image `bytes` when path is null. On failure returns libsndfile's error code
  // (SF_ERR_*) and its text in *why.
  int Open(const std::string* path, std::string_view bytes, std::string* why) {
    SF_INFO info{};
    if (path != nullptr) {
      sf_ = sf_open(path->c_str(), SFM_READ, &info);
    } else {
      memory_ = MemoryFile{bytes, 0};
      SF_VIRTUAL_IO io{MemLength, MemSeek, MemRead, MemWrite, MemTell};
      sf_ = sf_open_virtual(&io, SFM_READ, &info, &memory_);
    }
    if (sf_ == nullptr) {
      *why = sf_strerror(nullptr);
      return sf_error(nullptr);
    }
    sample_rate = info.samplerate;
    channels = info.channels;
    // libsndfile reports SF_COUNT_MAX when it cannot know the length (a pipe). An MP3's length is an
    // estimate (from the bitrate, or a Xing tag that encoders get wrong); every other format libsndfile
    // decodes declares an exact count, so a shortfall is a cut file.
    if (info.frames >= 0 && info.frames != SF_COUNT_MAX) declared_frames = info.frames;
    allowed_shortfall = (info.format & SF_FORMAT_TYPEMASK) == SF_FORMAT_MPEG ? -1 : 0;
    return SF_ERR_NO_ERROR;
  }

  Result<int64_t> Read(float* out, int64_t frames) override {
    const sf_count_t got = sf_readf_float(sf_, out, frames);
    if (got > 0) {
      read_ += got;
      return static_cast<int64_t>(got);
    }
    if (sf_error(sf_) != SF_ERR_NO_ERROR) {
      return DataLoss(StrFormat("decoding failed after %lld frames: %s", static_cast<long long>(read_),
                                sf_strerror(sf_)));
    }
    return int64_t{0};
  }

 private:
  SNDFILE* sf_ = nullptr;
  MemoryFile memory_;
  int64_t read_ = 0;
};

constexpr char kSupported[] =
    "WAV, FLAC, Ogg Vorbis/Opus, MP3, AIFF (libsndfile), M4A/AAC, WebM/Opus and the other formats of FFmpeg";

// libsndfile first; FFmpeg for what it does not recognise (a WAV or FLAC libsndfile finds damaged keeps
// libsndfile's diagnosis). `path` null: the image `bytes`.
Result<std::unique_ptr<AudioDecoder>> OpenDecoder(const std::string* path, std::string_view bytes,
                                                  const std::string& what) {
  auto sf = std::make_unique<SndfileDecoder>();
  std::string why;
  const int err = sf->Open(path, bytes, &why);
  std::unique_ptr<AudioDecoder> d;
  if (err == SF_ERR_NO_ERROR) {
    d = std::move(sf);
  } else if (err == SF_ERR_UNRECOGNISED_FORMAT || err == SF_ERR_UNSUPPORTED_ENCODING) {
    FILE* file = nullptr;
    if (path != nullptr && (file = std::fopen(path->c_str(), "rb")) == nullptr) {
      return IoError("cannot open " + *path + ": " + std::strerror(errno));
    }
    Result<std::unique_ptr<AudioDecoder>> ff = OpenFfmpegDecoder(file, bytes, what);
    if (!ff.ok()) {
      std::string ff_why = ff.status().message();
      if (ff_why.rfind(what + ": ", 0) == 0) ff_why.erase(0, what.size() + 2);
      return Status(ff.status().code(), what + ": not a readable audio file (libsndfile: " + why +
                                            "; FFmpeg: " + ff_why + "); supported: " + kSupported);
    }
    d = std::move(ff).value();
  } else {
    // libsndfile reports a damaged stream it has started to decode (a corrupt MP3) as "File does not
    // exist or is not a regular file"; the file is known to exist, so that text would mislead.
    const bool misleading = why.find("does not exist") != std::string::npos;
    return InvalidArgument(what + ": not a readable audio file (" +
                           (misleading ? std::string("damaged, truncated or not an audio format") : why) +
                           "); supported: " + kSupported);
  }
  LFM_RETURN_IF_ERROR(CheckFormat(d->sample_rate, d->channels, what));
  return d;
}

// Decodes to the end: the buffer grows with what was actually decoded, never with what a header claims,
// and decoding stops one block past the limit.
Result<AudioBuffer> Decode(AudioDecoder& d, const std::string& what, const AudioLimits& limits) {
  const int64_t max_frames = MaxFrames(d.sample_rate, d.channels, limits);
  if (d.declared_frames > max_frames)
    return TooLong(d.declared_frames, false, d.sample_rate, d.channels, limits, what);
  AudioBuffer a;
  a.sample_rate = d.sample_rate;
  a.channels = d.channels;
  const size_t ch = static_cast<size_t>(d.channels);
  int64_t frames = 0;
  for (;;) {
    const int64_t want = std::min<int64_t>(kReadFrames, max_frames + 1 - frames);  // +1 detects "too long"
    a.samples.resize(static_cast<size_t>(frames + want) * ch);
    Result<int64_t> got = d.Read(a.samples.data() + static_cast<size_t>(frames) * ch, want);
    if (!got.ok()) return got.status().WithContext(what);
    if (*got <= 0) break;
    frames += *got;
    if (frames > max_frames) return TooLong(frames, true, d.sample_rate, d.channels, limits, what);
  }
  a.samples.resize(static_cast<size_t>(frames) * ch);
  if (frames == 0) {
    return InvalidArgument(what + ": the file holds no audio samples (empty, or a header without data)");
  }
  if (d.declared_frames >= 0 && d.allowed_shortfall >= 0 &&
      frames < d.declared_frames - d.allowed_shortfall) {
    return DataLoss(StrFormat("%s: truncated: the header declares %lld frames but only %lld decode",
                              what.c_str(), static_cast<long long>(d.declared_frames),
                              static_cast<long long>(frames)));
  }
  LFM_RETURN_IF_ERROR(CheckFinite(a, what));
  return a;
}

// A growing file image for writing (encoders seek back to rewrite headers).
struct GrowingFile {
  std::string bytes;
  sf_count_t pos = 0;
};

sf_count_t GrowLength(void* user) {
  return static_cast<sf_count_t>(static_cast<GrowingFile*>(user)->bytes.size());
}

sf_count_t GrowSeek(sf_count_t offset, int whence, void* user) {
  auto* g = static_cast<GrowingFile*>(user);
  sf_count_t base = whence == SEEK_CUR   ? g->pos
                    : whence == SEEK_END ? static_cast<sf_count_t>(g->bytes.size())
                                         : 0;
  sf_count_t target = 0;
  if (__builtin_add_overflow(base, offset, &target) || target < 0) return -1;
  g->pos = target;
  return g->pos;
}

sf_count_t GrowRead(void* ptr, sf_count_t count, void* user) {
  auto* g = static_cast<GrowingFile*>(user);
  const sf_count_t size = static_cast<sf_count_t>(g->bytes.size());
  const sf_count_t n = std::clamp<sf_count_t>(std::min(count, size - std::min(g->pos, size)), 0, size);
  if (n > 0) std::memcpy(ptr, g->bytes.data() + g->pos, static_cast<size_t>(n));
  g->pos += n;
  return n;
}

sf_count_t GrowWrite(const void* ptr, sf_count_t count, void* user) {
  auto* g = static_cast<GrowingFile*>(user);
  if (count <= 0) return 0;
  const size_t end = static_cast<size_t>(g->pos) + static_cast<size_t>(count);
  if (end > g->bytes.size()) g->bytes.resize(end);
  std::memcpy(g->bytes.data() + g->pos, ptr, static_cast<size_t>(count));
  g->pos += count;
  return count;
}

sf_count_t GrowTell(void* user) { return static_cast<GrowingFile*>(user)->pos; }

}  // namespace

Result<std::unique_ptr<AudioDecoder>> OpenAudioFile(const std::string& path) {
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(st)) return NotFound("audio file " + path + " does not exist");
  if (std::filesystem::is_directory(st)) return InvalidArgument(path + " is a directory, not an audio file");
  // A FIFO or a device would block sf_open or never end.
  if (!std::filesystem::is_regular_file(st)) {
    return InvalidArgument(path + " is not a regular file (a pipe or a device?); give an audio file");
  }
  return OpenDecoder(&path, {}, path);
}

Result<std::unique_ptr<AudioDecoder>> OpenAudioMemory(std::string_view bytes) {
  if (bytes.empty()) return InvalidArgument("in-memory audio: no bytes (an empty file)");
  return OpenDecoder(nullptr, bytes, "in-memory audio");
}

Result<AudioBuffer> ReadAudioFile(const std::string& path, const AudioLimits& limits) {
  LFM_ASSIGN_OR_RETURN(std::unique_ptr<AudioDecoder> d, OpenAudioFile(path));
  return Decode(*d, path, limits);
}

Result<AudioBuffer> ReadAudioMemory(std::string_view bytes, const AudioLimits& limits) {
  LFM_ASSIGN_OR_RETURN(std::unique_ptr<AudioDecoder> d, OpenAudioMemory(bytes));
  return Decode(*d, "in-memory audio", limits);
}

bool CanWriteAudioFormat(int sf_format, int sample_rate) {
  SF_INFO info{};
  info.samplerate = sample_rate;
  info.channels = 1;
  info.format = sf_format;
  return sample_rate > 0 && sf_format_check(&info) != 0;
}

Result<std::string> WriteAudioMemory(std::span<const float> mono, int sample_rate, int sf_format) {
  if (mono.empty()) return InvalidArgument("no samples to encode");
  if (sample_rate < 1 || sample_rate > kMaxAudioSampleRate) {
    return InvalidArgument(
        StrFormat("sample rate %d Hz is not in [1, %d]", sample_rate, kMaxAudioSampleRate));
  }
  if (!CanWriteAudioFormat(sf_format, sample_rate)) {
    return Unimplemented(StrFormat("this libsndfile (%s) cannot write format 0x%x at %d Hz",
                                   sf_version_string(), sf_format, sample_rate));
  }
  SF_INFO info{};
  info.samplerate = sample_rate;
  info.channels = 1;
  info.format = sf_format;
  SF_VIRTUAL_IO io{GrowLength, GrowSeek, GrowRead, GrowWrite, GrowTell};
  GrowingFile file;
  SNDFILE* sf = sf_open_virtual(&io, SFM_WRITE, &info, &file);
  if (sf == nullptr)
    return Internal(std::string("libsndfile refused to start encoding: ") + sf_strerror(nullptr));
  // Quantized with FloatToS16 here (libsndfile's own float conversion scales differently), so a
  // lossless file holds exactly the samples raw s16 PCM would.
  bool ok = true;
  for (size_t done = 0; ok && done < mono.size();) {
    short buf[kChunkSamples];
    const size_t n = std::min(mono.size() - done, kChunkSamples);
    for (size_t i = 0; i < n; ++i) buf[i] = FloatToS16(mono[done + i]);
    ok = sf_write_short(sf, buf, static_cast<sf_count_t>(n)) == static_cast<sf_count_t>(n);
    done += n;
  }
  const std::string why = sf_strerror(sf);
  const int err = sf_close(sf);
  if (!ok || err != 0) return Internal("encoding failed: " + why);
  return std::move(file.bytes);
}

Result<AudioBuffer> FromRawPcm(std::span<const uint8_t> bytes, int sample_rate, int channels,
                               PcmFormat format, const AudioLimits& limits) {
  const std::string what = "raw PCM";
  LFM_RETURN_IF_ERROR(CheckFormat(sample_rate, channels, what));
  const size_t width = format == PcmFormat::kS16 ? 2 : 4;
  const size_t frame_bytes = width * static_cast<size_t>(channels);
  if (bytes.empty()) return InvalidArgument(what + ": no samples");
  if (bytes.size() % frame_bytes != 0) {
    return InvalidArgument(StrFormat("%s: %zu bytes is not a whole number of %zu-byte frames (%d x %s)",
                                     what.c_str(), bytes.size(), frame_bytes, channels,
                                     format == PcmFormat::kS16 ? "s16" : "f32"));
  }
  const size_t frames = bytes.size() / frame_bytes;
  if (static_cast<int64_t>(frames) > MaxFrames(sample_rate, channels, limits))
    return TooLong(static_cast<int64_t>(frames), false, sample_rate, channels, limits, what);
  AudioBuffer a;
  a.sample_rate = sample_rate;
  a.channels = channels;
  a.samples.resize(frames * static_cast<size_t>(channels));
  const uint8_t* p = bytes.data();
  for (float& x : a.samples) {
    uint32_t u = 0;
    for (size_t b = 0; b < width; ++b) u |= static_cast<uint32_t>(p[b]) << (8 * b);
    p += width;
    if (format == PcmFormat::kS16) {
      // 1/32768 is a power of two, so this is exact and equals libsndfile's PCM16 normalisation.
      x = static_cast<float>(static_cast<int16_t>(static_cast<uint16_t>(u))) * (1.0f / 32768.0f);
    } else {
      std::memcpy(&x, &u, 4);
    }
  }
  LFM_RETURN_IF_ERROR(CheckFinite(a, what));
  return a;
}

std::vector<float> MixToMono(const AudioBuffer& audio) {
  if (audio.channels <= 1) return audio.samples;
  const size_t ch = static_cast<size_t>(audio.channels);
  const size_t frames = audio.frames();
  const float c = static_cast<float>(audio.channels);
  std::vector<float> mono(frames);  // [frames]
  for (size_t t = 0; t < frames; ++t) {
    const float* x = audio.samples.data() + t * ch;
    float sum = 0.0f;
    for (size_t k = 0; k < ch; ++k) sum += x[k];
    mono[t] = sum / c;
  }
  return mono;
}

// ---- Writing ----

int16_t FloatToS16(float x) {
  if (std::isnan(x)) return 0;
  x = std::clamp(x, -1.0f, 1.0f);
  return static_cast<int16_t>(std::lround(x * 32767.0f));
}

Result<WavWriter> WavWriter::Create(const std::string& path, int sample_rate, int channels, PcmFormat format,
                                    int sf_format) {
  if (sample_rate <= 0 || sample_rate > 1000000) {
    return InvalidArgument(StrFormat("sample rate %d Hz is not in (0, 1000000]", sample_rate));
  }
  if (channels < 1 || channels > 16)
    return InvalidArgument(StrFormat("%d channels is not in [1, 16]", channels));
  SF_INFO info{};
  info.samplerate = sample_rate;
  info.channels = channels;
  info.format = sf_format != 0
                    ? sf_format
                    : SF_FORMAT_WAV | (format == PcmFormat::kS16 ? SF_FORMAT_PCM_16 : SF_FORMAT_FLOAT);
  LFM_ASSIGN_OR_RETURN(OutputFile out, OutputFile::Open(path));
  SNDFILE* sf = sf_open_fd(out.fd(), SFM_WRITE, &info, SF_FALSE);
  if (sf == nullptr) return IoError("cannot create " + path + ": " + sf_strerror(nullptr));
  WavWriter w;
  w.sf_ = sf;
  w.out_.emplace(std::move(out));
  w.path_ = path;
  w.channels_ = channels;
  w.format_ = format;
  return w;
}

WavWriter::WavWriter(WavWriter&& o) noexcept
    : sf_(std::exchange(o.sf_, nullptr)),
      out_(std::exchange(o.out_, std::nullopt)),
      path_(std::move(o.path_)),
      channels_(o.channels_),
      format_(o.format_),
      frames_written_(o.frames_written_),
      failed_(o.failed_) {}

WavWriter& WavWriter::operator=(WavWriter&& o) noexcept {
  if (this != &o) {
    if (sf_ != nullptr) sf_close(sf_);
    sf_ = std::exchange(o.sf_, nullptr);
    out_ = std::exchange(o.out_, std::nullopt);
    path_ = std::move(o.path_);
    channels_ = o.channels_;
    format_ = o.format_;
    frames_written_ = o.frames_written_;
    failed_ = o.failed_;
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
  if (sf_ == nullptr) return failed_ ? IoError(path_ + " was not written (an earlier error)") : Status::Ok();
  const int err = sf_close(std::exchange(sf_, nullptr));
  Status st = err != 0 ? IoError("cannot finish " + path_ + ": " + sf_error_number(err)) : out_->Commit();
  out_.reset();
  if (!st.ok()) {
    failed_ = true;
    return st;
  }
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
