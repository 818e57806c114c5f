#include "io/audio_file.h"

#include <gtest/gtest.h>
#include <sndfile.h>
#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "io/npy.h"
#include "io/test_util.h"

namespace lfmvox {
namespace {

using testing::ScratchDir;

TEST(FloatToS16Test, ClampsAndRoundsToNearest) {
  EXPECT_EQ(FloatToS16(0.0f), 0);
  EXPECT_EQ(FloatToS16(-0.0f), 0);
  EXPECT_EQ(FloatToS16(1.0f), 32767);
  EXPECT_EQ(FloatToS16(-1.0f), -32767);
  EXPECT_EQ(FloatToS16(3.0f), 32767);
  EXPECT_EQ(FloatToS16(-3.0f), -32767);
  EXPECT_EQ(FloatToS16(std::numeric_limits<float>::infinity()), 32767);
  EXPECT_EQ(FloatToS16(-std::numeric_limits<float>::infinity()), -32767);
  EXPECT_EQ(FloatToS16(std::numeric_limits<float>::quiet_NaN()), 0);
  EXPECT_EQ(FloatToS16(0.5f), 16384);  // 16383.5 exactly: ties go away from zero
  EXPECT_EQ(FloatToS16(-0.5f), -16384);
  EXPECT_EQ(FloatToS16(0.25f), 8192);  // 8191.75
  EXPECT_EQ(FloatToS16(1.0f / 32767), 1);
  EXPECT_EQ(FloatToS16(0.4f / 32767), 0);
}

// A test signal: a 440 Hz sine at 0.8 plus a few out-of-range and special values.
std::vector<float> Signal(size_t n) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i)
    x[i] = 0.8f * std::sin(2.0f * 3.14159265f * 440.0f * static_cast<float>(i) / 24000);
  if (n > 10) {
    x[1] = 1.7f;
    x[2] = -1.2f;
    x[3] = 1.0f;
    x[4] = -1.0f;
    x[5] = std::numeric_limits<float>::quiet_NaN();
  }
  return x;
}

struct ReadBack {
  SF_INFO info{};
  std::vector<short> s16;
  std::vector<float> f32;
};

ReadBack Read(const std::string& path) {
  ReadBack r;
  SNDFILE* sf = sf_open(path.c_str(), SFM_READ, &r.info);
  EXPECT_NE(sf, nullptr) << sf_strerror(nullptr);
  if (sf == nullptr) return r;
  const size_t n = static_cast<size_t>(r.info.frames * r.info.channels);
  if ((r.info.format & SF_FORMAT_SUBMASK) == SF_FORMAT_PCM_16) {
    r.s16.resize(n);
    EXPECT_EQ(sf_read_short(sf, r.s16.data(), static_cast<sf_count_t>(n)), static_cast<sf_count_t>(n));
  } else {
    r.f32.resize(n);
    EXPECT_EQ(sf_read_float(sf, r.f32.data(), static_cast<sf_count_t>(n)), static_cast<sf_count_t>(n));
  }
  sf_close(sf);
  return r;
}

TEST(WavWriterTest, S16MonoStreamedInChunks) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.File("out.wav");
  const std::vector<float> x = Signal(24000 + 7);
  Result<WavWriter> w = WavWriter::Create(path, 24000);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  // Chunks smaller than, larger than and not a multiple of the internal conversion buffer.
  const std::span<const float> all(x);
  ASSERT_TRUE(w->Write(all.subspan(0, 1000)).ok());
  ASSERT_TRUE(w->Write(all.subspan(1000, 0)).ok());
  ASSERT_TRUE(w->Write(all.subspan(1000, 20000)).ok());
  ASSERT_TRUE(w->Write(all.subspan(21000)).ok());
  EXPECT_EQ(w->frames_written(), 24007);
  ASSERT_TRUE(w->Close().ok());
  EXPECT_TRUE(w->Close().ok()) << "Close is idempotent";
  EXPECT_FALSE(w->Write(all.subspan(0, 1)).ok()) << "Write after Close";

  const ReadBack r = Read(path);
  EXPECT_EQ(r.info.samplerate, 24000);
  EXPECT_EQ(r.info.channels, 1);
  EXPECT_EQ(r.info.format, SF_FORMAT_WAV | SF_FORMAT_PCM_16);
  ASSERT_EQ(r.s16.size(), x.size());
  // Exact: the file holds our integers, and reading shorts back involves no scaling.
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(r.s16[i], FloatToS16(x[i])) << i;
  EXPECT_EQ(r.s16[1], 32767);
  EXPECT_EQ(r.s16[2], -32767);
  EXPECT_EQ(r.s16[5], 0);
}

