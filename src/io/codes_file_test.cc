#include "io/codes_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "io/npy.h"
#include "io/test_util.h"

namespace lfmvox {
namespace {

using testing::ScratchDir;
using testing::WriteBytes;

const std::string kTraceDir = std::string(LFMVOX_TEST_DATA_DIR) + "/lfm25_detok/traces";

void ExpectError(std::string_view text, int k, StatusCode code, const std::string& part) {
  Result<CodeFrames> r = ParseCodesText(text, k);
  ASSERT_FALSE(r.ok()) << "accepted: " << text;
  EXPECT_EQ(r.status().code(), code) << r.status().ToString();
  EXPECT_NE(r.status().message().find(part), std::string::npos) << r.status().message();
}

TEST(ParseCodesTextTest, FramesWhitespaceCommasCommentsBlankLines) {
  const std::string text =
      "# codes for a test\n"
      "1 2 3\n"
      "\n"
      "  4,5 , 6   # trailing comment\r\n"
      "\t7\t8\t2147483647\n"
      "   # indented comment\n"
      "0 0 0";  // no final newline
  Result<CodeFrames> r = ParseCodesText(text, 3);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->num_codebooks, 3);
  EXPECT_EQ(r->frames(), 4u);
  EXPECT_EQ(r->codes, (std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8, 2147483647, 0, 0, 0}));
}

TEST(ParseCodesTextTest, WrongCountNamesTheLine) {
  ExpectError("1 2 3\n\n4 5\n", 3, StatusCode::kInvalidArgument, "line 3 has 2 codes; expected 3");
  ExpectError("1 2 3 4\n", 3, StatusCode::kInvalidArgument, "line 1 has 4 codes; expected 3");
}

TEST(ParseCodesTextTest, RejectsNonIntegersNegativesAndOverflow) {
  ExpectError("1 2 x\n", 3, StatusCode::kInvalidArgument, "line 1: 'x' is not a non-negative integer");
  ExpectError("1 2 3\n1 2 3.5\n", 3, StatusCode::kInvalidArgument, "line 2: '3.5' is not");
  ExpectError("1 2 0x10\n", 3, StatusCode::kInvalidArgument, "'0x10'");
  ExpectError("1 2 +3\n", 3, StatusCode::kInvalidArgument, "'+3'");
  ExpectError("1 -2 3\n", 3, StatusCode::kOutOfRange, "line 1: code -2 is negative");
  ExpectError("1 - 3\n", 3, StatusCode::kInvalidArgument, "'-'");
  ExpectError("1 2 2147483648\n", 3, StatusCode::kOutOfRange, "code 2147483648 is larger than 2147483647");
  ExpectError("1 2 99999999999999999999999\n", 3, StatusCode::kOutOfRange, "larger than 2147483647");
  ExpectError("1,,2\n", 2, StatusCode::kInvalidArgument, "line 1: empty field");
  ExpectError(",1,2\n", 2, StatusCode::kInvalidArgument, "empty field");
  ExpectError("1,2,\n", 2, StatusCode::kInvalidArgument, "line 1 ends with ','");
  ExpectError(std::string_view("1 2\0 3\n", 7), 3, StatusCode::kInvalidArgument, "line 1: '2?' is not");
}

TEST(ParseCodesTextTest, RejectsEmptyInputAndBadCodebookCounts) {
  ExpectError("", 8, StatusCode::kInvalidArgument, "no code frames");
  ExpectError("# nothing\n\n   \n", 8, StatusCode::kInvalidArgument, "no code frames");
  ExpectError("1\n", 0, StatusCode::kInvalidArgument, "num_codebooks is 0");
  ExpectError("1\n", 65, StatusCode::kInvalidArgument, "num_codebooks is 65");
}

TEST(ParseCodesTextTest, CapsTheFrameCount) {
  std::string text;
  text.reserve(2 * (kMaxCodeFrames + 1));
  for (size_t i = 0; i < kMaxCodeFrames; ++i) text += "7\n";
  Result<CodeFrames> at_cap = ParseCodesText(text, 1);
  ASSERT_TRUE(at_cap.ok()) << at_cap.status().ToString();
  EXPECT_EQ(at_cap->frames(), kMaxCodeFrames);
  text += "7\n";
  ExpectError(text, 1, StatusCode::kOutOfRange, "more than 16777216 code frames");
}

TEST(ReadCodesFileTest, OracleNpyIsTransposedToFrameMajor) {
  // detok__T3__codes.npy and detok__T45__codes.npy: [8, T] int64, codebook-major.
  for (const char* name : {"detok__T3__codes.npy", "detok__T45__codes.npy"}) {
    SCOPED_TRACE(name);
    const std::string path = kTraceDir + "/" + name;
    Result<NpyArray> raw = ReadNpy(path);
    ASSERT_TRUE(raw.ok()) << raw.status().ToString();
    ASSERT_EQ(raw->shape.size(), 2u);
    const size_t t = static_cast<size_t>(raw->shape[1]);
    const std::vector<int64_t> want = raw->ToInt64();  // [8, T]
    Result<CodeFrames> r = ReadCodesFile(path, 8);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->frames(), t);
    for (size_t f = 0; f < t; ++f) {
      for (size_t k = 0; k < 8; ++k) EXPECT_EQ(r->codes[f * 8 + k], want[k * t + f]) << f << "," << k;
    }
  }
}

