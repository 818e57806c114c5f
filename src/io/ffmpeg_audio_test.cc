// The FFmpeg input path (io/ffmpeg_audio.h) through ReadAudioFile / ReadAudioMemory: M4A (AAC) and
// WebM (Opus) files encoded here, at test time, from a known signal by FFmpeg's own encoders (no
// fixtures), decoded back and compared with the source; and cut, damaged and over-long files.
#include "io/ffmpeg_audio.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "io/audio_file.h"
#include "io/test_util.h"

namespace lfmvox {
namespace {

using testing::ScratchDir;
using testing::WriteBytes;

// Two tones (300 Hz at 0.3, 1100 Hz at 0.2) with a 20 ms fade in and out, in the band both codecs
// keep at these rates.
std::vector<float> Tones(int rate, double seconds) {
  const size_t n = static_cast<size_t>(seconds * rate);
  const size_t fade = static_cast<size_t>(rate / 50);
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) {
    const double t = static_cast<double>(i) / rate;
    const double env = std::min({1.0, static_cast<double>(i) / fade, static_cast<double>(n - i) / fade});
    x[i] =
        static_cast<float>(env * (0.3 * std::sin(2 * M_PI * 300 * t) + 0.2 * std::sin(2 * M_PI * 1100 * t)));
  }
  return x;
}

// SNR in dB of `y` against `x` with y delayed by `lag` samples (y[i + lag] ~ x[i]), over the samples
// both hold.
double SnrDb(const std::vector<float>& x, const std::vector<float>& y, int lag) {
  double s = 0, e = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const int64_t j = static_cast<int64_t>(i) + lag;
    if (j < 0 || j >= static_cast<int64_t>(y.size())) continue;
    s += static_cast<double>(x[i]) * x[i];
    const double d = static_cast<double>(x[i]) - y[static_cast<size_t>(j)];
    e += d * d;
  }
  return 10 * std::log10(s / std::max(e, 1e-30));
}

// The lag in [-max_lag, max_lag] with the best SNR.
int BestLag(const std::vector<float>& x, const std::vector<float>& y, int max_lag) {
  int best = 0;
  double best_snr = -1e9;
  for (int lag = -max_lag; lag <= max_lag; ++lag) {
    const double snr = SnrDb(x, y, lag);
    if (snr > best_snr) {
      best_snr = snr;
      best = lag;
    }
  }
  return best;
}

struct Case {
  FfmpegFormat format;
  int rate;  // the encoder's rate; FFmpeg's Opus decoder always gives 48 kHz, so Opus is made at 48
  int64_t codec_frame;  // samples per codec frame: AAC 1024, Opus 20 ms
  double min_snr_db;
};

// Measured SNRs with lag 0 (Debian 12's FFmpeg 5.1): AAC-LC 96 kb/s 29.2 dB, Opus 64 kb/s 40.9 dB. The
// bounds sit 6 and 11 dB under that and above what a decoding mistake gives: a one-sample lag costs
// 20 log10(1 / (2 sin(pi 1100 / rate))) = 16.9 dB at 48 kHz (10.9 dB at 24 kHz) for the 1100 Hz tone,
// a wrong normalisation (x2 or /2) 0 to 6 dB, a lost priming trim (1024 or 312 samples of lag) ~0 dB.
const Case kCases[] = {
    {FfmpegFormat::kM4aAac, 24000, 1024, 23.0},
    {FfmpegFormat::kWebmOpus, 48000, 960, 30.0},
};

class FfmpegRoundTrip : public ::testing::TestWithParam<Case> {};

TEST_P(FfmpegRoundTrip, DecodesWhatTheEncoderWasGiven) {
  const Case c = GetParam();
  ASSERT_TRUE(CanEncodeFfmpeg(c.format, c.rate));
  const std::vector<float> x = Tones(c.rate, 1.5);
  auto bytes = EncodeFfmpegMemory(x, c.rate, c.format);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();

  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  // No extension: the decoder is found from the bytes.
  const std::string path = dir.File("clip");
  ASSERT_TRUE(WriteBytes(path, *bytes));
  ::testing::internal::CaptureStderr();
  auto from_file = ReadAudioFile(path);
  auto from_memory = ReadAudioMemory(*bytes);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  ASSERT_TRUE(from_file.ok()) << from_file.status().ToString();
  ASSERT_TRUE(from_memory.ok()) << from_memory.status().ToString();
  EXPECT_EQ(from_file->samples, from_memory->samples);
  EXPECT_EQ(from_file->sample_rate, c.rate);
  EXPECT_EQ(from_file->channels, 1);

  // The demuxer trims the encoder's priming (MP4 edit list, WebM CodecDelay), so the samples line up
  // with the source and the length matches within one codec frame.
  const std::vector<float>& y = from_file->samples;
  EXPECT_LE(std::abs(static_cast<int64_t>(y.size()) - static_cast<int64_t>(x.size())), c.codec_frame);
  EXPECT_EQ(BestLag(x, y, 2048), 0);
  const double snr = SnrDb(x, y, 0);
  EXPECT_GE(snr, c.min_snr_db);
  std::printf("SNR %.1f dB over %zu samples (source %zu)\n", snr, y.size(), x.size());
}

