// PcmOutput::Open picks the container from the extension; each is decoded back with DecodeAudio.
// WAV and FLAC hold the s16 values exactly (FloatToS16's rule, read back as x / 32768). Opus, MP3 and
// AAC (.m4a in MP4, .aac as ADTS, both written and read back through FFmpeg) are lossy: a 440 Hz sine at half
// scale, 1 s at 24 kHz, is compared after the codec's delay (the best lag within 50 ms; ADTS keeps the AAC
// encoder's 1024-sample priming, which MP4's edit list trims) with an SNR bound well under what either codec
// gives a pure tone at its default bitrate (>= 20 dB; measured values in the failure message).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "lfmvox/audio_io.h"

namespace lfmvox {
namespace {

std::vector<float> Sine() {
  std::vector<float> x(24000);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = 0.5f * static_cast<float>(std::sin(2 * M_PI * 440 * i / 24000.0));
  return x;
}

Result<DecodedAudio> RoundTrip(const std::string& name, const std::vector<float>& x) {
  const std::string path = (std::filesystem::temp_directory_path() / name).string();
  auto out = PcmOutput::Open(path, 24000, PcmFormat::kS16);
  if (!out.ok()) return out.status();
  if (Status s = (*out)->Write(x); !s.ok()) return s;
  if (Status s = (*out)->Close(); !s.ok()) return s;
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  std::filesystem::remove(path);
  return DecodeAudio(ss.str(), 3600);
}

TEST(AudioFormats, WavAndFlacHoldTheS16ValuesExactly) {
  const std::vector<float> x = Sine();
  for (const char* name : {"lfmvox_fmt.wav", "lfmvox_fmt.flac", "lfmvox_fmt.FLAC"}) {
    auto d = RoundTrip(name, x);
    ASSERT_TRUE(d.ok()) << name << ": " << d.status().message();
    ASSERT_EQ(d->sample_rate, 24000);
    ASSERT_EQ(d->samples.size(), x.size()) << name;
    for (size_t i = 0; i < x.size(); ++i) {
      const long want = std::lround(std::clamp(x[i], -1.0f, 1.0f) * 32767.0f);
      ASSERT_EQ(std::lround(d->samples[i] * 32768.0f), want) << name << " sample " << i;
    }
  }
}

TEST(AudioFormats, LossyFormatsKeepTheToneAboveTheSnrBound) {
  const std::vector<float> x = Sine();
  for (const char* name :
       {"lfmvox_fmt.opus", "lfmvox_fmt.ogg", "lfmvox_fmt.mp3", "lfmvox_fmt.m4a", "lfmvox_fmt.aac"}) {
    auto d = RoundTrip(name, x);
    ASSERT_TRUE(d.ok()) << name << ": " << d.status().message();
    ASSERT_EQ(d->channels, 1);
    ASSERT_EQ(d->sample_rate, 24000) << name;
    // Best lag in [0, 1200 + 1024) samples; the middle 0.5 s avoids the codec's ramp at both ends.
    double best = -1e9;
    for (size_t lag = 0; lag < 1200 + 1024; ++lag) {
      double sig = 0, err = 0;
      for (size_t i = 6000; i < 18000 && i + lag < d->samples.size(); ++i) {
        sig += double(x[i]) * x[i];
        const double e = d->samples[i + lag] - x[i];
        err += e * e;
      }
      best = std::max(best, 10 * std::log10(sig / std::max(err, 1e-30)));
    }
    EXPECT_GE(best, 20.0) << name << ": SNR " << best << " dB";
  }
}

TEST(AudioFormats, FloatSamplesInALossyOrFlacFileAreRefused) {
  auto out = PcmOutput::Open((std::filesystem::temp_directory_path() / "lfmvox_fmt_f32.flac").string(), 24000,
                             PcmFormat::kF32);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("--pcm f32"), std::string::npos);
}

}  // namespace
}  // namespace lfmvox