NpyArray I64Array(std::vector<int64_t> shape, const std::vector<int64_t>& values) {
  NpyArray a;
  a.dtype = DType::kI64;
  a.shape = std::move(shape);
  a.bytes.resize(values.size() * 8);
  if (!values.empty()) std::memcpy(a.bytes.data(), values.data(), a.bytes.size());
  return a;
}

TEST(ReadCodesFileTest, NpyShapesDtypesAndValues) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.File("codes.bin");  // recognised by magic, not by name
  ASSERT_TRUE(WriteNpy(path, I64Array({1, 2, 3}, {1, 2, 3, 10, 20, 30})).ok());
  Result<CodeFrames> r = ReadCodesFile(path, 2);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->codes, (std::vector<int32_t>{1, 10, 2, 20, 3, 30}));

  auto expect_error = [&](const NpyArray& a, int k, const std::string& part) {
    ASSERT_TRUE(WriteNpy(path, a).ok());
    Result<CodeFrames> bad = ReadCodesFile(path, k);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.status().message().find(part), std::string::npos) << bad.status().message();
    EXPECT_EQ(bad.status().message().rfind(path, 0), 0u) << "names the file";
  };
  expect_error(I64Array({3, 2}, {1, 2, 3, 4, 5, 6}), 2, "have shape [3, 2]; expected [2, T]");
  expect_error(I64Array({6}, {1, 2, 3, 4, 5, 6}), 2, "have shape [6]");
  expect_error(I64Array({2, 1, 3}, {1, 2, 3, 4, 5, 6}), 1, "have shape [2, 1, 3]");
  expect_error(I64Array({2, 0}, {}), 2, "no code frames");
  expect_error(I64Array({2, 1}, {5, -1}), 2, "code -1 (codebook 1, frame 0) is outside");
  expect_error(I64Array({1, 1}, {int64_t{1} << 31}), 1, "code 2147483648");
  NpyArray f32;
  f32.shape = {2, 1};
  f32.bytes.resize(8);
  expect_error(f32, 2, "must be integers");
  // A corrupt .npy is reported as such, not parsed as text.
  ASSERT_TRUE(WriteBytes(path, std::string("\x93NUMPY\x01\x00", 8) + "xx"));
  EXPECT_FALSE(ReadCodesFile(path, 2).ok());
}

TEST(ReadCodesFileTest, TextFileAndMissingFile) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.File("codes.txt");
  ASSERT_TRUE(WriteBytes(path, "1 2\n3 4\n5 x\n"));
  Result<CodeFrames> bad = ReadCodesFile(path, 2);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), path + ": line 3: 'x' is not a non-negative integer");
  ASSERT_TRUE(WriteBytes(path, "1 2\n3 4\n"));
  Result<CodeFrames> r = ReadCodesFile(path, 2);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->codes, (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(ReadCodesFile(dir.File("none.txt"), 2).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ReadCodesFile(dir.path(), 2).status().code(), StatusCode::kInvalidArgument);
}

// A text file is parsed as it is read, 1 MiB at a time: lines cut by a read boundary (with comments and
// CRLF ends) give the codes ParseCodesText gives on the whole text, and a line past 1 MiB is refused
// before the rest of the file is read.
TEST(ReadCodesFileTest, TextIsParsedAcrossReadBoundaries) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  std::string text;
  for (int i = 0; text.size() < (3u << 20); ++i) {
    text += std::to_string(i % 2049) + ", " + std::to_string(i % 7) + " " + std::to_string(i) +
            (i % 3 ? "\r\n" : "  # frame\n");
  }
  const std::string path = dir.File("long.txt");
  ASSERT_TRUE(WriteBytes(path, text));
  Result<CodeFrames> whole = ParseCodesText(text, 3);
  Result<CodeFrames> read = ReadCodesFile(path, 3);
  ASSERT_TRUE(whole.ok() && read.ok()) << read.status().ToString();
  EXPECT_GT(read->frames(), 150000u);
  EXPECT_EQ(read->codes, whole->codes);

  ASSERT_TRUE(WriteBytes(path, "1 2 3\n" + std::string((1u << 20) + 1, ' ') + "4 5 6\n"));
  Result<CodeFrames> bad = ReadCodesFile(path, 3);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 2 is longer than 1048576 bytes"), std::string::npos)
      << bad.status().message();
}

// The fuzz seeds in fuzz/corpus/codes/ stay what their names say: valid_* parse, invalid_* do not.
TEST(ParseCodesTextTest, FuzzSeedsAreWhatTheirNamesSay) {
  const std::filesystem::path dir = std::filesystem::path(LFMVOX_TEST_DATA_DIR) / "../../fuzz/corpus/codes";
  int seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    SCOPED_TRACE(name);
    const std::string bytes = testing::ReadBytes(entry.path().string());
    const bool ok = !bytes.empty() && ParseCodesText(std::string_view(bytes).substr(1), bytes[0]).ok();
    EXPECT_EQ(ok, name.starts_with("valid_"));
    ++seen;
  }
  EXPECT_GE(seen, 6);
}

}  // namespace
}  // namespace lfmvox
