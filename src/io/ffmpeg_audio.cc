#include "io/ffmpeg_audio.h"

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/channel_layout.h>
#include <libavutil/error.h>
#include <libavutil/log.h>
}
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

namespace lfmvox {
namespace {

constexpr int kIoBufferBytes = 1 << 15;

// Library code never prints: FFmpeg's log goes nowhere.
void SilentLog(void*, int, const char*, va_list) {}
void SilenceFfmpeg() {
  static std::once_flag once;
  std::call_once(once, [] { av_log_set_callback(SilentLog); });
}

std::string AvError(int err) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {};
  av_strerror(err, buf, sizeof buf);
  return buf;
}

// Bytes for an AVIOContext: a regular file or an in-memory image (read), or a file or a growing string
// (write). Positions saturate instead of overflowing: offsets come from file headers.
struct Io {
  FILE* file = nullptr;
  bool owns_file = false;
  std::string_view bytes;      // reading from memory
  std::string* out = nullptr;  // writing to memory
  int64_t pos = 0, size = 0;

  ~Io() {
    if (owns_file && file != nullptr) std::fclose(file);
  }

  static int Read(void* opaque, uint8_t* buf, int n) {
    auto* io = static_cast<Io*>(opaque);
    if (io->file != nullptr) {
      const size_t got = std::fread(buf, 1, static_cast<size_t>(n), io->file);
      if (got == 0) return std::ferror(io->file) ? AVERROR(EIO) : AVERROR_EOF;
      return static_cast<int>(got);
    }
    const int64_t left = io->size - io->pos;
    if (left <= 0 || n <= 0) return AVERROR_EOF;
    const int64_t k = std::min<int64_t>(left, n);
    std::memcpy(buf, io->bytes.data() + io->pos, static_cast<size_t>(k));
    io->pos += k;
    return static_cast<int>(k);
  }

  // FFmpeg 5 passes a non-const buffer.
  static int Write(void* opaque, uint8_t* buf, int n) {
    auto* io = static_cast<Io*>(opaque);
    if (n <= 0) return 0;
    if (io->file != nullptr) {
      return std::fwrite(buf, 1, static_cast<size_t>(n), io->file) == static_cast<size_t>(n) ? n
                                                                                             : AVERROR(EIO);
    }
    std::string& s = *io->out;
    const size_t end = static_cast<size_t>(io->pos) + static_cast<size_t>(n);
    if (end > s.size()) s.resize(end);
    std::memcpy(s.data() + io->pos, buf, static_cast<size_t>(n));
    io->pos += n;
    io->size = std::max<int64_t>(io->size, io->pos);
    return n;
  }

