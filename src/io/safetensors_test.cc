#include "io/safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <numbers>
#include <numeric>

#include "io/test_util.h"

namespace lfmvox {
namespace {

using testing::ReadBytes;
using testing::ScratchDir;
using testing::WriteBytes;

const std::string kDetokDir = std::string(LFMVOX_TEST_DATA_DIR) + "/lfm25_detok";

// A safetensors image from a header text and a data area, with the u64-LE length prefix.
std::string Image(std::string_view header, std::string_view data = {}) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<char>((static_cast<uint64_t>(header.size()) >> (8 * i)) & 0xff);
  out += header;
  out += data;
  return out;
}

std::string LengthPrefix(uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out;
}

// ---- the real oracle checkpoint -------------------------------------------------------------------------

TEST(CheckpointTest, OpensOracleDetokenizerCheckpoint) {
  // tests/data/lfm25_detok/model.safetensors, opened through its directory.
  Result<Checkpoint> ck = Checkpoint::Open(kDetokDir);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  EXPECT_EQ(ck->path(), kDetokDir);
  const std::vector<std::string> names = ck->Names();
  EXPECT_EQ(names.size(), 79u);
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_TRUE(ck->Has("lin.bias"));
  EXPECT_FALSE(ck->Has("__metadata__"));

  Result<TensorView> emb = ck->Get("emb.emb.weight", Shape{16384, 512});
  ASSERT_TRUE(emb.ok()) << emb.status().ToString();
  EXPECT_EQ(emb->dtype, DType::kBF16);
  EXPECT_EQ(emb->bytes(), 16384u * 512u * 2u);
  // The oracle README says rows 2048k+64 .. 2048k+2047 are zero and the first 64 rows of each codebook
  // are random, so a wrong offset would show here. Bit patterns checked against Python's struct reader.
  const uint16_t* e = emb->as<uint16_t>();
  EXPECT_EQ(e[0], 15936);
  EXPECT_EQ(e[3], 48977);
  EXPECT_EQ(e[(2048 * 3 + 63) * 512 + 0], 48684);
  for (int k = 0; k < 8; ++k) {
    for (int row : {64, 1000, 2047}) {
      const uint16_t* r = e + (static_cast<size_t>(2048 * k + row) * 512);
      EXPECT_TRUE(std::all_of(r, r + 512, [](uint16_t v) { return v == 0; }))
          << "codebook " << k << " row " << row;
    }
  }

  Result<TensorView> window = ck->Get("istft.window", Shape{1280});
  ASSERT_TRUE(window.ok()) << window.status().ToString();
  ASSERT_EQ(window->dtype, DType::kF32);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(window->data) % 4, 0u);
  // Periodic Hann computed in float32: the argument 2*pi*n/1280 is rounded to within half an ulp of 2*pi
  // (2.4e-7), which moves 0.5*cos by at most 1.2e-7, plus ~1 ulp for cos and the subtraction (<= 1.2e-7):
  // <= 2.4e-7 in all (measured 2.0e-7).
  double max_err = 0;
  for (int n = 0; n < 1280; ++n) {
    const double ref = 0.5 - 0.5 * std::cos(2.0 * std::numbers::pi * n / 1280.0);
    max_err = std::max(max_err, std::abs(window->as<float>()[n] - ref));
  }
  EXPECT_LE(max_err, 2.5e-7);

  Result<TensorView> conv = ck->Get("lfm.layers.0.conv.conv.weight", Shape{512, 1, 3});
  ASSERT_TRUE(conv.ok()) << conv.status().ToString();
  EXPECT_EQ(conv->shape.rank, 3);

  Result<TensorView> wrong = ck->Get("lfm.layers.0.conv.in_proj.weight", Shape{1536, 256});
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(wrong.status().message(),
            "tensor lfm.layers.0.conv.in_proj.weight has shape [1536, 512] but the config needs [1536, 256]");

  Result<TensorView> missing = ck->Get("lfm.layers.9.conv.in_proj.weight");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("lfm.layers.9.conv.in_proj.weight"), std::string::npos);
}

