#include "io/gguf.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>

#include "io/gguf_writer.h"
#include "io/test_util.h"

namespace lfmvox {
namespace {

using testing::ReadBytes;
using testing::ScratchDir;
using testing::WriteBytes;

#define ASSERT_OK(expr)                    \
  do {                                     \
    const ::lfmvox::Status s_ = (expr);    \
    ASSERT_TRUE(s_.ok()) << s_.ToString(); \
  } while (0)

// A second, deliberately naive GGUF encoder for building (corrupt) images field by field. It shares no code
// with GgufWriter, so a layout mistake in one shows up against the other.
class Img {
 public:
  Img& U8(uint8_t v) { return Le(v, 1); }
  Img& U32(uint32_t v) { return Le(v, 4); }
  Img& U64(uint64_t v) { return Le(v, 8); }
  Img& Str(std::string_view s) {
    U64(s.size());
    b.append(s);
    return *this;
  }
  Img& Raw(std::string_view s) {
    b.append(s);
    return *this;
  }
  Img& PadTo(size_t a) {
    while (b.size() % a != 0) b.push_back('\0');
    return *this;
  }
  Img& Le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) b.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    return *this;
  }
  // A tensor info: name, dims, type, offset.
  Img& Info(std::string_view name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
    Str(name).U32(static_cast<uint32_t>(ne.size()));
    for (uint64_t d : ne) U64(d);
    return U32(type).U64(offset);
  }
  std::string b;
};

Img Header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
  Img i;
  i.Raw("GGUF").U32(version).U64(n_tensors).U64(n_kv);
  return i;
}

std::string Pattern(size_t n, int seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 7 + seed * 13 + 1) & 0xff);
  return s;
}

Status ParseStatus(std::string_view bytes) {
  Result<GgufHeader> h = ParseGguf(bytes);
  return h.ok() ? Status::Ok() : h.status();
}

void ExpectError(std::string_view bytes, StatusCode code, std::string_view part) {
  const Status s = ParseStatus(bytes);
  ASSERT_FALSE(s.ok()) << "parsed, but should fail with: " << part;
  EXPECT_EQ(s.code(), code) << s.ToString();
  EXPECT_NE(s.message().find(part), std::string::npos) << s.message();
}

// ---- type tables ------------------------------------------------------------------------------------------

TEST(GgmlTypeTest, BlockSizesAsGgml) {
  struct Row {
    GgmlType t;
    const char* name;
    size_t elems, bytes;
  };
  const Row rows[] = {
      {GgmlType::F32, "F32", 1, 4},       {GgmlType::F16, "F16", 1, 2},
      {GgmlType::Q4_0, "Q4_0", 32, 18},   {GgmlType::Q4_1, "Q4_1", 32, 20},
      {GgmlType::Q5_0, "Q5_0", 32, 22},   {GgmlType::Q5_1, "Q5_1", 32, 24},
      {GgmlType::Q8_0, "Q8_0", 32, 34},   {GgmlType::Q8_1, "Q8_1", 32, 36},
      {GgmlType::Q2_K, "Q2_K", 256, 84},  {GgmlType::Q3_K, "Q3_K", 256, 110},
      {GgmlType::Q4_K, "Q4_K", 256, 144}, {GgmlType::Q5_K, "Q5_K", 256, 176},
      {GgmlType::Q6_K, "Q6_K", 256, 210}, {GgmlType::Q8_K, "Q8_K", 256, 292},
      {GgmlType::I8, "I8", 1, 1},         {GgmlType::I16, "I16", 1, 2},
      {GgmlType::I32, "I32", 1, 4},       {GgmlType::I64, "I64", 1, 8},
      {GgmlType::F64, "F64", 1, 8},       {GgmlType::BF16, "BF16", 1, 2},
  };
  for (const Row& r : rows) {
    const uint32_t id = static_cast<uint32_t>(r.t);
    size_t e = 0, b = 0;
    ASSERT_TRUE(GgmlTypeBlock(id, &e, &b)) << r.name;
    EXPECT_EQ(e, r.elems) << r.name;
    EXPECT_EQ(b, r.bytes) << r.name;
    EXPECT_STREQ(GgmlTypeName(id), r.name);
  }
  EXPECT_EQ(static_cast<uint32_t>(GgmlType::Q8_0), 8u);
  EXPECT_EQ(static_cast<uint32_t>(GgmlType::BF16), 30u);
  size_t e = 99, b = 99;
  for (uint32_t unknown : {4u, 5u, 16u, 23u, 29u, 31u, 1000u}) {
    EXPECT_FALSE(GgmlTypeBlock(unknown, &e, &b)) << unknown;
    EXPECT_STREQ(GgmlTypeName(unknown), "unknown");
  }
  EXPECT_EQ(e, 99u);
  EXPECT_STREQ(GgufValueTypeName(9), "array");
  EXPECT_STREQ(GgufValueTypeName(13), "unknown");
}

// ---- a hand-built image -----------------------------------------------------------------------------------