TEST(WavWriterTest, F32StereoKeepsValuesBitExact) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.File("out_f32.wav");
  std::vector<float> x = Signal(2 * 5001);
  x[5] = 0.0f;  // NaN compares unequal; checked separately below
  Result<WavWriter> created = WavWriter::Create(path, 16000, 2, PcmFormat::kF32);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  WavWriter w = std::move(created).value();  // a moved writer keeps working
  ASSERT_TRUE(w.Write(std::span<const float>(x).subspan(0, 2 * 4000)).ok());
  ASSERT_TRUE(w.Write(std::span<const float>(x).subspan(2 * 4000)).ok());
  EXPECT_EQ(w.Write(std::span<const float>(x).subspan(0, 3)).code(), StatusCode::kInvalidArgument)
      << "3 samples is not a whole number of stereo frames";
  ASSERT_TRUE(w.Close().ok());

  const ReadBack r = Read(path);
  EXPECT_EQ(r.info.samplerate, 16000);
  EXPECT_EQ(r.info.channels, 2);
  EXPECT_EQ(r.info.frames, 5001);
  EXPECT_EQ(r.info.format, SF_FORMAT_WAV | SF_FORMAT_FLOAT);
  ASSERT_EQ(r.f32.size(), x.size());
  EXPECT_EQ(std::memcmp(r.f32.data(), x.data(), x.size() * 4), 0);
  EXPECT_EQ(r.f32[1], 1.7f) << "f32 output is not clamped";
}

TEST(WavWriterTest, PathShowsTheWholeFileOnlyAfterClose) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.File("partial.wav");
  const std::vector<float> x = Signal(480);
  {
    Result<WavWriter> w = WavWriter::Create(path, 24000);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w->Write(x).ok());
  }  // destroyed without Close: a run that failed
  EXPECT_FALSE(std::filesystem::exists(path));
  Result<WavWriter> w = WavWriter::Create(path, 24000);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(w->Write(x).ok());
  ASSERT_TRUE(w->Write(x).ok());
  EXPECT_FALSE(std::filesystem::exists(path)) << "a player never reads a growing file";
  ASSERT_TRUE(w->Close().ok());
  EXPECT_EQ(Read(path).info.frames, 960);
  size_t names = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++names;
  EXPECT_EQ(names, 1u) << "no temporary file is left";
}

TEST(WavWriterTest, CreateErrors) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  EXPECT_EQ(WavWriter::Create(dir.File("x.wav"), 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(WavWriter::Create(dir.File("x.wav"), 24000, 0).status().code(), StatusCode::kInvalidArgument);
  Result<WavWriter> w = WavWriter::Create(dir.File("no/such/dir/x.wav"), 24000);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kNotFound);
  EXPECT_NE(w.status().message().find("no/such/dir/x.wav"), std::string::npos);
}