  static int64_t Seek(void* opaque, int64_t offset, int whence) {
    auto* io = static_cast<Io*>(opaque);
    whence &= ~AVSEEK_FORCE;
    if (whence == AVSEEK_SIZE) return io->size;
    const int64_t base = whence == SEEK_CUR ? io->pos : whence == SEEK_END ? io->size : 0;
    int64_t target = 0;
    if (__builtin_add_overflow(base, offset, &target) || target < 0) return AVERROR(EINVAL);
    if (io->file != nullptr && fseeko(io->file, static_cast<off_t>(target), SEEK_SET) != 0)
      return AVERROR(EIO);
    io->pos = target;
    return target;
  }
};

// Refuses every nested open (HLS playlists, MOV data references, concat lists): only the given bytes
// are read.
int RefuseOpen(AVFormatContext*, AVIOContext**, const char*, int, AVDictionary**) { return AVERROR(EPERM); }

AVIOContext* NewAvio(Io* io, bool write) {
  auto* buf = static_cast<unsigned char*>(av_malloc(kIoBufferBytes));
  if (buf == nullptr) return nullptr;
  AVIOContext* avio = avio_alloc_context(buf, kIoBufferBytes, write ? 1 : 0, io, write ? nullptr : Io::Read,
                                         write ? Io::Write : nullptr, Io::Seek);
  if (avio == nullptr) av_free(buf);
  return avio;
}

void FreeAvio(AVIOContext** avio) {
  if (*avio == nullptr) return;
  av_freep(&(*avio)->buffer);
  avio_context_free(avio);
}

// Sample i of channel c of a decoded frame as float, with libsndfile's normalisation (integer PCM of b
// bits is x / 2^(b-1), unsigned 8-bit centred on 128).
float SampleAt(const AVFrame* f, AVSampleFormat packed, bool planar, int channels, int t, int c) {
  const uint8_t* base = planar ? f->extended_data[c] : f->extended_data[0];
  const size_t i = planar ? static_cast<size_t>(t) : static_cast<size_t>(t) * channels + c;
  switch (packed) {
    case AV_SAMPLE_FMT_U8:
      return (static_cast<float>(base[i]) - 128.0f) * (1.0f / 128.0f);
    case AV_SAMPLE_FMT_S16:
      return static_cast<float>(reinterpret_cast<const int16_t*>(base)[i]) * (1.0f / 32768.0f);
    case AV_SAMPLE_FMT_S32:
      return static_cast<float>(static_cast<double>(reinterpret_cast<const int32_t*>(base)[i]) /
                                2147483648.0);
    case AV_SAMPLE_FMT_S64:
      return static_cast<float>(static_cast<double>(reinterpret_cast<const int64_t*>(base)[i]) /
                                9223372036854775808.0);
    case AV_SAMPLE_FMT_FLT:
      return reinterpret_cast<const float*>(base)[i];
    case AV_SAMPLE_FMT_DBL:
      return static_cast<float>(reinterpret_cast<const double*>(base)[i]);
    default:
      return 0.0f;  // unreachable: Open refuses other formats
  }
}

bool KnownSampleFormat(int fmt) {
  switch (av_get_packed_sample_fmt(static_cast<AVSampleFormat>(fmt))) {
    case AV_SAMPLE_FMT_U8:
    case AV_SAMPLE_FMT_S16:
    case AV_SAMPLE_FMT_S32:
    case AV_SAMPLE_FMT_S64:
    case AV_SAMPLE_FMT_FLT:
    case AV_SAMPLE_FMT_DBL:
      return true;
    default:
      return false;
  }
}

class FfmpegDecoder final : public AudioDecoder {
 public:
  ~FfmpegDecoder() override {
    av_frame_free(&frame_);
    av_packet_free(&packet_);
    avcodec_free_context(&codec_);
    avformat_close_input(&format_);  // custom I/O: the AVIOContext is ours to free
    FreeAvio(&avio_);
  }