INSTANTIATE_TEST_SUITE_P(Formats, FfmpegRoundTrip, ::testing::ValuesIn(kCases));

TEST(FfmpegInput, AdtsAacDecodesAndIsCheckedWhileDecoding) {
  const std::vector<float> x = Tones(24000, 1.5);
  auto adts = EncodeFfmpegMemory(x, 24000, FfmpegFormat::kAdtsAac);
  ASSERT_TRUE(adts.ok()) << adts.status().ToString();
  auto y = ReadAudioMemory(*adts);
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  // ADTS has no priming trim: the best lag is the encoder's 1024-sample delay.
  const int lag = BestLag(x, y->samples, 2048);
  EXPECT_EQ(lag, 1024);
  EXPECT_GE(SnrDb(x, y->samples, lag), 23.0);
  // Its length is only an estimate from the bitrate, so the cap is enforced while decoding.
  auto capped = ReadAudioMemory(*adts, AudioLimits{.max_seconds = 1.0});
  ASSERT_FALSE(capped.ok());
  EXPECT_EQ(capped.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(capped.status().message().find("at least"), std::string::npos) << capped.status().message();
}

TEST(FfmpegInput, DeclaredLengthOverTheCapIsRefusedBeforeDecoding) {
  auto m4a = EncodeFfmpegMemory(Tones(24000, 1.5), 24000, FfmpegFormat::kM4aAac);
  ASSERT_TRUE(m4a.ok());
  auto r = ReadAudioMemory(*m4a, AudioLimits{.max_seconds = 1.0});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);
  // The header's 36000 frames, not "at least" a decoded count.
  EXPECT_NE(r.status().message().find(": 36000 frames"), std::string::npos) << r.status().message();
}

TEST(FfmpegInput, CutAndDamagedFilesGiveClearErrors) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  for (FfmpegFormat f : {FfmpegFormat::kM4aAac, FfmpegFormat::kWebmOpus}) {
    const int rate = f == FfmpegFormat::kWebmOpus ? 48000 : 24000;
    auto bytes = EncodeFfmpegMemory(Tones(rate, 1.5), rate, f);
    ASSERT_TRUE(bytes.ok());
    for (size_t keep : {bytes->size() / 2, size_t{64}}) {
      const std::string cut = bytes->substr(0, keep);
      const std::string path = dir.File("cut");
      ASSERT_TRUE(WriteBytes(path, cut));
      ::testing::internal::CaptureStderr();
      auto r = ReadAudioFile(path);
      EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
      ASSERT_FALSE(r.ok()) << "format " << static_cast<int>(f) << " cut to " << keep << " bytes decoded";
      // The M4A index (moov) is written last, so a cut M4A cannot be opened; a cut WebM decodes short
      // of its declared duration.
      EXPECT_TRUE(r.status().code() == StatusCode::kInvalidArgument ||
                  r.status().code() == StatusCode::kDataLoss)
          << r.status().ToString();
      EXPECT_EQ(r.status().message().find("does not exist"), std::string::npos) << r.status().message();
      // Named once: the reader adds the name, the decoder does not repeat it.
      EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status().message();
      EXPECT_EQ(r.status().message().find(path), r.status().message().rfind(path)) << r.status().message();
    }
  }
}

TEST(FfmpegInput, BytesNoDecoderRecognisesAreInvalidArgument) {
  std::string noise(4096, '\0');
  uint32_t s = 12345;
  for (char& ch : noise) {
    s = s * 1664525u + 1013904223u;
    ch = static_cast<char>(s >> 24);
  }
  ::testing::internal::CaptureStderr();
  auto r = ReadAudioMemory(noise);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  EXPECT_NE(r.status().message().find("M4A/AAC"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace lfmvox