TEST(WriteRawPcmTest, LittleEndianS16AndF32) {
  FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  const std::vector<float> a = {0.5f, -1.0f, 1.0f, 0.0f, 2.0f};
  ASSERT_TRUE(WriteRawPcm(f, a, PcmFormat::kS16).ok());
  const std::vector<float> b = {1.0f, -2.5f};
  ASSERT_TRUE(WriteRawPcm(f, b, PcmFormat::kF32).ok());
  const std::vector<float> big = Signal(10000);  // more than one conversion chunk
  ASSERT_TRUE(WriteRawPcm(f, big, PcmFormat::kS16).ok());

  std::rewind(f);
  std::vector<unsigned char> bytes(10 + 8 + 20000 + 1);
  const size_t n = std::fread(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  ASSERT_EQ(n, 10u + 8u + 20000u);
  // s16: 16384 = 0x4000, -32767 = 0x8001, 32767 = 0x7fff, 0, 32767.
  const std::vector<unsigned char> s16 = {0x00, 0x40, 0x01, 0x80, 0xff, 0x7f, 0x00, 0x00, 0xff, 0x7f};
  EXPECT_EQ(std::vector<unsigned char>(bytes.begin(), bytes.begin() + 10), s16);
  // f32: 1.0 = 0x3f800000, -2.5 = 0xc0200000, least significant byte first.
  const std::vector<unsigned char> f32 = {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x20, 0xc0};
  EXPECT_EQ(std::vector<unsigned char>(bytes.begin() + 10, bytes.begin() + 18), f32);
  for (size_t i = 0; i < big.size(); ++i) {
    const int16_t v = static_cast<int16_t>(bytes[18 + 2 * i] | (bytes[19 + 2 * i] << 8));
    ASSERT_EQ(v, FloatToS16(big[i])) << i;
  }
}

// ---- Reading ----

const std::string kInputs = std::string(LFMVOX_TEST_DATA_DIR) + "/inputs/";

std::vector<float> LoadTrace(const std::string& name) {
  Result<NpyArray> a = ReadNpy(std::string(LFMVOX_TEST_DATA_DIR) + "/lfm25_tiny/traces/" + name);
  EXPECT_TRUE(a.ok()) << name << ": " << a.status().ToString();
  return a.ok() ? a->ToFloat() : std::vector<float>{};
}

// Writes interleaved float samples with libsndfile in any format it encodes.
void WriteWithSndfile(const std::string& path, int format, int rate, int channels,
                      const std::vector<float>& x) {
  SF_INFO info{};
  info.samplerate = rate;
  info.channels = channels;
  info.format = format;
  ASSERT_TRUE(sf_format_check(&info)) << std::hex << format;
  SNDFILE* sf = sf_open(path.c_str(), SFM_WRITE, &info);
  ASSERT_NE(sf, nullptr) << sf_strerror(nullptr);
  EXPECT_EQ(sf_writef_float(sf, x.data(), static_cast<sf_count_t>(x.size()) / channels),
            static_cast<sf_count_t>(x.size()) / channels);
  sf_close(sf);
}

// What soundfile.read(path, dtype="float32") returns: libsndfile's sf_readf_float with default settings.
std::vector<float> SndfileFloats(const std::string& path) {
  SF_INFO info{};
  SNDFILE* sf = sf_open(path.c_str(), SFM_READ, &info);
  EXPECT_NE(sf, nullptr) << sf_strerror(nullptr);
  if (sf == nullptr) return {};
  std::vector<float> x(static_cast<size_t>(info.frames * info.channels));
  x.resize(static_cast<size_t>(sf_readf_float(sf, x.data(), info.frames) * info.channels));
  sf_close(sf);
  return x;
}

// The oracle's audio/wave_16k and audio/wave_24k are `sf.read(dtype="float32")` of these files: equal bit
// for bit.
TEST(ReadAudioTest, TraceInputsReadExactly) {
  Result<AudioBuffer> a16 = ReadAudioFile(kInputs + "synthetic_16k.wav");
  ASSERT_TRUE(a16.ok()) << a16.status().ToString();
  EXPECT_EQ(a16->sample_rate, 16000);
  EXPECT_EQ(a16->channels, 1);
  EXPECT_EQ(a16->samples, LoadTrace("audio__wave_16k.npy"));
  Result<AudioBuffer> a24 = ReadAudioFile(kInputs + "synthetic_24k.wav");
  ASSERT_TRUE(a24.ok()) << a24.status().ToString();
  EXPECT_EQ(a24->sample_rate, 24000);
  EXPECT_EQ(a24->samples, LoadTrace("audio__wave_24k.npy"));
  Result<AudioBuffer> q = ReadAudioFile(kInputs + "question.wav");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->frames(), 78463u);
  // The same bytes from memory.
  Result<AudioBuffer> m = ReadAudioMemory(testing::ReadBytes(kInputs + "synthetic_16k.wav"));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->samples, a16->samples);
}

// PCM16 reads as x / 32768 exactly (libsndfile's and soundfile's normalisation), extremes included.
TEST(ReadAudioTest, Pcm16IsDividedBy32768) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.File("s16.wav");
  const short values[] = {-32768, -32767, -1, 0, 1, 12345, 32767};
  {
    SF_INFO info{};
    info.samplerate = 8000;
    info.channels = 1;
    info.format = SF_FORMAT_WAV | SF_FORMAT_PCM_16;
    SNDFILE* sf = sf_open(path.c_str(), SFM_WRITE, &info);
    ASSERT_NE(sf, nullptr);
    ASSERT_EQ(sf_write_short(sf, values, 7), 7);
    sf_close(sf);
  }
  Result<AudioBuffer> a = ReadAudioFile(path);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_EQ(a->samples.size(), 7u);
  for (size_t i = 0; i < 7; ++i) EXPECT_EQ(a->samples[i], static_cast<float>(values[i]) / 32768.0f) << i;
  EXPECT_EQ(a->samples[0], -1.0f);
}