  Status Open(FILE* file, std::string_view bytes, const std::string& what) {
    io_.file = file;
    io_.owns_file = file != nullptr;
    if (file != nullptr) {
      struct stat st {};
      if (fstat(fileno(file), &st) != 0) return IoError(what + ": " + std::strerror(errno));
      io_.size = static_cast<int64_t>(st.st_size);
      io_.pos = static_cast<int64_t>(ftello(file));
    } else {
      io_.bytes = bytes;
      io_.size = static_cast<int64_t>(bytes.size());
    }
    avio_ = NewAvio(&io_, false);
    packet_ = av_packet_alloc();
    frame_ = av_frame_alloc();
    AVFormatContext* fc = avformat_alloc_context();
    if (avio_ == nullptr || packet_ == nullptr || frame_ == nullptr || fc == nullptr) {
      avformat_free_context(fc);
      return OutOfMemory(what + ": cannot allocate the FFmpeg decoder");
    }
    fc->pb = avio_;
    fc->flags |= AVFMT_FLAG_CUSTOM_IO;
    fc->io_open = RefuseOpen;
    fc->max_streams = 64;
    int r = avformat_open_input(&fc, "", nullptr, nullptr);  // frees fc on failure
    if (r < 0) return InvalidArgument(what + ": not an audio format FFmpeg recognises (" + AvError(r) + ")");
    format_ = fc;
    // A low score is FFmpeg guessing (random bytes that happen to look like an MP3 frame or text):
    // refused rather than decoded into noise.
    if (format_->probe_score <= AVPROBE_SCORE_RETRY) {
      return InvalidArgument(what + ": not an audio format (FFmpeg only guesses " + format_->iformat->name +
                             ", with confidence " + std::to_string(format_->probe_score) + "/100)");
    }
    r = avformat_find_stream_info(format_, nullptr);
    if (r < 0) {
      return InvalidArgument(what + ": damaged " + format_->iformat->name + " file (" + AvError(r) + ")");
    }
    const AVCodec* codec = nullptr;
    stream_ = av_find_best_stream(format_, AVMEDIA_TYPE_AUDIO, -1, -1, &codec, 0);
    if (stream_ == AVERROR_STREAM_NOT_FOUND) {
      return InvalidArgument(what + ": the " + format_->iformat->name + " file holds no audio stream");
    }
    if (stream_ < 0 || codec == nullptr) {
      const int any = av_find_best_stream(format_, AVMEDIA_TYPE_AUDIO, -1, -1, nullptr, 0);
      const char* name = any >= 0 ? avcodec_get_name(format_->streams[any]->codecpar->codec_id) : "?";
      return Unimplemented(what + ": this FFmpeg has no decoder for its audio codec (" + name + ")");
    }
    for (unsigned i = 0; i < format_->nb_streams; ++i) {
      if (static_cast<int>(i) != stream_) format_->streams[i]->discard = AVDISCARD_ALL;
    }
    const AVStream* st = format_->streams[stream_];
    codec_ = avcodec_alloc_context3(codec);
    if (codec_ == nullptr) return OutOfMemory(what + ": cannot allocate the FFmpeg decoder");
    r = avcodec_parameters_to_context(codec_, st->codecpar);
    if (r >= 0) {
      codec_->pkt_timebase = st->time_base;
      r = avcodec_open2(codec_, codec, nullptr);
    }
    if (r < 0) {
      return InvalidArgument(what + ": cannot start the " + codec->name + " decoder (" + AvError(r) + ")");
    }
    if (!KnownSampleFormat(codec_->sample_fmt)) {
      return Unimplemented(what + ": the " + codec->name +
                           " decoder gives samples in a format this reader does not convert");
    }
    sample_rate = codec_->sample_rate;
    channels = codec_->ch_layout.nb_channels;
    codec_name_ = codec->name;
    if (sample_rate <= 0) return InvalidArgument(what + ": the audio stream declares no sample rate");
    // The declared length: the stream's (MP4's media header and edit list, Ogg's last granule) or the
    // container's (WebM's segment duration). An estimate from the bitrate (ADTS, MP3) is not trusted.
    if (format_->duration_estimation_method != AVFMT_DURATION_FROM_BITRATE) {
      if (st->duration != AV_NOPTS_VALUE && st->duration > 0) {
        declared_frames = av_rescale_q(st->duration, st->time_base, AVRational{1, sample_rate});
      } else if (format_->duration != AV_NOPTS_VALUE && format_->duration > 0) {
        declared_frames = av_rescale(format_->duration, sample_rate, AV_TIME_BASE);
      }
    }
    // Containers count whole packets and decoders drop priming samples and a partial last frame: a whole
    // file may decode up to two codec frames (or two 20 ms blocks where the codec has no fixed frame)
    // short of the declared length.
    allowed_shortfall = 2 * std::max<int64_t>(codec_->frame_size, sample_rate / 50);
    return Status::Ok();
  }

  Result<int64_t> Read(float* out, int64_t frames) override {
    int64_t n = 0;
    const size_t ch = static_cast<size_t>(channels);
    while (n < frames) {
      if (pending_pos_ < pending_.size()) {
        const size_t k = std::min(pending_.size() - pending_pos_, static_cast<size_t>(frames - n) * ch);
        std::memcpy(out + n * ch, pending_.data() + pending_pos_, k * sizeof(float));
        pending_pos_ += k;
        n += static_cast<int64_t>(k / ch);
        continue;
      }
      if (done_) break;
      int r = avcodec_receive_frame(codec_, frame_);
      if (r == 0) {
        LFM_RETURN_IF_ERROR(TakeFrame());
        continue;
      }
      if (r == AVERROR_EOF) {
        done_ = true;
        break;
      }
      if (r != AVERROR(EAGAIN)) return Damaged(r);
      r = av_read_frame(format_, packet_);
      if (r == AVERROR_EOF) {
        r = avcodec_send_packet(codec_, nullptr);  // drain the decoder
        if (r < 0 && r != AVERROR_EOF) return Damaged(r);
        continue;
      }
      if (r < 0) return Damaged(r);
      if (packet_->stream_index == stream_) r = avcodec_send_packet(codec_, packet_);
      av_packet_unref(packet_);
      if (r < 0 && r != AVERROR(EAGAIN)) return Damaged(r);
    }
    return n;
  }