// Version 3, three KVs, one 2x3 F32 tensor; every byte written out here, independent of both encoders.
const std::string& HandImage() {
  static const std::string img = [] {
    std::string s;
    auto add = [&s](std::initializer_list<int> bytes) {
      for (int c : bytes) s.push_back(static_cast<char>(c));
    };
    add({'G', 'G', 'U', 'F'});                              // magic
    add({3, 0, 0, 0});                                      // version 3
    add({1, 0, 0, 0, 0, 0, 0, 0});                          // 1 tensor
    add({3, 0, 0, 0, 0, 0, 0, 0});                          // 3 KVs
    add({3, 0, 0, 0, 0, 0, 0, 0, 'a', '.', 'b'});           // key "a.b"
    add({4, 0, 0, 0});                                      //   u32
    add({0x04, 0x03, 0x02, 0x01});                          //   0x01020304
    add({1, 0, 0, 0, 0, 0, 0, 0, 's'});                     // key "s"
    add({8, 0, 0, 0});                                      //   string
    add({2, 0, 0, 0, 0, 0, 0, 0, 'h', 'i'});                //   "hi"
    add({3, 0, 0, 0, 0, 0, 0, 0, 'a', 'r', 'r'});           // key "arr"
    add({9, 0, 0, 0});                                      //   array
    add({5, 0, 0, 0});                                      //   of i32
    add({2, 0, 0, 0, 0, 0, 0, 0});                          //   2 elements
    add({0xff, 0xff, 0xff, 0xff, 7, 0, 0, 0});              //   -1, 7
    add({1, 0, 0, 0, 0, 0, 0, 0, 't'});                     // tensor "t"
    add({2, 0, 0, 0});                                      //   2 dims
    add({2, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0});  // ne = {2, 3}
    add({0, 0, 0, 0});                                      //   F32
    add({0, 0, 0, 0, 0, 0, 0, 0});                          //   offset 0
    // 142 bytes so far; zero padding to 160, the next multiple of 32.
    s.append(160 - s.size(), '\0');
    for (int i = 0; i < 6; ++i) {  // 1.0f, 2.0f, ... 6.0f
      float f = static_cast<float>(i + 1);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      add({static_cast<int>(u & 0xff), static_cast<int>((u >> 8) & 0xff), static_cast<int>((u >> 16) & 0xff),
           static_cast<int>(u >> 24)});
    }
    return s;
  }();
  return img;
}

TEST(GgufParseTest, HandBuiltImage) {
  const std::string& img = HandImage();
  ASSERT_EQ(img.size(), 184u);
  Result<std::unique_ptr<GgufFile>> f = GgufFile::OpenFromMemory(img, "hand.gguf");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const GgufFile& g = **f;
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(g.alignment(), 32u);
  EXPECT_EQ(g.data_offset(), 160u);
  EXPECT_EQ(g.path(), "hand.gguf");
  const GgufMetadata& md = g.metadata();
  EXPECT_EQ(md.keys(), (std::vector<std::string>{"a.b", "s", "arr"}));
  EXPECT_EQ(md.GetU32("a.b").value(), 0x01020304u);
  EXPECT_EQ(md.GetString("s").value(), "hi");
  EXPECT_EQ(md.GetIntArray("arr").value(), (std::vector<int64_t>{-1, 7}));
  EXPECT_EQ(md.Find("arr")->element_type(), GgufValueType::kI32);
  ASSERT_EQ(g.tensors().size(), 1u);
  const GgufTensor& t = g.tensors()[0];
  EXPECT_EQ(t.name, "t");
  EXPECT_EQ(t.n_dims, 2);
  EXPECT_EQ(t.ne, (std::array<uint64_t, 4>{2, 3, 1, 1}));
  EXPECT_EQ(t.type, static_cast<uint32_t>(GgmlType::F32));
  EXPECT_EQ(t.offset, 0u);
  EXPECT_EQ(t.bytes, 24u);
  EXPECT_EQ(t.elements, 6u);
  float v[6];
  std::memcpy(v, t.data, sizeof(v));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(v[i], i + 1.0f);
  EXPECT_EQ(g.FindTensor("t"), &t);
  EXPECT_EQ(g.FindTensor("u"), nullptr);
  Result<const GgufTensor*> missing = g.GetTensor("u");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("hand.gguf"), std::string::npos);

  // Version 2 has the same layout.
  std::string v2 = img;
  v2[4] = 2;
  Result<GgufHeader> h2 = ParseGguf(v2);
  ASSERT_TRUE(h2.ok()) << h2.status().ToString();
  EXPECT_EQ(h2->version, 2u);
}

TEST(GgufParseTest, ImageFromTheTestEncoderMatchesTheHandImage) {
  Img i = Header(1, 3);
  i.Str("a.b").U32(4).U32(0x01020304);
  i.Str("s").U32(8).Str("hi");
  i.Str("arr").U32(9).U32(5).U64(2).U32(0xffffffff).U32(7);
  i.Info("t", {2, 3}, 0, 0).PadTo(32);
  for (int k = 1; k <= 6; ++k) {
    const float f = static_cast<float>(k);
    i.Raw(std::string_view(reinterpret_cast<const char*>(&f), 4));
  }
  EXPECT_EQ(i.b, HandImage());
}

// ---- writer -> reader round trip --------------------------------------------------------------------------

struct RoundTripTensor {
  std::string name;
  GgmlType type;
  std::vector<uint64_t> ne;
  std::string data;
};

std::vector<RoundTripTensor> SampleTensors() {
  std::vector<RoundTripTensor> t = {
      {"w.f32", GgmlType::F32, {3, 2}, ""},
      {"w.f16", GgmlType::F16, {5}, ""},
      {"blk.0.q4_0", GgmlType::Q4_0, {64, 2}, ""},
      {"blk.0.q8_0", GgmlType::Q8_0, {32, 1, 1, 3}, ""},
      {"blk.0.q6_k", GgmlType::Q6_K, {256}, ""},
      {"bf16.4d", GgmlType::BF16, {1, 1, 1, 1}, ""},
      {"i8", GgmlType::I8, {33}, ""},
  };
  int seed = 0;
  for (RoundTripTensor& x : t) {
    size_t be = 0, bb = 0;
    GgmlTypeBlock(static_cast<uint32_t>(x.type), &be, &bb);
    uint64_t bytes = x.ne[0] / be * bb;
    for (size_t d = 1; d < x.ne.size(); ++d) bytes *= x.ne[d];
    x.data = Pattern(bytes, ++seed);
  }
  return t;
}