TEST(CheckpointTest, OpensOracleFileDirectlyWithMetadata) {
  Result<std::unique_ptr<SafetensorsFile>> f = SafetensorsFile::Open(kDetokDir + "/model.safetensors");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->metadata().at("oracle_seed"), "777");
  EXPECT_EQ((*f)->metadata().at("format"), "pt");
  Result<Checkpoint> ck = Checkpoint::Open(kDetokDir + "/model.safetensors");
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  EXPECT_EQ(ck->Names(), (*f)->Names());
}

// ---- writer round trip ----------------------------------------------------------------------------------

struct Fixture {
  std::vector<float> f32{1.5f, -2.0f, 3.25f, 0.0f, -0.0f, 1e-30f};  // [2, 3]
  std::vector<uint16_t> bf16{0x3f80, 0xbf80, 0x7f80, 0x0001};       // [4]
  std::vector<int64_t> i64{-1, 2, INT64_MAX, INT64_MIN};            // [2, 2, 1, 1]
  std::vector<uint8_t> boolean{1, 0, 1};                            // [3]
  std::vector<double> f64{3.0};                                     // [] (a scalar)
  std::vector<int8_t> i8{-128, 127};                                // [2]

  std::vector<TensorToWrite> Tensors() const {
    return {
        {"b.f32", DType::kF32, {2, 3}, f32.data(), f32.size() * 4},
        {"a.bf16", DType::kBF16, {4}, bf16.data(), bf16.size() * 2},
        {"c.i64", DType::kI64, {2, 2, 1, 1}, i64.data(), i64.size() * 8},
        {"d.empty", DType::kU8, {0, 5}, nullptr, 0},
        {"e.bool", DType::kBool, {3}, boolean.data(), boolean.size()},
        {"f.scalar", DType::kF64, {}, f64.data(), 8},
        {"g.i8", DType::kI8, {2}, i8.data(), 2},
    };
  }
};

void ExpectMatches(const SafetensorsFile& f, const std::vector<TensorToWrite>& tensors) {
  EXPECT_EQ(f.Names().size(), tensors.size());
  for (const TensorToWrite& t : tensors) {
    Result<TensorView> v = f.Get(t.name);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_EQ(v->dtype, t.dtype) << t.name;
    ASSERT_EQ(v->shape.rank, static_cast<int>(t.shape.size())) << t.name;
    for (size_t i = 0; i < t.shape.size(); ++i)
      EXPECT_EQ(v->shape[static_cast<int>(i)], t.shape[i]) << t.name;
    ASSERT_EQ(v->bytes(), t.size) << t.name;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v->data) % DTypeSize(t.dtype), 0u) << t.name;
    if (t.size > 0) {
      EXPECT_EQ(std::memcmp(v->data, t.data, t.size), 0) << t.name;
    }
  }
}

TEST(SafetensorsWriterTest, RoundTripsEveryDtypeRankAndMetadata) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  Fixture fx;
  const std::string path = dir.File("round.safetensors");
  const std::map<std::string, std::string> meta{{"format", "pt"}, {"note", "unicode \xc3\xa9"}};
  ASSERT_TRUE(WriteSafetensors(path, fx.Tensors(), meta).ok());

  const std::string bytes = ReadBytes(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ((8 + n) % 8, 0u) << "the data area must start 8-aligned";
  EXPECT_EQ(bytes[8 + n - 1] == ' ' || bytes[8 + n - 1] == '}', true);
  // Data area = the tensors back to back: 24 + 8 + 32 + 0 + 3 + 8 + 2 bytes.
  EXPECT_EQ(bytes.size(), 8 + n + 77);

  Result<std::unique_ptr<SafetensorsFile>> f = SafetensorsFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ExpectMatches(**f, fx.Tensors());
  EXPECT_EQ((*f)->metadata(), meta);

  Result<std::unique_ptr<SafetensorsFile>> m = SafetensorsFile::OpenFromMemory(bytes);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ExpectMatches(**m, fx.Tensors());

  // Views outlive a move of the Checkpoint that owns them.
  Result<Checkpoint> ck = Checkpoint::Open(path);
  ASSERT_TRUE(ck.ok());
  Checkpoint moved = std::move(ck).value();
  Result<TensorView> v = moved.Get("b.f32", Shape{2, 3});
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->as<float>()[2], 3.25f);
}