 private:
  // Read errors leave out the input's name: the reader's caller adds it.
  Status Damaged(int err) {
    done_ = true;
    return DataLoss(StrFormat("the %s stream is damaged after %lld frames (%s)", codec_name_.c_str(),
                              static_cast<long long>(decoded_), AvError(err).c_str()));
  }

  // Converts the frame just received into pending_ (interleaved float).
  Status TakeFrame() {
    struct Unref {
      AVFrame* f;
      ~Unref() { av_frame_unref(f); }
    } unref{frame_};
    if (frame_->ch_layout.nb_channels != channels || frame_->sample_rate != sample_rate ||
        !KnownSampleFormat(frame_->format)) {
      done_ = true;
      return InvalidArgument(
          StrFormat("the audio changes from %d Hz, %d channels to %d Hz, %d channels "
                    "part way; convert it to one format first",
                    sample_rate, channels, frame_->sample_rate, frame_->ch_layout.nb_channels));
    }
    const auto fmt = static_cast<AVSampleFormat>(frame_->format);
    const AVSampleFormat packed = av_get_packed_sample_fmt(fmt);
    const bool planar = av_sample_fmt_is_planar(fmt) != 0;
    const int ns = std::max(0, frame_->nb_samples);
    pending_.resize(static_cast<size_t>(ns) * static_cast<size_t>(channels));
    pending_pos_ = 0;
    for (int t = 0; t < ns; ++t) {
      for (int c = 0; c < channels; ++c) {
        pending_[static_cast<size_t>(t) * channels + c] = SampleAt(frame_, packed, planar, channels, t, c);
      }
    }
    decoded_ += ns;
    return Status::Ok();
  }

  std::string codec_name_;
  Io io_;
  AVIOContext* avio_ = nullptr;
  AVFormatContext* format_ = nullptr;
  AVCodecContext* codec_ = nullptr;
  AVPacket* packet_ = nullptr;
  AVFrame* frame_ = nullptr;
  int stream_ = -1;
  std::vector<float> pending_;  // the rest of the last decoded frame: one codec frame at most
  size_t pending_pos_ = 0;
  int64_t decoded_ = 0;
  bool done_ = false;
};

}  // namespace

Result<std::unique_ptr<AudioDecoder>> OpenFfmpegDecoder(FILE* file, std::string_view bytes,
                                                        const std::string& what) {
  SilenceFfmpeg();
  auto d = std::make_unique<FfmpegDecoder>();
  LFM_RETURN_IF_ERROR(d->Open(file, bytes, what));
  return std::unique_ptr<AudioDecoder>(std::move(d));
}

// ---- Encoding ----

namespace {

struct FormatSpec {
  AVCodecID codec;
  const char* muxer;
  int64_t bit_rate;  // transparent for mono speech
};

FormatSpec Spec(FfmpegFormat f) {
  switch (f) {
    case FfmpegFormat::kM4aAac:
      return {AV_CODEC_ID_AAC, "ipod", 96000};
    case FfmpegFormat::kAdtsAac:
      return {AV_CODEC_ID_AAC, "adts", 96000};
    case FfmpegFormat::kWebmOpus:
      return {AV_CODEC_ID_OPUS, "webm", 64000};
  }
  return {AV_CODEC_ID_NONE, "", 0};
}

// The encoder for `codec` that takes float samples (FFmpeg's native AAC; libopus rather than the
// experimental native Opus encoder), or null.
const AVCodec* FloatEncoder(AVCodecID codec, AVSampleFormat* fmt) {
  const AVCodec* c =
      codec == AV_CODEC_ID_OPUS ? avcodec_find_encoder_by_name("libopus") : avcodec_find_encoder(codec);
  if (c == nullptr || c->sample_fmts == nullptr) return nullptr;
  for (const AVSampleFormat* f = c->sample_fmts; *f != AV_SAMPLE_FMT_NONE; ++f) {
    if (*f == AV_SAMPLE_FMT_FLT || *f == AV_SAMPLE_FMT_FLTP) {  // the same layout for mono
      *fmt = *f;
      return c;
    }
  }
  return nullptr;
}

}  // namespace

