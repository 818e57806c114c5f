#include "io/audio_file.h"

#include <gtest/gtest.h>
#include <sndfile.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

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

TEST(WavWriterTest, FileIsValidBeforeClose) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.File("partial.wav");
  const std::vector<float> x = Signal(480);
  Result<WavWriter> w = WavWriter::Create(path, 24000);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(w->Write(x).ok());
  const ReadBack mid = Read(path);  // as a player reading the growing file would
  EXPECT_EQ(mid.info.frames, 480);
  ASSERT_TRUE(w->Write(x).ok());
  EXPECT_EQ(Read(path).info.frames, 960);
}

TEST(WavWriterTest, CreateErrors) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  EXPECT_EQ(WavWriter::Create(dir.File("x.wav"), 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(WavWriter::Create(dir.File("x.wav"), 24000, 0).status().code(), StatusCode::kInvalidArgument);
  Result<WavWriter> w = WavWriter::Create(dir.File("no/such/dir/x.wav"), 24000);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kIo);
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

}  // namespace
}  // namespace lfmvox