TEST(SafetensorsWriterTest, RejectsBadInput) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.File("bad.safetensors");
  float x[2] = {1, 2};
  EXPECT_EQ(WriteSafetensors(path, {{"a", DType::kF32, {3}, x, 8}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteSafetensors(path, {{"a", DType::kF32, {2}, x, 8}, {"a", DType::kF32, {2}, x, 8}}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteSafetensors(path, {{"__metadata__", DType::kF32, {2}, x, 8}}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteSafetensors(path, {{"", DType::kF32, {2}, x, 8}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteSafetensors(path, {{"a", DType::kF32, {-2}, x, 8}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteSafetensors(path, {{"bad\xff", DType::kF32, {2}, x, 8}}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteSafetensors(dir.File("no/such/dir.safetensors"), {{"a", DType::kF32, {2}, x, 8}}).code(),
            StatusCode::kNotFound);
}

// ---- alignment ------------------------------------------------------------------------------------------

TEST(SafetensorsFileTest, RealignsTensorsAfterAnUnpaddedHeader) {
  // A hand-made file whose header length (and so data area) is not a multiple of 4: the F32 view must
  // still be 4-aligned and hold the right values.
  const float vals[2] = {0.25f, -7.5f};
  std::string header = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  if ((8 + header.size()) % 4 == 0) header += " ";
  ASSERT_NE((8 + header.size()) % 4, 0u);
  const std::string img = Image(header, std::string_view(reinterpret_cast<const char*>(vals), 8));
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  ASSERT_TRUE(WriteBytes(dir.File("odd.safetensors"), img));
  for (const auto& f :
       {SafetensorsFile::Open(dir.File("odd.safetensors")), SafetensorsFile::OpenFromMemory(img)}) {
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    Result<TensorView> v = (*f)->Get("w");
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v->data) % 4, 0u);
    EXPECT_EQ(v->as<float>()[0], 0.25f);
    EXPECT_EQ(v->as<float>()[1], -7.5f);
  }
}

// ---- malformed files ------------------------------------------------------------------------------------

struct BadCase {
  const char* what;
  std::string bytes;
  StatusCode code;
  const char* message_part;  // the message must contain this
};

std::vector<BadCase> BadCases() {
  const std::string four(4, '\0'), eight(8, '\0'), twelve(12, '\0');
  auto entry = [](const std::string& body) { return "{\"t\":{" + body + "}}"; };
  return {
      {"empty file", "", StatusCode::kDataLoss, "0 bytes"},
      {"shorter than 8 bytes", "abc", StatusCode::kDataLoss, "3 bytes"},
      {"header length past the end", LengthPrefix(100) + "{}", StatusCode::kDataLoss, "runs past the end"},
      {"header length huge", LengthPrefix(~0ull) + "{}", StatusCode::kOutOfRange, "limit"},
      {"header length just over the cap", LengthPrefix(kMaxSafetensorsHeaderBytes + 1) + "{}",
       StatusCode::kOutOfRange, "limit"},
      {"invalid JSON", Image("{\"t\": {"), StatusCode::kDataLoss, "not valid JSON"},
      {"invalid UTF-8 in JSON", Image("{\"t\xff\": 1}"), StatusCode::kDataLoss, "not valid JSON"},
      {"JSON array", Image("[1, 2]"), StatusCode::kDataLoss, "not an object"},
      {"JSON null", Image("null"), StatusCode::kDataLoss, "not an object"},
      {"entry not an object", Image("{\"t\": 3}"), StatusCode::kDataLoss, "tensor t"},
      {"missing dtype", Image(entry(R"("shape":[1],"data_offsets":[0,4])"), four), StatusCode::kDataLoss,
       "tensor t: header entry lacks a string \"dtype\""},
      {"dtype not a string", Image(entry(R"("dtype":4,"shape":[1],"data_offsets":[0,4])"), four),
       StatusCode::kDataLoss, "dtype"},
      {"missing shape", Image(entry(R"("dtype":"F32","data_offsets":[0,4])"), four), StatusCode::kDataLoss,
       "tensor t: header entry lacks a \"shape\""},
      {"missing offsets", Image(entry(R"("dtype":"F32","shape":[1])"), four), StatusCode::kDataLoss,
       "tensor t: header entry lacks \"data_offsets\""},
      {"one offset", Image(entry(R"("dtype":"F32","shape":[1],"data_offsets":[4])"), four),
       StatusCode::kDataLoss, "data_offsets"},
      {"unknown dtype", Image(entry(R"("dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1])"), four),
       StatusCode::kUnimplemented, "tensor t has dtype \"F8_E4M3\""},
      // A NUL in the dtype (JSON \u0000) is shown, not an end to the message.
      {"NUL in dtype", Image(entry(R"("dtype":"F3\u00002 junk","shape":[1],"data_offsets":[0,4])"), four),
       StatusCode::kUnimplemented, "has dtype \"F3\\x002 junk\", which lfmvox does not read"},
      {"negative shape", Image(entry(R"("dtype":"F32","shape":[-1],"data_offsets":[0,4])"), four),
       StatusCode::kDataLoss, "non-negative integers"},
      {"fractional shape", Image(entry(R"("dtype":"F32","shape":[1.5],"data_offsets":[0,4])"), four),
       StatusCode::kDataLoss, "non-negative integers"},
      {"float-valued shape", Image(entry(R"("dtype":"F32","shape":[1.0],"data_offsets":[0,4])"), four),
       StatusCode::kDataLoss, "non-negative integers"},
      {"string shape", Image(entry(R"("dtype":"F32","shape":["1"],"data_offsets":[0,4])"), four),
       StatusCode::kDataLoss, "non-negative integers"},
      {"five dims", Image(entry(R"("dtype":"U8","shape":[1,1,1,1,1],"data_offsets":[0,1])"), four),
       StatusCode::kUnimplemented, "5 dimensions"},
      {"negative offset", Image(entry(R"("dtype":"F32","shape":[1],"data_offsets":[-4,0])"), four),
       StatusCode::kDataLoss, "data_offsets"},
      {"offsets reversed", Image(entry(R"("dtype":"F32","shape":[1],"data_offsets":[4,0])"), four),
       StatusCode::kDataLoss, "reversed"},
      {"offsets past the end", Image(entry(R"("dtype":"F32","shape":[2],"data_offsets":[0,8])"), four),
       StatusCode::kDataLoss, "past the data area"},
      {"offsets near 2^64",
       Image(entry(R"("dtype":"F32","shape":[1],"data_offsets":[18446744073709551612,)"
                   R"(18446744073709551615])"),
             four),
       StatusCode::kDataLoss, "past the data area"},
      {"size mismatch", Image(entry(R"("dtype":"F32","shape":[2],"data_offsets":[0,4])"), four),
       StatusCode::kDataLoss, "F32 [2] needs 8 bytes but data_offsets span 4"},
      {"overlapping spans",
       Image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
             R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
             twelve),
       StatusCode::kDataLoss, "tensors a [0, 8) and b [4, 12) overlap"},
      {"span inside another",
       Image(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},)"
             R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
             twelve),
       StatusCode::kDataLoss, "overlap"},
      {"same span twice",
       Image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
             R"("b":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}})",
             four),
       StatusCode::kDataLoss, "overlap"},
      {"shape product overflows int64",
       Image(entry(R"("dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0])")),
       StatusCode::kDataLoss, "more elements than fit in 64 bits"},
      {"shape product overflows int64 but not uint64",
       Image(entry(R"("dtype":"U8","shape":[4294967296,4294967295],"data_offsets":[0,0])")),
       StatusCode::kDataLoss, "more elements than fit in 64 bits"},
      {"byte count overflows",
       Image(entry(R"("dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,0])")),
       StatusCode::kDataLoss, "more bytes than fit in 64 bits"},
      {"huge dim with a zero",
       Image(entry(R"("dtype":"F32","shape":[0,9223372036854775808],"data_offsets":[0,0])")),
       StatusCode::kDataLoss, "non-negative integers"},
      {"metadata not an object", Image(R"({"__metadata__": [1]})"), StatusCode::kDataLoss, "__metadata__"},
      {"metadata value not a string", Image(R"({"__metadata__": {"k": 1}})"), StatusCode::kDataLoss, "\"k\""},
  };
}

TEST(SafetensorsFileTest, MalformedImagesGiveClearErrors) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  for (const BadCase& c : BadCases()) {
    SCOPED_TRACE(c.what);
    const std::string path = dir.File("bad.safetensors");
    ASSERT_TRUE(WriteBytes(path, c.bytes));
    // The mmap path and the in-memory path must agree (they share the parser).
    for (const auto& r : {SafetensorsFile::Open(path), SafetensorsFile::OpenFromMemory(c.bytes, path)}) {
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status().code(), c.code) << r.status().ToString();
      EXPECT_NE(r.status().message().find(c.message_part), std::string::npos) << r.status().message();
      EXPECT_EQ(r.status().message().rfind(path + ": ", 0), 0u) << "the message names the file";
    }
  }
}