bool CanEncodeFfmpeg(FfmpegFormat format, int sample_rate) {
  AVSampleFormat fmt;
  const AVCodec* c = FloatEncoder(Spec(format).codec, &fmt);
  if (c == nullptr || sample_rate <= 0) return false;
  if (c->supported_samplerates == nullptr) return true;
  for (const int* r = c->supported_samplerates; *r != 0; ++r) {
    if (*r == sample_rate) return true;
  }
  return false;
}

struct FfmpegWriter::Impl {
  Io io;
  AVIOContext* avio = nullptr;
  AVFormatContext* format = nullptr;
  AVCodecContext* codec = nullptr;
  AVStream* stream = nullptr;
  AVFrame* frame = nullptr;
  AVPacket* packet = nullptr;
  int filled = 0;  // samples in frame
  int64_t pts = 0;
  bool header_written = false, closed = false;

  ~Impl() {
    if (header_written && !closed) av_write_trailer(format);
    av_frame_free(&frame);
    av_packet_free(&packet);
    avcodec_free_context(&codec);
    avformat_free_context(format);
    FreeAvio(&avio);
  }

  // Sends `f` (null: flush) and writes every packet the encoder has ready.
  Status Encode(AVFrame* f) {
    int r = avcodec_send_frame(codec, f);
    if (r < 0)
      return Internal(std::string("the ") + codec->codec->name + " encoder refused a frame: " + AvError(r));
    for (;;) {
      r = avcodec_receive_packet(codec, packet);
      if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return Status::Ok();
      if (r < 0) return Internal(std::string(codec->codec->name) + " encoding failed: " + AvError(r));
      av_packet_rescale_ts(packet, codec->time_base, stream->time_base);
      packet->stream_index = 0;
      r = av_interleaved_write_frame(format, packet);  // takes the packet's reference
      if (r < 0) return IoError("cannot write the encoded stream: " + AvError(r));
    }
  }

  Status SendFilled() {
    frame->nb_samples = filled;
    frame->pts = pts;
    pts += filled;
    filled = 0;
    return Encode(frame);
  }
};

FfmpegWriter::FfmpegWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FfmpegWriter::FfmpegWriter(FfmpegWriter&&) noexcept = default;
FfmpegWriter& FfmpegWriter::operator=(FfmpegWriter&&) noexcept = default;
FfmpegWriter::~FfmpegWriter() = default;

