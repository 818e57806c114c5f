#include "models/lfm25_audio/log_mel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dsp/resample.h"
#include "io/npy.h"

namespace lfmvox {
namespace {

const std::string kData = LFMVOX_TEST_DATA_DIR;
const std::string kWhere = "config.json [preprocessor]";

NpyArray LoadNpy(const std::string& path) {
  Result<NpyArray> a = ReadNpy(path);
  if (!a.ok()) {
    ADD_FAILURE() << path << ": " << a.status().ToString();
    return {};
  }
  return std::move(a).value();
}

std::vector<float> LoadTrace(const std::string& model_case, const std::string& name,
                             std::vector<int64_t>* shape = nullptr) {
  NpyArray a = LoadNpy(kData + "/" + model_case + "/traces/" + name);
  if (shape) *shape = a.shape;
  return a.ToFloat();
}

nlohmann::json Preprocessor(const std::string& model_case = "lfm25_tiny") {
  std::ifstream f(kData + "/" + model_case + "/config.json");
  return nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false)["preprocessor"];
}

LogMelFrontEnd MakeFrontEnd(const std::string& model_case = "lfm25_tiny") {
  Result<LogMelConfig> c = LogMelConfig::FromJson(Preprocessor(model_case), kWhere);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  Result<LogMelFrontEnd> m = LogMelFrontEnd::Create(*c);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return std::move(m).value();
}

struct Diff {
  double max_abs = 0, scale = 0;
};

Diff Compare(std::span<const float> got, const std::vector<float>& want) {
  Diff d;
  EXPECT_EQ(got.size(), want.size());
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    d.max_abs = std::max(d.max_abs, std::fabs(static_cast<double>(got[i]) - want[i]));
    d.scale = std::max(d.scale, std::fabs(static_cast<double>(want[i])));
  }
  return d;
}

// Compares a mel against a trace [n_mels, M] and its valid length under the tolerance measured by the oracle
// (its README) max|port − oracle| ≤ k·max|oracle|, and checks the masked last frame is exactly pad_value (0).
void ExpectMelMatches(const MelFeatures& mel, const std::string& model_case, const std::string& prefix,
                      double k) {
  std::vector<int64_t> shape;
  const std::vector<float> want = LoadTrace(model_case, prefix + "__mel.npy", &shape);
  const std::vector<int64_t> valid =
      LoadNpy(kData + "/" + model_case + "/traces/" + prefix + "__mel_valid_len.npy").ToInt64();
  ASSERT_EQ(shape.size(), 2u);
  ASSERT_EQ(valid.size(), 1u);
  EXPECT_EQ(shape[0], 128);
  EXPECT_EQ(mel.frames, static_cast<size_t>(shape[1]));
  EXPECT_EQ(mel.valid_frames, static_cast<size_t>(valid[0]));
  const Diff d = Compare(mel.mel, want);
  std::printf("%s/traces/%s__mel.npy [128,%lld]: max abs %.3g, scale %.3g, ratio %.3g (tolerance %.0e)\n",
              model_case.c_str(), prefix.c_str(), static_cast<long long>(shape[1]), d.max_abs, d.scale,
              d.max_abs / d.scale, k);
  EXPECT_LE(d.max_abs, k * d.scale) << model_case << " " << prefix;
  for (size_t i = 0; i < 128; ++i) ASSERT_EQ(mel.mel[i * mel.frames + mel.frames - 1], 0.0f) << "bin " << i;
}

TEST(LogMelConfigTest, ReadsTheModelConfig) {
  Result<LogMelConfig> c = LogMelConfig::FromJson(Preprocessor(), kWhere);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->sample_rate, 16000);
  EXPECT_EQ(c->win_length, 400);  // int(0.025 · 16000)
  EXPECT_EQ(c->hop_length, 160);  // int(0.01 · 16000)
  EXPECT_EQ(c->n_fft, 512);
  EXPECT_EQ(c->n_mels, 128);
  EXPECT_EQ(c->pad_value, 0.0f);
  nlohmann::json p = Preprocessor();
  p["n_fft"] = nullptr;  // NeMo: next power of two of the window
  Result<LogMelConfig> d = LogMelConfig::FromJson(p, kWhere);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->n_fft, 512);
  p.erase("dither");
  p.erase("pad_value");
  EXPECT_TRUE(LogMelConfig::FromJson(p, kWhere).ok()) << "dither and pad_value are optional";
}