TEST(SafetensorsFileTest, TruncatedDataArea) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  Fixture fx;
  const std::string path = dir.File("t.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, fx.Tensors()).ok());
  std::string bytes = ReadBytes(path);
  bytes.pop_back();  // the last tensor (g.i8) loses a byte
  ASSERT_TRUE(WriteBytes(path, bytes));
  Result<std::unique_ptr<SafetensorsFile>> f = SafetensorsFile::Open(path);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(f.status().message().find("tensor g.i8"), std::string::npos) << f.status().message();
  EXPECT_NE(f.status().message().find("truncated"), std::string::npos) << f.status().message();
}

TEST(SafetensorsFileTest, ValidEdgeCases) {
  // Empty header object, trailing padding, holes between tensors, zero-size tensors inside other spans.
  EXPECT_TRUE(SafetensorsFile::OpenFromMemory(Image("{}")).ok());
  EXPECT_TRUE(SafetensorsFile::OpenFromMemory(Image("{}       ")).ok());
  const std::string twelve(12, '\x01');
  Result<std::unique_ptr<SafetensorsFile>> f =
      SafetensorsFile::OpenFromMemory(Image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                            R"("z":{"dtype":"F32","shape":[0],"data_offsets":[2,2]},)"
                                            R"("b":{"dtype":"U8","shape":[2],"data_offsets":[8,10]}})",
                                            twelve));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->Names(), (std::vector<std::string>{"a", "b", "z"}));
  EXPECT_EQ((*f)->Get("z")->elements(), 0);
  // An empty tensor at an offset its dtype would find misaligned (once a memcpy from a null buffer).
  Result<std::unique_ptr<SafetensorsFile>> odd = SafetensorsFile::OpenFromMemory(
      Image(R"({"e":{"dtype":"F64","shape":[0],"data_offsets":[3,3]}})", twelve));
  ASSERT_TRUE(odd.ok()) << odd.status().ToString();
  EXPECT_EQ((*odd)->Get("e")->bytes(), 0u);
}

