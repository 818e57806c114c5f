// Hostile and careless input through the public API, on tests/data/lfm25_tiny; each test names the
// kind of input it covers.
#include <gtest/gtest.h>
#include <sndfile.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "lfmvox/audio_io.h"
#include "lfmvox/lfmvox.h"
#include "trace_util.h"

namespace lfmvox {
namespace {

namespace fs = std::filesystem;

size_t EntriesIn(const fs::path& dir) {
  return static_cast<size_t>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

// A WAV is all or nothing. It grows in a temporary file in the same folder and appears under its name only
// on a successful Close.
TEST(PcmOutput, WavAppearsOnlyOnClose) {
  const fs::path dir = testing::ScratchPath("pcm_output_close");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string wav = (dir / "out.wav").string();
  auto out = PcmOutput::Open(wav, 24000, PcmFormat::kS16);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const std::vector<float> pcm(480, 0.25f);
  ASSERT_TRUE((*out)->Write(pcm).ok());
  EXPECT_FALSE(fs::exists(wav)) << "the WAV must not appear before Close";
  EXPECT_EQ(EntriesIn(dir), 1u) << "one temporary file in the same folder";
  ASSERT_TRUE((*out)->Close().ok());
  EXPECT_EQ(EntriesIn(dir), 1u) << "the temporary file was renamed";
  SF_INFO info{};
  SNDFILE* f = sf_open(wav.c_str(), SFM_READ, &info);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(info.frames, 480);
  sf_close(f);
  EXPECT_FALSE((*out)->Write(pcm).ok()) << "Write after Close";
}

// Destroyed without Close (a failed run), a WAV leaves nothing behind and an existing
// file as it was.
TEST(PcmOutput, AFailedRunLeavesNothingBehind) {
  const fs::path dir = testing::ScratchPath("pcm_output_fail");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string wav = (dir / "out.wav").string();
  {
    auto out = PcmOutput::Open(wav, 24000, PcmFormat::kF32);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ASSERT_TRUE((*out)->Write(std::vector<float>(100, 0.5f)).ok());
  }  // destroyed without Close: the run failed
  EXPECT_EQ(EntriesIn(dir), 0u);
  // An existing file is left as it was.
  std::ofstream(wav) << "previous take";
  {
    auto out = PcmOutput::Open(wav, 24000, PcmFormat::kS16);
    ASSERT_TRUE(out.ok());
    ASSERT_TRUE((*out)->Write(std::vector<float>(100, 0.5f)).ok());
  }
  EXPECT_EQ(EntriesIn(dir), 1u);
  std::ifstream in(wav);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()),
            "previous take");
  // A folder where the file belongs, and a folder that does not exist, are clear errors.
  auto folder = PcmOutput::Open(dir.string(), 24000, PcmFormat::kS16);
  ASSERT_FALSE(folder.ok());
  EXPECT_NE(folder.status().message().find("is a folder"), std::string::npos) << folder.status().message();
  auto missing = PcmOutput::Open((dir / "no" / "such.wav").string(), 24000, PcmFormat::kS16);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("such.wav"), std::string::npos) << missing.status().message();
}

std::shared_ptr<const AudioModel> TinyModel() {
  static std::shared_ptr<const AudioModel> m = [] {
    auto r = AudioModel::Load(testing::DataPath("lfm25_tiny"));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r).value() : nullptr;
  }();
  return m;
}

// Writes `seconds` of a quiet 16 kHz tone as a WAV.
std::string WriteClip(const std::string& name, double seconds) {
  const std::string path = testing::ScratchPath(name);
  SF_INFO info{};
  info.samplerate = 16000;
  info.channels = 1;
  info.format = SF_FORMAT_WAV | SF_FORMAT_PCM_16;
  SNDFILE* f = sf_open(path.c_str(), SFM_WRITE, &info);
  EXPECT_NE(f, nullptr);
  std::vector<float> s(static_cast<size_t>(seconds * 16000));
  for (size_t i = 0; i < s.size(); ++i) s[i] = 0.1f * static_cast<float>((i % 37) / 37.0 - 0.5);
  sf_write_float(f, s.data(), static_cast<sf_count_t>(s.size()));
  sf_close(f);
  return path;
}

// The clip limit is applied from the header (or the sample count) before decoding,
// resampling and log-mel.
TEST(Conversation, ClipLimitComesBeforeDecoding) {
  auto model = TinyModel();
  ASSERT_NE(model, nullptr);
  auto conv = Conversation::Create(model, {.threads = 1});
  ASSERT_TRUE(conv.ok()) << conv.status().ToString();
  const std::string clip = WriteClip("clip_61s.wav", 61.0);
  const Status s = (*conv)->AddAudioFile(clip);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  // The header's frame count (976000 = 61 s), not "at least" (a decode that ran into the cap).
  EXPECT_NE(s.message().find("976000 frames (61.0 s at 16000 Hz"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("over the limit of 60 s"), std::string::npos) << s.message();
  // Samples handed over directly: refused before they are copied or resampled.
  const std::vector<float> samples(61 * 16000, 0.0f);
  const Status raw = (*conv)->AddAudio(samples, 16000, 1);
  ASSERT_FALSE(raw.ok());
  EXPECT_EQ(raw.code(), StatusCode::kOutOfRange);
  EXPECT_NE(raw.message().find("61.00 s long"), std::string::npos) << raw.message();
}

// Frames of the wrong length and values of the wrong type are errors naming the segment, the key and the
// frame; text that is not JSON says so.
TEST(Conversation, PromptFramesAndTypesAreChecked) {
  auto model = TinyModel();
  ASSERT_NE(model, nullptr);
  auto conv = Conversation::Create(model, {.threads = 1});
  ASSERT_TRUE(conv.ok()) << conv.status().ToString();
  struct Case {
    const char* prompt;
    const char* expect;
  };
  const Case cases[] = {
      {R"([{"audio_out": [[1, 2, 3, 4, 5, 6, 7], [1, 2, 3, 4, 5, 6, 7, 8, 9]]}])",
       "segment 0: \"audio_out\" frame 0 must be a list of exactly 8 codes"},
      {R"([{"ids": [1]}, {"audio_out": [[1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 3, 4, 5, 6, 7, 8, 9]]}])",
       "segment 1: \"audio_out\" frame 1 must be a list of exactly 8 codes"},
      {R"([{"ids": 5}])", "segment 0: \"ids\" must be a list"},
      {R"([{"ids": {"a": 1}}])", "segment 0: \"ids\" must be a list"},
      {R"([{"audio_out": {"frames": []}}])", "segment 0: \"audio_out\" must be a list"},
      {R"([{"audio_out": [{"a": 1}]}])", "segment 0: \"audio_out\" frame 0 must be a list"},
      {R"({"ids": [1]})", "must be a JSON list"},
      {R"({not json)", "is not valid JSON"},
  };
  for (const Case& c : cases) {
    const Status s = (*conv)->AddPromptJson(c.prompt);
    ASSERT_FALSE(s.ok()) << c.prompt;
    EXPECT_NE(s.message().find(c.expect), std::string::npos) << c.prompt << "\n" << s.message();
    (*conv)->Reset();
  }
}

}  // namespace
}  // namespace lfmvox
