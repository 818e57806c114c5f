// LoadMatrix (blocks/weights.h) on a small safetensors file written here:
// every matrix format becomes a view that knows its bytes and feeds the
// kernels, and a dtype no kernel takes is a clear error at load time.
#include "blocks/weights.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "ops/ops.h"
#include "tensor/dtype.h"
#include "threading/thread_team.h"
#include "trace_util.h"

namespace lfmvox {
namespace {

constexpr int64_t kRows = 3, kCols = 5;

// Row r, column c of every test matrix: small integers, exact in every dtype.
float Value(int64_t r, int64_t c) { return static_cast<float>(r * 10 + c - 7); }

class LoadMatrixTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int64_t r = 0; r < kRows; ++r) {
      for (int64_t c = 0; c < kCols; ++c) {
        const float v = Value(r, c);
        f32_.push_back(v);
        bf16_.push_back(F32ToBf16(v));
        f16_.push_back(F32ToF16(v));
        f64_.push_back(v);
        i32_.push_back(static_cast<int32_t>(v));
      }
    }
    const std::vector<int64_t> shape{kRows, kCols};
    const std::vector<TensorToWrite> tensors = {
        {"w.f32", DType::kF32, shape, f32_.data(), f32_.size() * 4},
        {"w.bf16", DType::kBF16, shape, bf16_.data(), bf16_.size() * 2},
        {"w.f16", DType::kF16, shape, f16_.data(), f16_.size() * 2},
        {"w.f64", DType::kF64, shape, f64_.data(), f64_.size() * 8},
        {"w.i32", DType::kI32, shape, i32_.data(), i32_.size() * 4},
    };
    path_ = testing::ScratchPath("weights_test.safetensors");
    ASSERT_TRUE(WriteSafetensors(path_, tensors).ok());
    Result<Checkpoint> ckpt = Checkpoint::Open(path_);
    ASSERT_TRUE(ckpt.ok()) << ckpt.status().ToString();
    ckpt_ = std::make_unique<Checkpoint>(std::move(*ckpt));
  }
  void TearDown() override { std::filesystem::remove(path_); }

  std::vector<float> f32_;
  std::vector<uint16_t> bf16_, f16_;
  std::vector<double> f64_;
  std::vector<int32_t> i32_;
  std::string path_;
  std::unique_ptr<Checkpoint> ckpt_;
};

TEST_F(LoadMatrixTest, EveryFormatLoadsKnowsItsBytesAndComputes) {
  struct Case {
    const char* name;
    WeightFormat format;
    size_t elem_bytes;
  };
  ThreadTeam team(1);
  for (const Case& c : {Case{"w.f32", WeightFormat::kF32, 4}, Case{"w.bf16", WeightFormat::kBF16, 2},
                        Case{"w.f16", WeightFormat::kF16, 2}}) {
    SCOPED_TRACE(c.name);
    Result<ops::Weight> w = LoadMatrix(*ckpt_, c.name, kRows, kCols);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    EXPECT_EQ(w->format, c.format);
    EXPECT_EQ(w->rows, size_t{kRows});
    EXPECT_EQ(w->cols, size_t{kCols});
    EXPECT_EQ(w->row_bytes, kCols * c.elem_bytes);
    EXPECT_EQ(w->bytes(), kRows * w->row_bytes);
    EXPECT_EQ(w->bytes(), ckpt_->Get(c.name)->bytes());  // the whole tensor, no more
    // Y = X · Wᵀ with X = e_1 + e_3 picks columns 1 and 3: exact small integers.
    const float x[kCols] = {0, 1, 0, 1, 0};
    float y[kRows];
    ops::MatMul(x, 1, kCols, *w, nullptr, y, kRows, team);
    std::vector<float> acc(kCols, 0.5f);
    AccumulateRow(*w, 2, acc.data());
    for (int64_t r = 0; r < kRows; ++r) EXPECT_EQ(y[r], Value(r, 1) + Value(r, 3)) << r;
    for (int64_t col = 0; col < kCols; ++col) EXPECT_EQ(acc[col], 0.5f + Value(2, col)) << col;
  }
}

TEST_F(LoadMatrixTest, DTypeWithoutAKernelIsAClearError) {
  EXPECT_EQ(SupportedMatrixFormats(), "F32, BF16, F16, Q8_0, Q4_0 and Q6_K");
  for (const char* name : {"w.f64", "w.i32"}) {
    SCOPED_TRACE(name);
    Result<ops::Weight> w = LoadMatrix(*ckpt_, name, kRows, kCols);
    ASSERT_FALSE(w.ok());
    EXPECT_EQ(w.status().code(), StatusCode::kUnimplemented);
    const std::string dtype = name == std::string("w.f64") ? "F64" : "I32";
    EXPECT_EQ(w.status().message(),
              std::string("tensor ") + name + " is stored as " + dtype +
                  "; this build's matrix kernels take F32, BF16, F16, Q8_0, Q4_0 and Q6_K; convert the "
                  "checkpoint to one of them");
  }
}

}  // namespace
}  // namespace lfmvox