TEST(SafetensorsFileTest, OpenErrors) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  Result<std::unique_ptr<SafetensorsFile>> missing = SafetensorsFile::Open(dir.File("nope.safetensors"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope.safetensors"), std::string::npos);
  Result<std::unique_ptr<SafetensorsFile>> d = SafetensorsFile::Open(dir.path());
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);

  Result<Checkpoint> empty_dir = Checkpoint::Open(dir.path());
  ASSERT_FALSE(empty_dir.ok());
  EXPECT_EQ(empty_dir.status().code(), StatusCode::kNotFound);
  EXPECT_NE(empty_dir.status().message().find("model.safetensors.index.json"), std::string::npos);
  EXPECT_EQ(Checkpoint::Open(dir.File("nope")).status().code(), StatusCode::kNotFound);
}

// ---- sharded checkpoints --------------------------------------------------------------------------------

class ShardedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.ok());
    ASSERT_TRUE(
        WriteSafetensors(dir_.File("model-00001-of-00002.safetensors"),
                         {{"layer.0.w", DType::kF32, {2, 2}, a_, 16}, {"unlisted", DType::kF32, {1}, a_, 4}})
            .ok());
    ASSERT_TRUE(
        WriteSafetensors(dir_.File("model-00002-of-00002.safetensors"),
                         {{"layer.1.w", DType::kF32, {4}, b_, 16}, {"layer.1.b", DType::kF32, {1}, b_, 4}})
            .ok());
  }
  void WriteIndex(const std::string& weight_map) {
    ASSERT_TRUE(WriteBytes(dir_.File("model.safetensors.index.json"),
                           R"({"metadata": {"total_size": 36}, "weight_map": )" + weight_map + "}"));
  }

  ScratchDir dir_;
  float a_[4] = {1, 2, 3, 4};
  float b_[4] = {5, 6, 7, 8};
};