Status AddAllValueTypes(GgufWriter& w) {
  LFM_RETURN_IF_ERROR(w.AddU8("v.u8", 200));
  LFM_RETURN_IF_ERROR(w.AddI8("v.i8", -100));
  LFM_RETURN_IF_ERROR(w.AddU16("v.u16", 60000));
  LFM_RETURN_IF_ERROR(w.AddI16("v.i16", -30000));
  LFM_RETURN_IF_ERROR(w.AddU32("v.u32", 4000000000u));
  LFM_RETURN_IF_ERROR(w.AddI32("v.i32", -2000000000));
  LFM_RETURN_IF_ERROR(w.AddF32("v.f32", 1e-5f));
  LFM_RETURN_IF_ERROR(w.AddBool("v.bool", true));
  LFM_RETURN_IF_ERROR(w.AddString("v.string", std::string("lfm2\0x", 6)));
  LFM_RETURN_IF_ERROR(w.AddU64("v.u64", 0xfedcba9876543210ull));
  LFM_RETURN_IF_ERROR(w.AddI64("v.i64", std::numeric_limits<int64_t>::min()));
  LFM_RETURN_IF_ERROR(w.AddF64("v.f64", 0.1));
  LFM_RETURN_IF_ERROR(w.AddArrayI32("a.i32", {0, 0, 8, -1}));
  LFM_RETURN_IF_ERROR(w.AddArrayU32("a.u32", {1, 4294967295u}));
  LFM_RETURN_IF_ERROR(w.AddArrayI64("a.i64", {-5, 1ll << 40}));
  LFM_RETURN_IF_ERROR(w.AddArrayF32("a.f32", {0.5f, -2.0f, 3.25f}));
  LFM_RETURN_IF_ERROR(w.AddArrayString("a.string", {"<|pad|>", "", "Ċ Ċ"}));
  LFM_RETURN_IF_ERROR(w.AddArrayI32("a.empty", {}));
  LFM_RETURN_IF_ERROR(w.AddArrayRaw("a.u8", GgufValueType::kU8, "\x01\xff", 2));
  LFM_RETURN_IF_ERROR(
      w.AddArrayRaw("a.i16", GgufValueType::kI16, std::string_view("\xff\xff\x02\x00", 4), 2));
  LFM_RETURN_IF_ERROR(w.AddArrayRaw("a.bool", GgufValueType::kBool, std::string_view("\x01\x00\x01", 3), 3));
  const double f64s[2] = {1.5, -0.25};
  LFM_RETURN_IF_ERROR(w.AddArrayRaw("a.f64", GgufValueType::kF64,
                                    std::string_view(reinterpret_cast<const char*>(f64s), 16), 2));
  const uint64_t big = 1ull << 63;
  LFM_RETURN_IF_ERROR(w.AddArrayRaw("a.u64big", GgufValueType::kU64,
                                    std::string_view(reinterpret_cast<const char*>(&big), 8), 1));
  return Status::Ok();
}