// Every container/codec the engine promises: the values are libsndfile's (as soundfile would return
// them) and the file and memory readers agree bit for bit.
TEST(ReadAudioTest, FormatsRoundTrip) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  struct Case {
    const char* name;
    int format;
    int channels;
  };
  const Case cases[] = {
      {"a.wav", SF_FORMAT_WAV | SF_FORMAT_PCM_16, 2},
      {"f.wav", SF_FORMAT_WAV | SF_FORMAT_FLOAT, 1},
      {"p24.wav", SF_FORMAT_WAV | SF_FORMAT_PCM_24, 1},
      {"a.flac", SF_FORMAT_FLAC | SF_FORMAT_PCM_16, 2},
      {"a.ogg", SF_FORMAT_OGG | SF_FORMAT_VORBIS, 1},
      {"o.opus", SF_FORMAT_OGG | SF_FORMAT_OPUS, 1},
      {"a.mp3", SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III, 1},
      {"a.aiff", SF_FORMAT_AIFF | SF_FORMAT_PCM_16, 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = dir.File(c.name);
    const std::vector<float> x = Signal(static_cast<size_t>(16000 * c.channels));
    std::vector<float> clean(x.size());
    for (size_t i = 0; i < x.size(); ++i) clean[i] = 0.5f * std::sin(0.01f * static_cast<float>(i));
    WriteWithSndfile(path, c.format, 16000, c.channels, clean);
    Result<AudioBuffer> a = ReadAudioFile(path);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    EXPECT_EQ(a->sample_rate, 16000);
    EXPECT_EQ(a->channels, c.channels);
    EXPECT_EQ(a->samples, SndfileFloats(path));
    EXPECT_GT(a->frames(), 15000u);  // lossy codecs may pad or trim a little
    Result<AudioBuffer> m = ReadAudioMemory(testing::ReadBytes(path));
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ(m->samples, a->samples);
  }
}

TEST(ReadAudioTest, MixToMonoIsTheChannelMean) {
  AudioBuffer a{16000, 3, {0.1f, 0.2f, 0.4f, -1.0f, 1.0f, 0.5f}};
  const std::vector<float> m = MixToMono(a);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0], (0.1f + 0.2f + 0.4f) / 3.0f);
  EXPECT_EQ(m[1], (-1.0f + 1.0f + 0.5f) / 3.0f);
  AudioBuffer s{16000, 2, {0.25f, 0.75f, -0.5f, 0.5f}};
  EXPECT_EQ(MixToMono(s), (std::vector<float>{0.5f, 0.0f}));
  AudioBuffer mono{16000, 1, {0.1f, 0.2f}};
  EXPECT_EQ(MixToMono(mono), mono.samples);
}

void ExpectError(const Result<AudioBuffer>& r, StatusCode code, const std::string& words) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), code) << r.status().ToString();
  EXPECT_NE(r.status().message().find(words), std::string::npos) << r.status().ToString();
}

// A PCM16 mono WAV header (44 bytes) for `data_bytes` of samples, with the given rate and channels.
std::string WavHeader(uint32_t rate, uint16_t channels, uint32_t data_bytes) {
  std::string h;
  const auto u32 = [&](uint32_t v) {
    for (int b = 0; b < 4; ++b) h.push_back(static_cast<char>(v >> (8 * b)));
  };
  const auto u16 = [&](uint16_t v) {
    for (int b = 0; b < 2; ++b) h.push_back(static_cast<char>(v >> (8 * b)));
  };
  h += "RIFF";
  u32(36 + data_bytes);
  h += "WAVEfmt ";
  u32(16);
  u16(1);  // PCM
  u16(channels);
  u32(rate);
  u32(rate * channels * 2u);
  u16(static_cast<uint16_t>(channels * 2u));
  u16(16);
  h += "data";
  u32(data_bytes);
  return h;
}