TEST_F(ShardedTest, OpensThroughDirectoryAndIndexPath) {
  WriteIndex(R"({"layer.0.w": "model-00001-of-00002.safetensors",
                 "layer.1.w": "model-00002-of-00002.safetensors",
                 "layer.1.b": "model-00002-of-00002.safetensors"})");
  for (const std::string& path : {dir_.path(), dir_.File("model.safetensors.index.json")}) {
    Result<Checkpoint> ck = Checkpoint::Open(path);
    ASSERT_TRUE(ck.ok()) << ck.status().ToString();
    EXPECT_EQ(ck->Names(), (std::vector<std::string>{"layer.0.w", "layer.1.b", "layer.1.w"}));
    EXPECT_FALSE(ck->Has("unlisted")) << "the weight map is authoritative";
    Result<TensorView> w0 = ck->Get("layer.0.w", Shape{2, 2});
    ASSERT_TRUE(w0.ok()) << w0.status().ToString();
    EXPECT_EQ(w0->as<float>()[3], 4.0f);
    Result<TensorView> w1 = ck->Get("layer.1.w", Shape{4});
    ASSERT_TRUE(w1.ok()) << w1.status().ToString();
    EXPECT_EQ(w1->as<float>()[0], 5.0f);
    EXPECT_EQ(ck->Get("layer.1.b")->as<float>()[0], 5.0f);
  }
}

TEST_F(ShardedTest, NameMappedToAShardThatLacksIt) {
  WriteIndex(R"({"layer.0.w": "model-00002-of-00002.safetensors"})");
  Result<Checkpoint> ck = Checkpoint::Open(dir_.path());
  ASSERT_FALSE(ck.ok());
  EXPECT_EQ(ck.status().code(), StatusCode::kNotFound);
  EXPECT_NE(
      ck.status().message().find("maps tensor layer.0.w to model-00002-of-00002.safetensors, which does "
                                 "not hold it"),
      std::string::npos)
      << ck.status().message();
}

TEST_F(ShardedTest, BadIndexes) {
  struct Case {
    std::string text;
    StatusCode code;
    const char* part;
  };
  const std::vector<Case> cases = {
      {R"({"layer.0.w": "missing.safetensors"})", StatusCode::kNotFound, "missing.safetensors"},
      {R"({"layer.0.w": "../model-00001-of-00002.safetensors"})", StatusCode::kDataLoss, "relative"},
      {R"({"layer.0.w": "/etc/passwd"})", StatusCode::kDataLoss, "relative"},
      {R"({"layer.0.w": 3})", StatusCode::kDataLoss, "shard file name"},
      {R"({})", StatusCode::kDataLoss, "empty"},
      {R"([])", StatusCode::kDataLoss, "weight_map"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    WriteIndex(c.text);
    Result<Checkpoint> ck = Checkpoint::Open(dir_.path());
    ASSERT_FALSE(ck.ok());
    EXPECT_EQ(ck.status().code(), c.code) << ck.status().ToString();
    EXPECT_NE(ck.status().message().find(c.part), std::string::npos) << ck.status().message();
  }
  ASSERT_TRUE(WriteBytes(dir_.File("model.safetensors.index.json"), "{not json"));
  EXPECT_EQ(Checkpoint::Open(dir_.path()).status().code(), StatusCode::kDataLoss);
}

// The fuzz seeds in fuzz/corpus/safetensors/ stay what their names say: valid_* parse, invalid_* do not.
TEST(SafetensorsFileTest, FuzzSeedsAreWhatTheirNamesSay) {
  const std::filesystem::path dir =
      std::filesystem::path(LFMVOX_TEST_DATA_DIR) / "../../fuzz/corpus/safetensors";
  int seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    SCOPED_TRACE(name);
    const std::string bytes = testing::ReadBytes(entry.path().string());
    const bool ok = SafetensorsFile::OpenFromMemory(bytes).ok();
    EXPECT_EQ(ok, name.starts_with("valid_"));
    ++seen;
  }
  EXPECT_GE(seen, 6);
}

}  // namespace
}  // namespace lfmvox