Result<FfmpegWriter> FfmpegWriter::Create(FILE* file, std::string* memory, int sample_rate,
                                          FfmpegFormat format) {
  SilenceFfmpeg();
  const FormatSpec spec = Spec(format);
  if (!CanEncodeFfmpeg(format, sample_rate)) {
    return Unimplemented(
        StrFormat("this FFmpeg cannot encode %s at %d Hz (AAC takes 8000, 16000, 24000, "
                  "44100, 48000 Hz, ...; Opus 8, 12, 16, 24 and 48 kHz); write a .wav or .flac",
                  avcodec_get_name(spec.codec), sample_rate));
  }
  auto m = std::make_unique<Impl>();
  m->io.file = file;
  m->io.out = file == nullptr ? memory : nullptr;
  AVSampleFormat sample_fmt = AV_SAMPLE_FMT_FLT;
  const AVCodec* enc = FloatEncoder(spec.codec, &sample_fmt);
  int r = avformat_alloc_output_context2(&m->format, nullptr, spec.muxer, nullptr);
  if (r < 0 || m->format == nullptr || enc == nullptr) {
    return Unimplemented(std::string("this FFmpeg cannot write ") + avcodec_get_name(spec.codec) + " in " +
                         spec.muxer);
  }
  m->codec = avcodec_alloc_context3(enc);
  m->frame = av_frame_alloc();
  m->packet = av_packet_alloc();
  m->avio = NewAvio(&m->io, true);
  m->stream = avformat_new_stream(m->format, nullptr);
  if (m->codec == nullptr || m->frame == nullptr || m->packet == nullptr || m->avio == nullptr ||
      m->stream == nullptr) {
    return OutOfMemory("cannot allocate the encoder");
  }
  m->codec->sample_fmt = sample_fmt;
  m->codec->sample_rate = sample_rate;
  av_channel_layout_default(&m->codec->ch_layout, 1);
  m->codec->bit_rate = spec.bit_rate;
  m->codec->time_base = AVRational{1, sample_rate};
  if (m->format->oformat->flags & AVFMT_GLOBALHEADER) m->codec->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
  r = avcodec_open2(m->codec, enc, nullptr);
  if (r < 0) return Internal(std::string("cannot start the ") + enc->name + " encoder: " + AvError(r));
  r = avcodec_parameters_from_context(m->stream->codecpar, m->codec);
  if (r < 0) return Internal("cannot set up the encoded stream: " + AvError(r));
  m->stream->time_base = m->codec->time_base;
  m->format->pb = m->avio;
  m->format->flags |= AVFMT_FLAG_CUSTOM_IO;
  m->frame->format = sample_fmt;
  m->frame->nb_samples = m->codec->frame_size;
  m->frame->sample_rate = sample_rate;
  r = av_channel_layout_copy(&m->frame->ch_layout, &m->codec->ch_layout);
  if (r >= 0) r = av_frame_get_buffer(m->frame, 0);
  if (r < 0) return OutOfMemory("cannot allocate an audio frame");
  r = avformat_write_header(m->format, nullptr);
  if (r < 0) return IoError(std::string("cannot start the ") + spec.muxer + " stream: " + AvError(r));
  m->header_written = true;
  return FfmpegWriter(std::move(m));
}

Status FfmpegWriter::Write(std::span<const float> samples) {
  Impl& m = *impl_;
  if (m.closed) return InvalidArgument("FfmpegWriter::Write after Close");
  for (float x : samples) {
    if (m.filled == 0) {
      const int r = av_frame_make_writable(m.frame);  // the encoder may still hold the last one
      if (r < 0) return OutOfMemory("cannot reuse the audio frame: " + AvError(r));
    }
    reinterpret_cast<float*>(m.frame->data[0])[m.filled++] =
        std::isnan(x) ? 0.0f : std::clamp(x, -1.0f, 1.0f);
    if (m.filled == m.codec->frame_size) LFM_RETURN_IF_ERROR(m.SendFilled());
  }
  return Status::Ok();
}

Status FfmpegWriter::Close() {
  Impl& m = *impl_;
  if (m.closed) return Status::Ok();
  m.closed = true;
  if (m.filled > 0) LFM_RETURN_IF_ERROR(m.SendFilled());  // both encoders take a short last frame
  LFM_RETURN_IF_ERROR(m.Encode(nullptr));
  int r = av_write_trailer(m.format);
  if (r >= 0) {
    avio_flush(m.avio);
    r = m.avio->error;
  }
  if (r < 0) return IoError("cannot finish the encoded stream: " + AvError(r));
  return Status::Ok();
}

Result<std::string> EncodeFfmpegMemory(std::span<const float> mono, int sample_rate, FfmpegFormat format) {
  if (mono.empty()) return InvalidArgument("no samples to encode");
  std::string out;
  LFM_ASSIGN_OR_RETURN(FfmpegWriter w, FfmpegWriter::Create(nullptr, &out, sample_rate, format));
  LFM_RETURN_IF_ERROR(w.Write(mono));
  LFM_RETURN_IF_ERROR(w.Close());
  return out;
}

}  // namespace lfmvox