void CheckAllValueTypes(const GgufMetadata& md) {
  EXPECT_EQ(md.GetU32("v.u8").value(), 200u);
  EXPECT_EQ(md.Find("v.u8")->type(), GgufValueType::kU8);
  EXPECT_EQ(md.GetI32("v.i8").value(), -100);
  EXPECT_EQ(md.GetU32("v.u16").value(), 60000u);
  EXPECT_EQ(md.GetI32("v.i16").value(), -30000);
  EXPECT_EQ(md.GetU32("v.u32").value(), 4000000000u);
  EXPECT_EQ(md.GetI64("v.u32").value(), 4000000000ll);
  EXPECT_EQ(md.GetI32("v.i32").value(), -2000000000);
  EXPECT_EQ(md.GetF32("v.f32").value(), 1e-5f);
  EXPECT_EQ(md.GetBool("v.bool").value(), true);
  EXPECT_EQ(md.GetString("v.string").value(), std::string("lfm2\0x", 6));
  EXPECT_EQ(md.GetU64("v.u64").value(), 0xfedcba9876543210ull);
  EXPECT_EQ(md.GetI64("v.i64").value(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(md.GetF32("v.f64").value(), 0.1f);
  double d = 0;
  ASSERT_TRUE(md.Find("v.f64")->ToDouble(&d));
  EXPECT_EQ(d, 0.1);
  EXPECT_EQ(md.GetIntArray("a.i32").value(), (std::vector<int64_t>{0, 0, 8, -1}));
  EXPECT_EQ(md.GetIntArray("a.u32").value(), (std::vector<int64_t>{1, 4294967295ll}));
  EXPECT_EQ(md.GetIntArray("a.i64").value(), (std::vector<int64_t>{-5, 1ll << 40}));
  EXPECT_EQ(md.GetF32Array("a.f32").value(), (std::vector<float>{0.5f, -2.0f, 3.25f}));
  EXPECT_EQ(md.GetStringArray("a.string").value(), (std::vector<std::string>{"<|pad|>", "", "Ċ Ċ"}));
  EXPECT_TRUE(md.GetIntArray("a.empty").value().empty());
  EXPECT_EQ(md.Find("a.empty")->element_type(), GgufValueType::kI32);
  EXPECT_EQ(md.GetIntArray("a.u8").value(), (std::vector<int64_t>{1, 255}));
  EXPECT_EQ(md.GetIntArray("a.i16").value(), (std::vector<int64_t>{-1, 2}));
  const GgufValue* b = md.Find("a.bool");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->element_type(), GgufValueType::kBool);
  EXPECT_EQ(b->size(), 3u);
  EXPECT_EQ(std::vector<uint8_t>(b->packed().begin(), b->packed().end()), (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(md.GetF32Array("a.f64").value(), (std::vector<float>{1.5f, -0.25f}));
  EXPECT_EQ(md.GetIntArray("a.u64big").status().code(), StatusCode::kOutOfRange);
}

TEST(GgufWriterTest, RoundTripsEveryValueTypeAndTensors) {
  for (uint32_t alignment : {0u, 32u, 1u, 64u}) {  // 0: SetAlignment not called
    SCOPED_TRACE(alignment);
    GgufWriter w;
    ASSERT_OK(w.AddString("general.architecture", "lfm2"));
    if (alignment != 0) ASSERT_OK(w.SetAlignment(alignment));
    ASSERT_OK(AddAllValueTypes(w));
    const std::vector<RoundTripTensor> tensors = SampleTensors();
    for (const RoundTripTensor& t : tensors)
      ASSERT_OK(w.AddTensor(t.name, static_cast<uint32_t>(t.type), t.ne, t.data));
    Result<std::string> bytes = w.WriteToMemory();
    ASSERT_TRUE(bytes.ok());

    const uint32_t a = alignment == 0 ? 32 : alignment;
    Result<std::unique_ptr<GgufFile>> f = GgufFile::OpenFromMemory(*bytes);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    const GgufFile& g = **f;
    EXPECT_EQ(g.version(), 3u);
    EXPECT_EQ(g.alignment(), a);
    EXPECT_EQ(g.data_offset() % a, 0u);
    EXPECT_EQ(g.metadata().Has("general.alignment"), alignment != 0);
    if (alignment != 0) {
      EXPECT_EQ(g.metadata().keys()[1], "general.alignment");
      EXPECT_EQ(g.metadata().Find("general.alignment")->type(), GgufValueType::kU32);
    }
    EXPECT_EQ(g.metadata().keys().front(), "general.architecture");
    EXPECT_EQ(g.metadata().keys().back(), "a.u64big");
    CheckAllValueTypes(g.metadata());

    ASSERT_EQ(g.tensors().size(), tensors.size());
    uint64_t offset = 0;
    for (size_t i = 0; i < tensors.size(); ++i) {
      const RoundTripTensor& want = tensors[i];
      const GgufTensor& t = g.tensors()[i];
      SCOPED_TRACE(want.name);
      EXPECT_EQ(t.name, want.name);
      EXPECT_EQ(t.type, static_cast<uint32_t>(want.type));
      EXPECT_EQ(t.n_dims, static_cast<int>(want.ne.size()));
      for (int d = 0; d < 4; ++d) EXPECT_EQ(t.ne[d], d < t.n_dims ? want.ne[d] : 1u);
      // Offsets as ggml's writer: each tensor padded to the alignment.
      EXPECT_EQ(t.offset, offset);
      offset += (want.data.size() + a - 1) / a * a;
      EXPECT_EQ(t.bytes, want.data.size());
      EXPECT_EQ(std::string_view(reinterpret_cast<const char*>(t.data), t.bytes), want.data);
      // The same bytes sit at data_offset + offset in the raw image.
      EXPECT_EQ(bytes->substr(g.data_offset() + t.offset, t.bytes), want.data);
      EXPECT_EQ(g.FindTensor(want.name), &t);
    }
    EXPECT_EQ(bytes->size(), g.data_offset() + offset);  // the last tensor is padded too
    // ParseGguf hands out pointers into the image it was given.
    Result<GgufHeader> h = ParseGguf(*bytes);
    ASSERT_TRUE(h.ok());
    for (const GgufTensor& t : h->tensors) {
      EXPECT_EQ(t.data, reinterpret_cast<const uint8_t*>(bytes->data()) + h->data_offset + t.offset);
    }
  }
}

TEST(GgufWriterTest, WritesFileAtomicallyAndOpensThroughMmap) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  GgufWriter w;
  ASSERT_OK(w.AddU32("lfm2.block_count", 16));
  const std::string data = Pattern(34 * 2, 3);
  ASSERT_OK(w.AddTensor("token_embd.weight", static_cast<uint32_t>(GgmlType::Q8_0), {32, 2}, data));
  const std::string path = dir.File("m.gguf");
  ASSERT_OK(w.Write(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_EQ(ReadBytes(path), w.WriteToMemory().value());

  Result<std::unique_ptr<GgufFile>> f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->path(), path);
  EXPECT_EQ((*f)->metadata().GetI32("lfm2.block_count").value(), 16);
  Result<const GgufTensor*> t = (*f)->GetTensor("token_embd.weight");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(std::string_view(reinterpret_cast<const char*>((*t)->data), (*t)->bytes), data);

  // Errors name the file.
  Result<std::unique_ptr<GgufFile>> missing = GgufFile::Open(dir.File("nope.gguf"));
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(WriteBytes(dir.File("bad.gguf"), std::string_view("GGUF\x01\0\0\0", 8)));
  Result<std::unique_ptr<GgufFile>> bad = GgufFile::Open(dir.File("bad.gguf"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("bad.gguf"), std::string::npos) << bad.status().message();
  ASSERT_TRUE(WriteBytes(dir.File("empty.gguf"), ""));
  EXPECT_EQ(GgufFile::Open(dir.File("empty.gguf")).status().code(), StatusCode::kDataLoss);
  EXPECT_FALSE(w.Write(dir.File("no/such/dir/x.gguf")).ok());
}

TEST(GgufWriterTest, RejectsBadInput) {
  GgufWriter w;
  ASSERT_OK(w.AddU32("k", 1));
  EXPECT_EQ(w.AddI32("k", 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(w.AddString("", "x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(w.SetAlignment(48).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(w.SetAlignment(0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(w.AddI32("general.alignment", 64).code(), StatusCode::kInvalidArgument);
  ASSERT_OK(w.AddU32("general.alignment", 16));
  EXPECT_EQ(w.alignment(), 16u);
  EXPECT_EQ(w.SetAlignment(64).code(), StatusCode::kInvalidArgument);  // at most once
  EXPECT_EQ(w.AddArrayRaw("r", GgufValueType::kU32, "abc", 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(w.AddArrayRaw("r", GgufValueType::kString, "", 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(w.AddArrayRaw("r", GgufValueType::kBool, "\x02", 1).code(), StatusCode::kInvalidArgument);
  const uint32_t f32 = static_cast<uint32_t>(GgmlType::F32);
  const std::string d16(16, '\0');
  EXPECT_EQ(w.AddTensor("t", f32, {3}, d16).code(), StatusCode::kInvalidArgument);  // size mismatch
  EXPECT_EQ(w.AddTensor("t", f32, {}, d16).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(w.AddTensor("t", f32, {1, 1, 1, 1, 4}, d16).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(w.AddTensor("t", f32, {4, 0}, "").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(w.AddTensor("t", 4, {4}, d16).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(w.AddTensor("t", static_cast<uint32_t>(GgmlType::Q4_0), {16}, std::string(9, '\0')).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(w.AddTensor("", f32, {4}, d16).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(w.AddTensor(std::string(64, 'n'), f32, {4}, d16).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(w.AddTensor("t", f32, {1ull << 32, 1ull << 32}, d16).code(), StatusCode::kInvalidArgument);
  ASSERT_OK(w.AddTensor(std::string(63, 'n'), f32, {4}, d16));
  ASSERT_OK(w.AddTensor("t", f32, {4}, d16));
  EXPECT_EQ(w.AddTensor("t", f32, {4}, d16).code(), StatusCode::kInvalidArgument);
  // The failed calls left nothing behind.
  Result<std::unique_ptr<GgufFile>> f = GgufFile::OpenFromMemory(w.WriteToMemory().value());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->metadata().keys(), (std::vector<std::string>{"k", "general.alignment"}));
  EXPECT_EQ((*f)->tensors().size(), 2u);
  EXPECT_EQ((*f)->alignment(), 16u);
}

// ---- metadata getters -------------------------------------------------------------------------------------

TEST(GgufMetadataTest, GettersConvertIntegersAndExplainMismatches) {
  GgufWriter w;
  ASSERT_OK(w.AddI32("neg", -1));
  ASSERT_OK(w.AddI32("i32", 7));
  ASSERT_OK(w.AddU64("big", 1ull << 40));
  ASSERT_OK(w.AddString("s", "x"));
  ASSERT_OK(w.AddArrayString("strs", {"a"}));
  ASSERT_OK(w.AddF32("f", 2.5f));
  Result<std::unique_ptr<GgufFile>> f = GgufFile::OpenFromMemory(w.WriteToMemory().value(), "meta.gguf");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const GgufMetadata& md = (*f)->metadata();
  EXPECT_EQ(md.GetU32("i32").value(), 7u);  // i32 written, u32 read: ggml writers differ
  EXPECT_EQ(md.GetU64("i32").value(), 7u);
  EXPECT_EQ(md.GetI32("neg").value(), -1);
  EXPECT_EQ(md.GetI64("big").value(), 1ll << 40);

  auto expect = [](const Status& s, StatusCode code, std::string_view part) {
    EXPECT_EQ(s.code(), code) << s.ToString();
    EXPECT_NE(s.message().find(part), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("meta.gguf"), std::string::npos) << s.message();
  };
  expect(md.GetU32("neg").status(), StatusCode::kOutOfRange, "does not fit u32");
  expect(md.GetU64("neg").status(), StatusCode::kOutOfRange, "does not fit u64");
  expect(md.GetU32("big").status(), StatusCode::kOutOfRange, "does not fit u32");
  expect(md.GetI32("big").status(), StatusCode::kOutOfRange, "does not fit i32");
  expect(md.GetU32("s").status(), StatusCode::kInvalidArgument, "is string, not an integer");
  expect(md.GetU32("missing").status(), StatusCode::kNotFound, "missing");
  expect(md.GetString("i32").status(), StatusCode::kInvalidArgument, "is i32, not string");
  expect(md.GetBool("f").status(), StatusCode::kInvalidArgument, "not bool");
  expect(md.GetF32("s").status(), StatusCode::kInvalidArgument, "not f32");
  expect(md.GetIntArray("strs").status(), StatusCode::kInvalidArgument,
         "array<string>, not an integer array");
  expect(md.GetStringArray("s").status(), StatusCode::kInvalidArgument, "not a string array");
  expect(md.GetF32Array("i32").status(), StatusCode::kInvalidArgument, "not an f32 array");
  EXPECT_TRUE(md.Has("s"));
  EXPECT_FALSE(md.Has("t"));
  EXPECT_EQ(md.Find("t"), nullptr);
  EXPECT_EQ(md.Find("neg")->ToString(), "i32 -1");
  EXPECT_EQ(md.Find("s")->ToString(), "string \"x\"");
  EXPECT_EQ(md.Find("strs")->ToString(), "array<string>[1] {\"a\"}");
}

TEST(GgufMetadataTest, ToStringShortensLongArrays) {
  GgufWriter w;
  ASSERT_OK(w.AddArrayI32("kv", {0, 0, 8, 0, 0, 8, 0, 0, 8, 0}));
  Result<GgufHeader> h = ParseGguf(w.WriteToMemory().value());
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->metadata.Find("kv")->ToString(4), "array<i32>[10] {0, 0, 8, 0, ...}");
}

// ---- validation: one test per rule ------------------------------------------------------------------------

TEST(GgufValidationTest, BadMagic) {
  std::string img = HandImage();
  img[3] = 'X';
  ExpectError(img, StatusCode::kDataLoss, "magic");
  ExpectError("", StatusCode::kDataLoss, "magic");
}

TEST(GgufValidationTest, Version) {
  ExpectError(Header(0, 0, 1).b, StatusCode::kUnimplemented, "version 1 is not supported");
  ExpectError(Header(0, 0, 4).b, StatusCode::kUnimplemented, "version 4 is not supported");
  ExpectError(Header(0, 0, 0x03000000).b, StatusCode::kUnimplemented, "version 50331648");  // big-endian
}

TEST(GgufValidationTest, EveryTruncationIsAnError) {
  GgufWriter w;
  ASSERT_OK(AddAllValueTypes(w));
  const std::vector<RoundTripTensor> tensors = SampleTensors();
  for (const RoundTripTensor& t : tensors)
    ASSERT_OK(w.AddTensor(t.name, static_cast<uint32_t>(t.type), t.ne, t.data));
  std::string full = w.WriteToMemory().value();
  ASSERT_TRUE(ParseGguf(full).ok());
  // The last tensor's trailing padding is not needed; cut the image right after its data.
  Result<GgufHeader> h = ParseGguf(full);
  const GgufTensor& last = h->tensors.back();
  full.resize(h->data_offset + last.offset + last.bytes);
  ASSERT_TRUE(ParseGguf(full).ok());
  for (size_t n = 0; n < full.size(); ++n) {
    // A fresh heap copy of exactly n bytes, so ASan catches any read past the prefix.
    std::unique_ptr<char[]> copy(new char[n == 0 ? 1 : n]);
    std::memcpy(copy.get(), full.data(), n);
    Result<GgufHeader> r = ParseGguf(std::string_view(copy.get(), n));
    ASSERT_FALSE(r.ok()) << "prefix of " << n << " bytes parsed";
    ASSERT_EQ(r.status().code(), StatusCode::kDataLoss) << n << ": " << r.status().ToString();
  }
}

TEST(GgufValidationTest, HugeCounts) {
  ExpectError(Header(1ull << 60, 0).b, StatusCode::kDataLoss, "claims 1152921504606846976 tensors");
  ExpectError(Header(0, 1ull << 63).b, StatusCode::kDataLoss, "more than the 0 bytes");
  ExpectError(Header(~0ull, ~0ull).b, StatusCode::kDataLoss, "claims");
  // One KV that fits, but a second claimed one does not.
  Img i = Header(0, 2);
  i.Str("k").U32(0).U8(1);
  ExpectError(i.b, StatusCode::kDataLoss, "more than the");
}

TEST(GgufValidationTest, HugeStringLength) {
  Img key = Header(0, 1);
  key.U64(1ull << 62).Raw(std::string(16, 'k'));
  ExpectError(key.b, StatusCode::kOutOfRange, "over the 65535-byte limit");
  Img value = Header(0, 1);
  value.Str("k").U32(8).U64(1ull << 40).Raw("abc");
  ExpectError(value.b, StatusCode::kOutOfRange, "over the 16777216-byte limit");
  Img past = Header(0, 1);
  past.Str("k").U32(8).U64(100).Raw("abc");
  ExpectError(past.b, StatusCode::kDataLoss, "97 bytes short of metadata key \"k\"");
  Img elem = Header(0, 1);  // in a string array
  elem.Str("k").U32(9).U32(8).U64(2).Str("ok").U64(1ull << 40).Raw(std::string(16, 'x'));
  ExpectError(elem.b, StatusCode::kOutOfRange, "element 1 of metadata key \"k\" is 1099511627776 bytes long");
  Img elem_past = Header(0, 1);
  elem_past.Str("k").U32(9).U32(8).U64(2).Str("ok").U64(20).Raw(std::string(16, 'x'));
  ExpectError(elem_past.b, StatusCode::kDataLoss, "4 bytes short of element 1 of metadata key \"k\"");
}

TEST(GgufValidationTest, HugeArrayCount) {
  Img i = Header(0, 1);
  i.Str("a").U32(9).U32(0).U64(1ull << 60).Raw("xyz");
  ExpectError(i.b, StatusCode::kDataLoss, "claims 1152921504606846976 elements of type u8");
  Img s = Header(0, 1);
  s.Str("a").U32(9).U32(8).U64(~0ull).Raw(std::string(64, '\0'));
  ExpectError(s.b, StatusCode::kDataLoss, "elements of type string");
  Img w = Header(0, 1);  // the count fits for u8 but not for u64 elements
  w.Str("a").U32(9).U32(10).U64(3).Raw(std::string(23, '\0'));
  ExpectError(w.b, StatusCode::kDataLoss, "claims 3 elements of type u64");
}

TEST(GgufValidationTest, UnknownValueType) {
  Img i = Header(0, 1);
  i.Str("k").U32(13).U64(0);
  ExpectError(i.b, StatusCode::kDataLoss, "value type 13");
  Img a = Header(0, 1);
  a.Str("k").U32(9).U32(0xffffffff).U64(0);
  ExpectError(a.b, StatusCode::kDataLoss, "value type 4294967295");
  Img nested = Header(0, 1);
  nested.Str("k").U32(9).U32(9).U64(1).U32(0).U64(0);
  ExpectError(nested.b, StatusCode::kUnimplemented, "nested arrays");
}

TEST(GgufValidationTest, BadBool) {
  Img i = Header(0, 1);
  i.Str("k").U32(7).U8(2);
  ExpectError(i.b, StatusCode::kDataLoss, "bool with byte value 2");
  Img a = Header(0, 1);
  a.Str("k").U32(9).U32(7).U64(3).U8(1).U8(0).U8(255);
  ExpectError(a.b, StatusCode::kDataLoss, "element 2 of metadata key \"k\" is a bool with byte value 255");
}

TEST(GgufValidationTest, EmptyKey) {
  Img i = Header(0, 1);
  i.Str("").U32(0).U8(1).PadTo(32);
  ExpectError(i.b, StatusCode::kDataLoss, "empty key");
}

TEST(GgufValidationTest, Alignment) {
  for (uint32_t bad : {0u, 48u, 3u, 1u << 21}) {
    SCOPED_TRACE(bad);
    Img i = Header(0, 1);
    i.Str("general.alignment").U32(4).U32(bad);
    ExpectError(i.b, StatusCode::kDataLoss, "general.alignment is u32");
  }
  Img wrong_type = Header(0, 1);
  wrong_type.Str("general.alignment").U32(5).U32(64);
  ExpectError(wrong_type.b, StatusCode::kDataLoss, "must be a u32 power of two");
  // A valid one moves the data blob.
  Img ok = Header(1, 1);
  ok.Str("general.alignment")
      .U32(4)
      .U32(256)
      .Info("t", {4}, 0, 256)
      .PadTo(256)
      .Raw(std::string(256 + 16, '\0'));
  Result<GgufHeader> h = ParseGguf(ok.b);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->alignment, 256u);
  EXPECT_EQ(h->data_offset, 256u);
  EXPECT_EQ(h->tensors[0].data, reinterpret_cast<const uint8_t*>(ok.b.data()) + 512);
}

TEST(GgufValidationTest, MisalignedOffset) {
  Img i = Header(1, 0);
  i.Info("t", {4}, 0, 4).PadTo(32).Raw(std::string(64, '\0'));
  ExpectError(i.b, StatusCode::kDataLoss, "data offset 4, not a multiple of the alignment 32");
}

TEST(GgufValidationTest, OverlappingTensors) {
  Img i = Header(3, 0);
  i.Info("a", {8}, 0, 64).Info("b", {24}, 0, 0).Info("c", {8}, 0, 96).PadTo(32).Raw(std::string(128, '\0'));
  ExpectError(i.b, StatusCode::kDataLoss, "tensors \"b\" [0, 96) and \"a\" [64, 96) overlap");
  // A contained span overlaps; adjacent ones do not.
  Img j = Header(2, 0);
  j.Info("a", {32}, 0, 0).Info("b", {8}, 0, 32).PadTo(32).Raw(std::string(128, '\0'));
  ExpectError(j.b, StatusCode::kDataLoss, "overlap");
  Img k = Header(2, 0);
  k.Info("a", {8}, 0, 0).Info("b", {8}, 0, 32).PadTo(32).Raw(std::string(64, '\0'));
  EXPECT_TRUE(ParseGguf(k.b).ok());
}

TEST(GgufValidationTest, TensorPastEnd) {
  Img i = Header(1, 0);
  i.Info("t", {8}, 0, 32).PadTo(32).Raw(std::string(63, '\0'));
  ExpectError(i.b, StatusCode::kDataLoss, "runs past the end of the 63-byte data blob");
  Img huge = Header(1, 0);
  huge.Info("t", {8}, 0, ~0ull << 5).PadTo(32).Raw(std::string(64, '\0'));
  ExpectError(huge.b, StatusCode::kDataLoss, "runs past the end");
  Img no_pad = Header(0, 0);
  no_pad.U32(0);  // 28 bytes: the padding to 32 is missing
  ExpectError(no_pad.b, StatusCode::kDataLoss, "padding before the tensor data");
}

TEST(GgufValidationTest, BlockMultiple) {
  Img i = Header(1, 0);
  i.Info("q", {16, 2}, static_cast<uint32_t>(GgmlType::Q4_0), 0).PadTo(32).Raw(std::string(64, '\0'));
  ExpectError(i.b, StatusCode::kDataLoss,
              "Q4_0 with ne[0] = 16, not a multiple of the type's 32-element block");
}

TEST(GgufValidationTest, ZeroDim) {
  Img i = Header(1, 0);
  i.Info("t", {4, 0}, 0, 0).PadTo(32).Raw(std::string(64, '\0'));
  ExpectError(i.b, StatusCode::kDataLoss, "ne[1] = 0");
}

TEST(GgufValidationTest, DimensionCount) {
  Img five = Header(1, 0);
  five.Info("t", {1, 1, 1, 1, 1}, 0, 0).PadTo(32).Raw(std::string(64, '\0'));
  ExpectError(five.b, StatusCode::kDataLoss, "5 dimensions");
  Img zero = Header(1, 0);
  zero.Info("t", {}, 0, 0).PadTo(32).Raw(std::string(64, '\0'));
  ExpectError(zero.b, StatusCode::kDataLoss, "0 dimensions");
}

TEST(GgufValidationTest, DuplicateKey) {
  Img i = Header(0, 2);
  i.Str("k").U32(0).U8(1).Str("k").U32(4).U32(2).PadTo(32);
  ExpectError(i.b, StatusCode::kDataLoss, "metadata key \"k\" appears twice");
}

TEST(GgufValidationTest, DuplicateTensorName) {
  Img i = Header(2, 0);
  i.Info("t", {8}, 0, 0).Info("t", {8}, 0, 32).PadTo(32).Raw(std::string(64, '\0'));
  ExpectError(i.b, StatusCode::kDataLoss, "tensor \"t\" appears twice (infos #0 and #1)");
}

TEST(GgufValidationTest, TensorName) {
  Img longer = Header(1, 0);
  longer.Info(std::string(64, 'n'), {8}, 0, 0).PadTo(32).Raw(std::string(64, '\0'));
  ExpectError(longer.b, StatusCode::kDataLoss, "64-byte name; ggml allows at most 63");
  Img max = Header(1, 0);
  max.Info(std::string(63, 'n'), {8}, 0, 0).PadTo(32).Raw(std::string(64, '\0'));
  EXPECT_TRUE(ParseGguf(max.b).ok());
  Img empty = Header(1, 0);
  empty.Info("", {8}, 0, 0).PadTo(32).Raw(std::string(64, '\0'));
  ExpectError(empty.b, StatusCode::kDataLoss, "empty name");
}

TEST(GgufValidationTest, ShapeOverflow) {
  Img elems = Header(1, 0);
  elems.Info("t", {1ull << 32, 1ull << 31}, 0, 0).PadTo(32).Raw(std::string(64, '\0'));
  ExpectError(elems.b, StatusCode::kDataLoss, "more elements than fit in a signed 64-bit count");
  Img wrap = Header(1, 0);  // the product wraps to 0 in 64 bits
  wrap.Info("t", {1ull << 32, 1ull << 32}, 0, 0).PadTo(32).Raw(std::string(64, '\0'));
  ExpectError(wrap.b, StatusCode::kDataLoss, "more elements");
  Img bytes = Header(1, 0);  // 2^62 F32 elements fit the count but not the byte size
  bytes.Info("t", {1ull << 62}, 0, 0).PadTo(32).Raw(std::string(64, '\0'));
  ExpectError(bytes.b, StatusCode::kDataLoss, "needs more bytes than fit in 64 bits");
}

TEST(GgufValidationTest, UnknownGgmlType) {
  Img i = Header(1, 0);
  i.Info("t", {8}, 4, 0).PadTo(32).Raw(std::string(64, '\0'));
  ExpectError(i.b, StatusCode::kUnimplemented, "ggml type 4, which lfmvox does not know");
}

// ---- fuzz seeds -------------------------------------------------------------------------------------------

// Seeds for fuzz/corpus/gguf/. Run with LFMVOX_WRITE_GGUF_SEEDS=<dir> to (re)write them; they are made
// by the writer and the test encoder above, so they stay small and what their names say.
std::vector<std::pair<std::string, std::string>> Seeds() {
  std::vector<std::pair<std::string, std::string>> out;
  {
    GgufWriter w;
    (void)AddAllValueTypes(w);
    const std::vector<RoundTripTensor> tensors = SampleTensors();
    for (const RoundTripTensor& t : tensors)
      (void)w.AddTensor(t.name, static_cast<uint32_t>(t.type), t.ne, t.data);
    out.emplace_back("valid_all_types.gguf", w.WriteToMemory().value());
  }
  {
    GgufWriter w;
    (void)w.AddString("general.architecture", "lfm2");
    (void)w.SetAlignment(64);
    (void)w.AddArrayI32("lfm2.attention.head_count_kv", {0, 0, 8, 0});
    (void)w.AddArrayString("tokenizer.ggml.tokens", {"<|pad|>", "<|startoftext|>", "a"});
    const std::string d = Pattern(18 * 2, 1);
    (void)w.AddTensor("blk.0.ffn_up.weight", static_cast<uint32_t>(GgmlType::Q4_0), {32, 2}, d);
    out.emplace_back("valid_align64_q4_0.gguf", w.WriteToMemory().value());
  }
  out.emplace_back("valid_hand.gguf", HandImage());
  {
    GgufWriter w;
    out.emplace_back("valid_empty.gguf", w.WriteToMemory().value());
  }
  {
    std::string v1 = HandImage();
    v1[4] = 1;
    out.emplace_back("invalid_version1.gguf", v1);
  }
  {
    Img i = Header(2, 0);
    i.Info("a", {8}, 0, 0).Info("b", {8}, 0, 0).PadTo(32).Raw(std::string(64, '\0'));
    out.emplace_back("invalid_overlap.gguf", i.b);
  }
  {
    Img i = Header(0, 1);
    i.Str("a").U32(9).U32(0).U64(1ull << 60).Raw("xyz");
    out.emplace_back("invalid_array_count.gguf", i.b);
  }
  {
    Img i = Header(1, 0);
    i.Info("q", {16}, static_cast<uint32_t>(GgmlType::Q8_0), 0).PadTo(32).Raw(std::string(64, '\0'));
    out.emplace_back("invalid_block.gguf", i.b);
  }
  return out;
}

TEST(GgufFuzzSeedsTest, SeedsAreWhatTheirNamesSay) {
  if (const char* dir = std::getenv("LFMVOX_WRITE_GGUF_SEEDS")) {
    for (const auto& [name, bytes] : Seeds())
      ASSERT_TRUE(WriteBytes((std::filesystem::path(dir) / name).string(), bytes));
  }
  for (const auto& [name, bytes] : Seeds()) {
    SCOPED_TRACE(name);
    EXPECT_LT(bytes.size(), 4096u);
    EXPECT_EQ(ParseGguf(bytes).ok(), name.starts_with("valid_"));
  }
  const std::filesystem::path dir = std::filesystem::path(LFMVOX_TEST_DATA_DIR) / "../../fuzz/corpus/gguf";
  int seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    SCOPED_TRACE(name);
    const bool ok = GgufFile::OpenFromMemory(ReadBytes(entry.path().string())).ok();
    EXPECT_EQ(ok, name.starts_with("valid_"));
    ++seen;
  }
  EXPECT_GE(seen, 6);
}

}  // namespace
}  // namespace lfmvox
