#include "tensor/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace lfmvox {
namespace {

TEST(DType, Bf16RoundTripAndRoundingToNearestEven) {
  // Every bf16 bit pattern that is not NaN widens and narrows back exactly.
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    const float f = Bf16ToF32(static_cast<uint16_t>(b));
    if (std::isnan(f)) continue;
    ASSERT_EQ(F32ToBf16(f), b);
  }
  // 1 + 2^-8 lies exactly between bf16 1.0 and 1+2^-7: ties go to even (1.0).
  EXPECT_EQ(Bf16ToF32(F32ToBf16(1.0f + 0.00390625f)), 1.0f);
  EXPECT_EQ(Bf16ToF32(F32ToBf16(1.0f + 3 * 0.00390625f)), 1.0f + 4 * 0.00390625f);
  EXPECT_TRUE(std::isnan(Bf16ToF32(F32ToBf16(NAN))));
}

TEST(DType, F16RoundTripIncludingSubnormals) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float f = F16ToF32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(F32ToF16(f), h) << std::hex << h;
  }
  EXPECT_EQ(F16ToF32(0x3c00), 1.0f);
  EXPECT_EQ(F16ToF32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(F32ToF16(65520.0f), 0x7c00);  // rounds up to infinity
}

TEST(DType, NamesAndSizes) {
  DType t;
  ASSERT_TRUE(ParseDType("BF16", &t));
  EXPECT_EQ(t, DType::kBF16);
  EXPECT_EQ(DTypeSize(t), 2u);
  EXPECT_FALSE(ParseDType("F8_E4M3", &t));
  EXPECT_STREQ(DTypeName(DType::kI64), "I64");
}

}  // namespace
}  // namespace lfmvox