TEST(LogMelConfigTest, RejectsWhatIsNotImplementedOrInvalid) {
  struct Case {
    const char* key;
    nlohmann::json value;
    StatusCode code;
  };
  const Case cases[] = {
      {"normalize", "all_features", StatusCode::kUnimplemented},
      {"window", "hamming", StatusCode::kUnimplemented},
      {"log", false, StatusCode::kUnimplemented},
      {"frame_splicing", 3, StatusCode::kUnimplemented},
      {"pad_to", 16, StatusCode::kUnimplemented},
      {"sample_rate", 0, StatusCode::kOutOfRange},
      {"sample_rate", 16000.5, StatusCode::kInvalidArgument},
      {"sample_rate", "16000", StatusCode::kInvalidArgument},
      {"window_size", 0.0, StatusCode::kInvalidArgument},
      {"window_stride", -0.01, StatusCode::kInvalidArgument},
      {"features", 0, StatusCode::kOutOfRange},
      {"n_fft", 256, StatusCode::kInvalidArgument},  // shorter than the 400-sample window
      {"log", "yes", StatusCode::kInvalidArgument},
      {"dither", -1, StatusCode::kOutOfRange},
      // NeMo keys liquid-audio's PreprocessorConfig lacks: tolerated at NeMo's default, refused otherwise.
      {"preemph", 0.9, StatusCode::kUnimplemented},
      {"mel_norm", nullptr, StatusCode::kUnimplemented},
      {"log_zero_guard_type", "clamp", StatusCode::kUnimplemented},
  };
  for (const Case& c : cases) {
    nlohmann::json p = Preprocessor();
    p[c.key] = c.value;
    Result<LogMelConfig> r = LogMelConfig::FromJson(p, kWhere);
    ASSERT_FALSE(r.ok()) << c.key << " = " << c.value.dump();
    EXPECT_EQ(r.status().code(), c.code) << r.status().ToString();
    EXPECT_NE(r.status().message().find(c.key), std::string::npos) << r.status().ToString();
  }
  // Library metadata and NeMo's defaults spelled out are no reason to refuse a file.
  nlohmann::json extra = Preprocessor();
  extra["transformers_version"] = "4.57.0";
  extra["preemph"] = 0.97;
  extra["mel_norm"] = "slaney";
  EXPECT_TRUE(LogMelConfig::FromJson(extra, kWhere).ok());
  nlohmann::json p = Preprocessor();
  p.erase("n_fft");
  EXPECT_EQ(LogMelConfig::FromJson(p, kWhere).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(LogMelConfig::FromJson(nlohmann::json::array(), kWhere).status().code(),
            StatusCode::kInvalidArgument);
  // 514 = 2·257: a length the FFT does not do.
  p = Preprocessor();
  p["n_fft"] = 514;
  Result<LogMelConfig> c = LogMelConfig::FromJson(p, kWhere);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(LogMelFrontEnd::Create(*c).ok());
}

// audio/window = torch.hann_window(400, periodic=False). The same float32 ops in the same order; only
// cosf may differ by an ulp between libm and torch's vectorised cos, and ×0.5, +0.5 keep that within
// one ulp of 1.0 (1.2e-7).
TEST(LogMelTest, WindowMatchesTrace) {
  LogMelFrontEnd m = MakeFrontEnd();
  const Diff d = Compare(m.window(), LoadTrace("lfm25_tiny", "audio__window.npy"));
  std::printf("audio__window.npy [400]: max abs %.3g\n", d.max_abs);
  EXPECT_LE(d.max_abs, 1.2e-7);
}

// audio/filterbank = librosa.filters.mel(16000, 512, 128, norm="slaney") as float32. Built with the same
// double arithmetic and the same two float32 roundings; libm's exp/log may differ from numpy's by an ulp
// in double, which moves a float32 result by at most one float32 ulp (2^-23 relative).
TEST(LogMelTest, FilterbankMatchesTrace) {
  LogMelFrontEnd m = MakeFrontEnd();
  const std::vector<float> want = LoadTrace("lfm25_tiny", "audio__filterbank.npy");
  ASSERT_EQ(m.filterbank().size(), 128u * 257u);
  ASSERT_EQ(want.size(), 128u * 257u);
  size_t differ = 0;
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double e = std::fabs(static_cast<double>(m.filterbank()[i]) - want[i]);
    if (e != 0) ++differ;
    worst = std::max(worst, e / std::max(std::fabs(static_cast<double>(want[i])), 1e-30));
    EXPECT_LE(e, std::ldexp(std::fabs(want[i]), -23)) << i;
  }
  std::printf("audio__filterbank.npy [128,257]: %zu of %zu values differ, max relative %.3g\n", differ,
              want.size(), worst);
}

