#include "io/npy.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "io/test_util.h"

namespace lfmvox {
namespace {

std::string NpyImage(const std::string& dict, std::string_view data = {}) {
  std::string header = dict;
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header + std::string(data);
}

TEST(NpyTest, ReadsOracleTrace) {
  // detok__T3__codes.npy: [8, 3] <i8.
  Result<NpyArray> a =
      ReadNpy(std::string(LFMVOX_TEST_DATA_DIR) + "/lfm25_detok/traces/detok__T3__codes.npy");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->dtype, DType::kI64);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{8, 3}));
  EXPECT_EQ(a->elements(), 24);
}

TEST(NpyTest, RoundTripsF32) {
  testing::ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  NpyArray a;
  a.shape = {2, 2};
  const float v[4] = {1.5f, -2.0f, 0.0f, 3e38f};
  a.bytes.resize(16);
  std::memcpy(a.bytes.data(), v, 16);
  ASSERT_TRUE(WriteNpy(dir.File("a.npy"), a).ok());
  Result<NpyArray> b = ReadNpy(dir.File("a.npy"));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->shape, a.shape);
  EXPECT_EQ(b->ToFloat(), (std::vector<float>{1.5f, -2.0f, 0.0f, 3e38f}));
}

TEST(NpyTest, ShapeProductCannotWrap) {
  // 2^40 * 2^40 wraps a uint64 to 0, which once matched an empty data area and produced an array whose
  // elements() overflowed; a zero dim must not let the other dims grow unchecked either.
  for (const char* shape : {"(1099511627776, 1099511627776)", "(0, 1099511627776, 1099511627776)",
                            "(1099511627776, 1099511627776, 0)", "(65536, 65536, 65536, 65536)"}) {
    SCOPED_TRACE(shape);
    Result<NpyArray> a =
        ParseNpy(NpyImage(std::string("{'descr': '<f4', 'fortran_order': False, 'shape': ") + shape + ", }"));
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.status().code(), StatusCode::kOutOfRange) << a.status().ToString();
  }
  // A zero-sized array with large other dims is fine when their product is sane.
  Result<NpyArray> z = ParseNpy(NpyImage("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 1024), }"));
  ASSERT_TRUE(z.ok()) << z.status().ToString();
  EXPECT_EQ(z->elements(), 0);
}

TEST(NpyTest, MalformedHeaders) {
  EXPECT_FALSE(ParseNpy("").ok());
  EXPECT_FALSE(ParseNpy("\x93NUMPY").ok());
  EXPECT_FALSE(ParseNpy(NpyImage("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", "1234")).ok());
  EXPECT_FALSE(ParseNpy(NpyImage("{'descr': '<u2', 'fortran_order': False, 'shape': (2,), }", "1234")).ok());
  EXPECT_FALSE(ParseNpy(NpyImage("{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }", "1234")).ok());
  EXPECT_FALSE(ParseNpy(NpyImage("{'descr': '<f4', 'fortran_order': False, 'shape': (x,), }", "1234")).ok());
  EXPECT_FALSE(ParseNpy(NpyImage("{'descr': '<f4', 'fortran_order': False }", "1234")).ok());
}

// The fuzz seeds in fuzz/corpus/npy/ stay what their names say: valid_* parse, invalid_* do not.
TEST(NpyTest, FuzzSeedsAreWhatTheirNamesSay) {
  const std::filesystem::path dir = std::filesystem::path(LFMVOX_TEST_DATA_DIR) / "../../fuzz/corpus/npy";
  int seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    SCOPED_TRACE(name);
    const std::string bytes = testing::ReadBytes(entry.path().string());
    const bool ok = ParseNpy(bytes).ok();
    EXPECT_EQ(ok, name.starts_with("valid_"));
    ++seen;
  }
  EXPECT_GE(seen, 6);
}

}  // namespace
}  // namespace lfmvox