TEST(ReadAudioTest, BadFilesAreClearErrors) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  ExpectError(ReadAudioFile(dir.File("missing.wav")), StatusCode::kNotFound, "does not exist");
  ExpectError(ReadAudioFile(dir.path()), StatusCode::kInvalidArgument, "directory");

  const auto file = [&](const std::string& name, const std::string& bytes) {
    const std::string path = dir.File(name);
    EXPECT_TRUE(testing::WriteBytes(path, bytes));
    return path;
  };
  ExpectError(ReadAudioFile(file("empty.wav", "")), StatusCode::kInvalidArgument,
              "not a readable audio file");
  ExpectError(ReadAudioMemory(""), StatusCode::kInvalidArgument, "empty");
  ExpectError(ReadAudioFile(file("text.wav", "this is not audio at all, just some text\n")),
              StatusCode::kInvalidArgument, "not a readable audio file");
  // A corrupt MP3 (a frame sync, then noise) exists, so the message must not say it
  // does not exist; a FIFO is refused without blocking.
  {
    std::string mp3 = "\xff\xfb\x90\x64";
    uint32_t x = 12345;
    for (int i = 0; i < 5000; ++i) {
      x = x * 1103515245u + 12345u;
      mp3 += static_cast<char>(x >> 24);
    }
    const Result<AudioBuffer> r = ReadAudioFile(file("corrupt.mp3", mp3));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message().find("does not exist"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("corrupt.mp3"), std::string::npos) << r.status().message();
  }
  {
    const std::string fifo = dir.File("fifo.wav");
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    ExpectError(ReadAudioFile(fifo), StatusCode::kInvalidArgument, "not a regular file");
  }
  // Header only: a valid WAV with no sample data.
  ExpectError(ReadAudioFile(file("header.wav", WavHeader(16000, 1, 0))), StatusCode::kInvalidArgument,
              "no audio samples");
  // Rates and channel counts out of range, whether libsndfile or lfmvox refuses them.
  const std::string two_samples("\x01\x00\x02\x00", 4);
  for (uint32_t rate : {0u, 2000000u}) {
    const Result<AudioBuffer> r = ReadAudioMemory(WavHeader(rate, 1, 4) + two_samples);
    ASSERT_FALSE(r.ok()) << rate;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  }
  {
    const Result<AudioBuffer> r = ReadAudioMemory(WavHeader(1500000, 1, 4) + two_samples);
    ExpectError(r, StatusCode::kInvalidArgument, "sample rate 1500000 Hz is not in [1, 1000000]");
  }
  for (uint16_t ch : {uint16_t{0}, uint16_t{65}}) {
    const Result<AudioBuffer> r = ReadAudioMemory(WavHeader(16000, ch, 2u * ch) + std::string(2u * ch, '\1'));
    ASSERT_FALSE(r.ok()) << ch;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  }
}

// A WAV whose data chunk is cut short reads up to the last whole frame present (libsndfile's behaviour,
// so soundfile's and the reference's); a cut FLAC is DataLoss.
TEST(ReadAudioTest, TruncatedFiles) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string wav = WavHeader(16000, 1, 2000) + std::string(1001, '\0');  // 500.5 of 1000 frames
  Result<AudioBuffer> w = ReadAudioMemory(wav);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->frames(), 500u);

  const std::string flac = dir.File("a.flac");
  std::vector<float> x(48000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.5f * std::sin(0.01f * static_cast<float>(i));
  WriteWithSndfile(flac, SF_FORMAT_FLAC | SF_FORMAT_PCM_16, 16000, 1, x);
  const std::string bytes = testing::ReadBytes(flac);
  ASSERT_TRUE(ReadAudioMemory(bytes).ok());
  const Result<AudioBuffer> cut = ReadAudioMemory(std::string_view(bytes).substr(0, bytes.size() / 2));
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.status().code(), StatusCode::kDataLoss) << cut.status().ToString();
}

// NaN and Inf are refused with their position (a float WAV can hold them; PCM cannot).
TEST(ReadAudioTest, NonFiniteSamplesAreRefused) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
    std::vector<float> x(2 * 100, 0.25f);
    x[2 * 37 + 1] = bad;  // frame 37, channel 1
    const std::string path = dir.File("bad.wav");
    WriteWithSndfile(path, SF_FORMAT_WAV | SF_FORMAT_FLOAT, 16000, 2, x);
    ExpectError(ReadAudioFile(path), StatusCode::kInvalidArgument, "sample 37 of channel 1");
  }
}

