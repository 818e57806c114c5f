// Hostile JSON and files where JSON is expected: base/json_parse.h and io/json_config.h's ReadJsonFile refuse
// deep nesting, value floods, oversized files, FIFOs and directories with a clear error, quickly and in
// bounded memory, and never throw.
#include "base/json_parse.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "io/json_config.h"
#include "trace_util.h"

namespace lfmvox {
namespace {

std::string Nested(size_t depth, char open, char close) {
  return std::string(depth, open) + std::string(depth, close);
}

TEST(ParseJson, AcceptsWhatIsWithinTheLimits) {
  auto j = ParseJson(R"({"a": [1, 2, {"b": null}], "c": "d"})", "t");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ((*j)["a"][1], 2);
  // Exactly at the depth limit: 64 arrays open at once.
  EXPECT_TRUE(ParseJson(Nested(64, '[', ']'), "t").ok());
}

TEST(ParseJson, DeepNestingIsRefusedBeforeADocumentIsBuilt) {
  // 100 000 levels (the ~200 KB files that overflowed the stack through recursive dumps).
  for (const auto& [open, close] : {std::pair{'[', ']'}, std::pair{'{', '}'}}) {
    std::string text = open == '[' ? Nested(100000, '[', ']') : "";
    if (open == '{') {
      for (int i = 0; i < 100000; ++i) text += "{\"a\":";
      text += "1" + std::string(100000, '}');
    }
    auto j = ParseJson(text, "deep.json");
    ASSERT_FALSE(j.ok());
    EXPECT_EQ(j.status().code(), StatusCode::kOutOfRange);
    EXPECT_NE(j.status().message().find("deep.json nests arrays/objects deeper than 64"), std::string::npos)
        << j.status().message();
  }
  EXPECT_FALSE(ParseJson(Nested(65, '[', ']'), "t").ok());
}

TEST(ParseJson, AValueFloodIsRefused) {
  std::string text = "[";
  for (int i = 0; i < 1001; ++i) text += i ? ",{}" : "{}";
  text += "]";
  auto j = ParseJson(text, "flood.json", {.max_depth = 8, .max_values = 1000});
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(j.status().message().find("more than 1000 JSON values"), std::string::npos);
  // 1000 values exactly (the list and 999 objects) pass.
  text = "[";
  for (int i = 0; i < 999; ++i) text += i ? ",{}" : "{}";
  EXPECT_TRUE(ParseJson(text + "]", "t", {.max_depth = 8, .max_values = 1000}).ok());
}

TEST(ParseJson, SyntaxErrorsNameTheTextAndTheOffset) {
  for (const char* bad : {"", "{", "{\"a\": }", "[1, 2", "nul", "{\"a\": 1} x", "\"\xff\""}) {
    auto j = ParseJson(bad, "the prompt");
    ASSERT_FALSE(j.ok()) << bad;
    EXPECT_EQ(j.status().code(), StatusCode::kDataLoss) << bad;
    EXPECT_EQ(j.status().message().rfind("the prompt is not valid JSON: ", 0), 0u) << j.status().message();
  }
  auto j = ParseJson("{\"a\": }", "x");
  EXPECT_NE(j.status().message().find("at line 1, column 7"), std::string::npos) << j.status().message();
}

class ReadJsonFileTest : public ::testing::Test {
 protected:
  void SetUp() override { std::filesystem::create_directories(dir_); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  const std::string dir_ = testing::ScratchPath("read_json_file");
};

TEST_F(ReadJsonFileTest, AFifoIsRefusedWithoutBlocking) {
  const std::string fifo = dir_ + "/config.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto j = ReadJsonFile(fifo);  // before: open() waited forever for a writer
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(j.status().message().find("is not a regular file"), std::string::npos) << j.status().message();
}

TEST_F(ReadJsonFileTest, ADirectoryIsRefused) {
  // Before: std::ifstream threw std::ios_base::failure reading a directory.
  const std::string sub = dir_ + "/config.json";
  std::filesystem::create_directories(sub);
  auto j = ReadJsonFile(sub);
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("is not a regular file"), std::string::npos) << j.status().message();
}

TEST_F(ReadJsonFileTest, AnOversizedFileIsRefusedBeforeItIsRead) {
  const std::string path = dir_ + "/config.json";
  {
    std::ofstream f(path);
    f << "{\"a\": \"";
  }
  // A sparse file one byte over the cap: refused by its size, nothing read.
  std::filesystem::resize_file(path, kMaxConfigBytes + 1);
  auto j = ReadJsonFile(path);
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(j.status().message().find(std::to_string(kMaxConfigBytes + 1) + " bytes"), std::string::npos)
      << j.status().message();
}

TEST_F(ReadJsonFileTest, DeepNestingAndNonObjectsAreClearErrors) {
  const std::string path = dir_ + "/config.json";
  std::ofstream(path) << "{\"full_attn_idxs\": " << Nested(100000, '[', ']') << "}";
  auto j = ReadJsonFile(path);
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find(path + " nests arrays/objects deeper than 32"), std::string::npos)
      << j.status().message();
  std::ofstream(path, std::ios::trunc) << "[1, 2]";
  j = ReadJsonFile(path);
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("must hold a JSON object"), std::string::npos);
}

}  // namespace
}  // namespace lfmvox