// audio/mel from audio/wave_16k (the synthetic 1.3 s clip), k = 2e-4 (oracle README, audio group).
TEST(LogMelTest, SyntheticMelMatchesTraceInBothCases) {
  for (const char* model_case : {"lfm25_tiny", "lfm25_small"}) {
    LogMelFrontEnd m = MakeFrontEnd(model_case);
    const std::vector<float> wave = LoadTrace(model_case, "audio__wave_16k.npy");
    ASSERT_EQ(wave.size(), 20800u);
    MelFeatures mel;
    ASSERT_TRUE(m.Compute(wave, &mel).ok());
    ExpectMelMatches(mel, model_case, "audio", 2e-4);
  }
}

// audio_speech/mel: the real question.wav (16 kHz PCM16, 78463 samples), k = 1e-4 (audio_speech group).
// Read through ReadAudioFile, so this is also the file path end to end.
TEST(LogMelTest, SpeechFileMelMatchesTraceInBothCases) {
  Result<AudioBuffer> audio = ReadAudioFile(kData + "/inputs/question.wav");
  ASSERT_TRUE(audio.ok()) << audio.status().ToString();
  EXPECT_EQ(audio->frames(), 78463u);
  for (const char* model_case : {"lfm25_tiny", "lfm25_small"}) {
    LogMelFrontEnd m = MakeFrontEnd(model_case);
    MelFeatures mel;
    ASSERT_TRUE(m.ComputeFromAudio(*audio, &mel).ok());
    ExpectMelMatches(mel, model_case, "audio_speech", 1e-4);
    EXPECT_EQ(Mel2EmbLen(mel.frames, 8), 62u);  // conformer_speech/out_len
  }
}

// inputs/synthetic_16k.wav is the file audio/wave_16k came from: ReadAudioFile → MixToMono → (no
// resampling at 16 kHz) → mel equals the trace.
TEST(LogMelTest, SyntheticFileEndToEnd) {
  Result<AudioBuffer> audio = ReadAudioFile(kData + "/inputs/synthetic_16k.wav");
  ASSERT_TRUE(audio.ok()) << audio.status().ToString();
  LogMelFrontEnd m = MakeFrontEnd();
  MelFeatures mel;
  ASSERT_TRUE(m.ComputeFromAudio(*audio, &mel).ok());
  ExpectMelMatches(mel, "lfm25_tiny", "audio", 2e-4);
  EXPECT_EQ(Mel2EmbLen(mel.frames, 8), 17u);  // conformer/out_len
}

// inputs/synthetic_24k.wav goes through the resampler inside ComputeFromAudio; the result must be the
// mel of audio/wave_24k_resampled_16k (torchaudio's output). The two inputs differ by the resampler's
// rounding (≈1e-7 relative, see resample_test), far inside the audio tolerance k = 2e-4.
TEST(LogMelTest, ResamplingFileEndToEnd) {
  Result<AudioBuffer> audio = ReadAudioFile(kData + "/inputs/synthetic_24k.wav");
  ASSERT_TRUE(audio.ok()) << audio.status().ToString();
  ASSERT_EQ(audio->sample_rate, 24000);
  LogMelFrontEnd m = MakeFrontEnd();
  MelFeatures from_file, from_trace;
  ASSERT_TRUE(m.ComputeFromAudio(*audio, &from_file).ok());
  ASSERT_TRUE(m.Compute(LoadTrace("lfm25_tiny", "audio__wave_24k_resampled_16k.npy"), &from_trace).ok());
  EXPECT_EQ(from_file.frames, 51u);  // 1 + 8000/160
  EXPECT_EQ(from_file.valid_frames, 50u);
  const Diff d = Compare(from_file.mel, from_trace.mel);
  std::printf(
      "mel(resample(synthetic_24k.wav)) vs mel(audio__wave_24k_resampled_16k.npy): max abs %.3g, "
      "scale %.3g\n",
      d.max_abs, d.scale);
  EXPECT_LE(d.max_abs, 2e-4 * d.scale);
}

// A stereo file whose channels are equal mixes to exactly that channel ((x + x)/2 = x), so its features
// equal the mono ones bit for bit.
TEST(LogMelTest, StereoWithEqualChannelsEqualsMono) {
  const std::vector<float> wave = LoadTrace("lfm25_tiny", "audio__wave_16k.npy");
  AudioBuffer stereo{16000, 2, {}};
  for (float x : wave) stereo.samples.insert(stereo.samples.end(), {x, x});
  LogMelFrontEnd m = MakeFrontEnd();
  MelFeatures a, b;
  ASSERT_TRUE(m.ComputeFromAudio(stereo, &a).ok());
  ASSERT_TRUE(m.Compute(wave, &b).ok());
  EXPECT_EQ(a.mel, b.mel);
}