TEST(ReadAudioTest, LengthLimits) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.File("1500ms.wav");
  WriteWithSndfile(path, SF_FORMAT_WAV | SF_FORMAT_PCM_16, 16000, 2, std::vector<float>(2 * 24000, 0.1f));
  EXPECT_TRUE(ReadAudioFile(path).ok());
  AudioLimits one_second;
  one_second.max_seconds = 1.0;
  ExpectError(ReadAudioFile(path, one_second), StatusCode::kOutOfRange, "over the limit of 1 s");
  AudioLimits samples;
  samples.max_samples = 2 * 24000 - 1;
  ExpectError(ReadAudioFile(path, samples), StatusCode::kOutOfRange, "24000 frames");
  samples.max_samples = 2 * 24000;
  EXPECT_TRUE(ReadAudioFile(path, samples).ok());
  // The default: one hour. A header claiming more is refused before anything is decoded: a FLAC whose
  // STREAMINFO total (36 bits at bytes 21..25, after "fLaC", the block header and 14 bytes) says
  // 3601 s. (A WAV header cannot do this: libsndfile trims its data size to the bytes present.)
  const std::string flac = dir.File("short.flac");
  WriteWithSndfile(flac, SF_FORMAT_FLAC | SF_FORMAT_PCM_16, 16000, 1, std::vector<float>(100, 0.1f));
  std::string bytes = testing::ReadBytes(flac);
  ASSERT_EQ(bytes.substr(0, 4), "fLaC");
  const uint64_t total = 16000ull * 3601;
  bytes[21] = static_cast<char>((static_cast<uint8_t>(bytes[21]) & 0xf0) | ((total >> 32) & 0x0f));
  for (int b = 0; b < 4; ++b) bytes[22 + b] = static_cast<char>(total >> (8 * (3 - b)));
  ExpectError(ReadAudioMemory(bytes), StatusCode::kOutOfRange, "57616000 frames (3601.0 s");
  const std::vector<uint8_t> raw(2 * 3, 0);
  ExpectError(FromRawPcm(raw, 1, 1, PcmFormat::kS16, one_second), StatusCode::kOutOfRange, "limit");
}

TEST(FromRawPcmTest, DecodesLittleEndian) {
  // s16: 0x8000 = -32768, 0x4000 = 16384, 0x7fff = 32767, 0xffff = -1.
  const std::vector<uint8_t> s16 = {0x00, 0x80, 0x00, 0x40, 0xff, 0x7f, 0xff, 0xff};
  Result<AudioBuffer> a = FromRawPcm(s16, 16000, 2, PcmFormat::kS16);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->frames(), 2u);
  EXPECT_EQ(a->samples, (std::vector<float>{-1.0f, 0.5f, 32767.0f / 32768, -1.0f / 32768}));
  // f32: 1.0 = 0x3f800000, -2.5 = 0xc0200000 (not clamped).
  const std::vector<uint8_t> f32 = {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x20, 0xc0};
  Result<AudioBuffer> b = FromRawPcm(f32, 24000, 1, PcmFormat::kF32);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->samples, (std::vector<float>{1.0f, -2.5f}));
}

TEST(FromRawPcmTest, Errors) {
  const std::vector<uint8_t> six(6, 0);
  EXPECT_EQ(FromRawPcm(six, 16000, 2, PcmFormat::kS16).status().code(), StatusCode::kInvalidArgument)
      << "6 bytes is not a whole number of 4-byte frames";
  EXPECT_EQ(FromRawPcm(six, 0, 1, PcmFormat::kS16).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(FromRawPcm(six, 16000, 0, PcmFormat::kS16).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(FromRawPcm(six, 16000, 65, PcmFormat::kS16).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(FromRawPcm({}, 16000, 1, PcmFormat::kS16).status().code(), StatusCode::kInvalidArgument);
  const std::vector<uint8_t> nan = {0x00, 0x00, 0xc0, 0x7f};
  ExpectError(FromRawPcm(nan, 16000, 1, PcmFormat::kF32), StatusCode::kInvalidArgument, "NaN");
}

}  // namespace
}  // namespace lfmvox
