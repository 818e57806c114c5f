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