// The output vector is reused: a second, shorter clip neither reallocates nor keeps stale frames, and
// the front end's scratch carries nothing between clips.
TEST(LogMelTest, ReusesTheOutputAndIsRepeatable) {
  const std::vector<float> wave = LoadTrace("lfm25_tiny", "audio__wave_16k.npy");
  LogMelFrontEnd m = MakeFrontEnd();
  MelFeatures mel, again;
  ASSERT_TRUE(m.Compute(wave, &mel).ok());
  const float* data = mel.mel.data();
  const std::vector<float> first = mel.mel;
  ASSERT_TRUE(m.Compute(std::span<const float>(wave).first(16000), &mel).ok());
  EXPECT_EQ(mel.mel.data(), data);
  EXPECT_EQ(mel.frames, 101u);
  EXPECT_EQ(mel.mel.size(), 128u * 101u);
  ASSERT_TRUE(m.Compute(wave, &again).ok());
  EXPECT_EQ(again.mel, first);
}

TEST(LogMelTest, ShortAndNonFiniteInputAreErrors) {
  LogMelFrontEnd m = MakeFrontEnd();
  MelFeatures mel;
  std::vector<float> x;
  EXPECT_EQ(m.Compute(x, &mel).code(), StatusCode::kInvalidArgument);  // empty: F = 1, L = 0
  x.assign(1, 0.5f);
  EXPECT_EQ(m.Compute(x, &mel).code(), StatusCode::kInvalidArgument);  // one sample: L = 0
  x.assign(319, 0.5f);
  Status s = m.Compute(x, &mel);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);  // L = 1: the reference raises
  EXPECT_NE(s.message().find("too short"), std::string::npos) << s.ToString();
  // 320 samples: L = 2, F = 3, the shortest clip accepted.
  x.resize(320);
  for (size_t i = 0; i < 320; ++i) x[i] = std::sin(0.05f * static_cast<float>(i));
  ASSERT_TRUE(m.Compute(x, &mel).ok());
  EXPECT_EQ(mel.frames, 3u);
  EXPECT_EQ(mel.valid_frames, 2u);
  // With two frames each bin normalises to ±(d/2)/(|d|/√2 + 1e-5) = ±0.7071 (or 0 where d = 0).
  for (size_t i = 0; i < 128; ++i) {
    EXPECT_NEAR(std::fabs(mel.mel[i * 3]), std::fabs(mel.mel[i * 3 + 1]), 1e-6f);
    EXPECT_LE(std::fabs(mel.mel[i * 3]), 0.70711f);
  }
  x[100] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(m.Compute(x, &mel).code(), StatusCode::kInvalidArgument);
  x[100] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(m.Compute(x, &mel).code(), StatusCode::kInvalidArgument);
  x[100] = 2e6f;  // finite, but the power spectrum of much larger values overflows float32
  EXPECT_EQ(m.Compute(x, &mel).code(), StatusCode::kInvalidArgument);
  x[100] = -32768.0f;  // an unnormalised float file: fine
  EXPECT_TRUE(m.Compute(x, &mel).ok());
}

TEST(LogMelTest, DigitalSilenceIsFinite) {
  // All-zero input: every mel value is log(2^-24), the std is 0, so (x − μ)/(0 + 1e-5) = 0 exactly.
  LogMelFrontEnd m = MakeFrontEnd();
  MelFeatures mel;
  ASSERT_TRUE(m.Compute(std::vector<float>(1600, 0.0f), &mel).ok());
  for (float v : mel.mel) ASSERT_EQ(v, 0.0f);
}

TEST(LogMelTest, Mel2EmbLenIsCeil) {
  EXPECT_EQ(Mel2EmbLen(0, 8), 0u);
  EXPECT_EQ(Mel2EmbLen(1, 8), 1u);
  EXPECT_EQ(Mel2EmbLen(8, 8), 1u);
  EXPECT_EQ(Mel2EmbLen(9, 8), 2u);
  EXPECT_EQ(Mel2EmbLen(131, 8), 17u);
  EXPECT_EQ(Mel2EmbLen(491, 8), 62u);
  EXPECT_EQ(Mel2EmbLen(491, 0), 0u);
}

}  // namespace
}  // namespace lfmvox
