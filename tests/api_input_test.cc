// Hostile and careless input through the public API (issue 10), on tests/data/lfm25_tiny; each test
// names the class of the issue it covers.
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

// Issue 10, class 9: a WAV is all or nothing. It grows in a temporary file in the same folder and appears
// under its name only on a successful Close.
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

// Issue 10, class 9: destroyed without Close (a failed run), a WAV leaves nothing behind and an existing
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
  EXPECT_EQ(missing.status().code(), StatusCode::kIo);
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

// Issue 10, class 7 (and class 11's prompt message): frames of the wrong length and values of the wrong
// type are errors naming the segment, the key and the frame; text that is not JSON says so.
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
