// The entry points of the per-format MatMul translation units, for matmul.cc
// (which picks one per call from the view's format); not part of the ops API.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/aligned.h"
#include "ops/ops.h"

namespace lfmvox::ops::internal {

using MatMulKernel = void (*)(const float* x, size_t m, size_t ldx, const MatrixView& w, const float* bias,
                              float* y, size_t ldy, ThreadTeam& team);
using AccumulateRowKernel = void (*)(const MatrixView& w, size_t row, float* acc);

// Defined by matmul_<format>.cc, each dispatching to the CPU's Highway target.
void MatMulF32(const float* x, size_t m, size_t ldx, const MatrixView& w, const float* bias, float* y,
               size_t ldy, ThreadTeam& team);
void AccumulateRowF32(const MatrixView& w, size_t row, float* acc);
void MatMulBf16(const float* x, size_t m, size_t ldx, const MatrixView& w, const float* bias, float* y,
                size_t ldy, ThreadTeam& team);
void AccumulateRowBf16(const MatrixView& w, size_t row, float* acc);
void MatMulF16(const float* x, size_t m, size_t ldx, const MatrixView& w, const float* bias, float* y,
               size_t ldy, ThreadTeam& team);
void AccumulateRowF16(const MatrixView& w, size_t row, float* acc);
void MatMulQ8_0(const float* x, size_t m, size_t ldx, const MatrixView& w, const float* bias, float* y,
                size_t ldy, ThreadTeam& team);
void AccumulateRowQ8_0(const MatrixView& w, size_t row, float* acc);
void MatMulQ4_0(const float* x, size_t m, size_t ldx, const MatrixView& w, const float* bias, float* y,
                size_t ldy, ThreadTeam& team);
void AccumulateRowQ4_0(const MatrixView& w, size_t row, float* acc);
void MatMulQ6_K(const float* x, size_t m, size_t ldx, const MatrixView& w, const float* bias, float* y,
                size_t ldy, ThreadTeam& team);
void AccumulateRowQ6_K(const MatrixView& w, size_t row, float* acc);
// BF16 W in WeightLayout::kTiles (matmul_tiles.cc): AMX where granted, else
// the rows unpacked for MatMulBf16.
void MatMulTiles(const float* x, size_t m, size_t ldx, const MatrixView& w, const float* bias, float* y,
                 size_t ldy, ThreadTeam& team);
// MatMulShared when every W is kTiles.
void MatMulTilesShared(const float* x, size_t m, size_t ldx, std::span<const MatMulOut> outs,
                       ThreadTeam& team);
// Tests: false makes MatMulTiles and PrefersTilesLayout act as if the CPU had no AMX.
void SetTilesAmxForTest(bool on);
// The AMX units this CPU has and the OS grants this process (matmul_tiles.cc; asked once).
struct AmxUnits {
  bool bf16 = false;
  bool int8 = false;
};
AmxUnits AmxGranted();
// The 64-byte operand of LDTILECFG (palette 1): each tile's rows and bytes a row.
struct alignas(64) AmxTileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
// Q8_0 / Q4_0 W in WeightLayout::kSteps16 on AMX-INT8 (matmul_quant_amx.cc), for the AVX3_DL target of
// the integer engine (matmul_quant-inl.h), whose bits it gives: QuantAmxFor(f, m) says whether to call
// it (this CPU has the unit, f is one of the two and m rows pay for the W tiles' preparation). X comes
// quantized as QuantizeGroups does it, in tiles of 16 rows: block b of X tile t (rows 16t ..) is 512
// bytes at xa + (t·blocks + b)·512, row r's 32 int8 at 32·r in it, and its d_x at xd[(t·blocks + b)·16 + r].
bool QuantAmxFor(WeightFormat f, size_t m);
void QuantMatMulAmx(const int8_t* xa, const float* xd, size_t m, const MatrixView& w, const float* bias,
                    float* y, size_t ldy, ThreadTeam& team);
// Tests: false makes QuantAmxFor say no.
void SetQuantAmxForTest(bool on);
// Whether the chosen target's Q8_0 / Q4_0 / Q6_K steps read
// WeightLayout::kSteps16 directly (matmul_q8_0.cc, matmul_q4_0.cc, matmul_q6_k.cc).
bool ReadsSteps16Q8_0();
bool ReadsSteps16Q4_0();
bool ReadsSteps16Q6_K();

// The calling thread's scratch for quantized X: grown on demand, never
// shrunk, so that steady-state MatMul calls do not allocate.
struct QuantScratch {
  AlignedBuffer<uint8_t> x;
  AlignedBuffer<uint8_t> w;  // W rows unpacked for a target that does not read their layout, or widened to
                             // f32 (matmul-inl.h: SweepWidened)
  uint8_t* Reserve(size_t bytes) {
    if (x.size() < bytes) x.Reset(bytes);
    return x.data();
  }
  AlignedBuffer<uint8_t> carry;  // a W block's tile accumulators between chunks of steps (SweepWidened's
                                 // between spans)
  uint8_t* ReserveW(size_t bytes) {
    if (w.size() < bytes) w.Reset(bytes);
    return w.data();
  }
  uint8_t* ReserveCarry(size_t bytes) {
    if (carry.size() < bytes) carry.Reset(bytes);
    return carry.data();
  }
};
QuantScratch& ThreadQuantScratch();

// The float kernels' decode on AVX-512 (matmul-inl.h, kDecodeStream): the longest X row, in bytes, for
// which the W stream is prefetched to L1 by a 1 × 2 tile; longer rows get 1 × 8 tiles and an L2 stream.
// Which one reads DRAM faster depends on the core (measured there): 4 KiB on Intel, 8 KiB elsewhere.
size_t DecodeL1XBytes();

}  // namespace lfmvox::ops::internal

// The HWY_ONCE part of matmul_<format>.cc, given the decoder's TU defines
// MatMul<Name>Impl and AccumulateRow<Name>Impl in HWY_NAMESPACE: exports them
// and defines internal::MatMul<Name> and internal::AccumulateRow<Name>.
#define LFMVOX_EXPORT_MATMUL_KERNELS(Name)                                                                  \
  namespace lfmvox::ops {                                                                                   \
  HWY_EXPORT(MatMul##Name##Impl);                                                                           \
  HWY_EXPORT(AccumulateRow##Name##Impl);                                                                    \
  void internal::MatMul##Name(const float* x, size_t m, size_t ldx, const MatrixView& w, const float* bias, \
                              float* y, size_t ldy, ThreadTeam& team) {                                     \
    HWY_DYNAMIC_DISPATCH(MatMul##Name##Impl)(x, m, ldx, w, bias, y, ldy, team);                             \
  }                                                                                                         \
  void internal::AccumulateRow##Name(const MatrixView& w, size_t row, float* acc) {                         \
    HWY_DYNAMIC_DISPATCH(AccumulateRow##Name##Impl)(w, row, acc);                                           \
  }                                                                                                         \
  }  // namespace lfmvox::ops

// The per-target part: MatMul<Name>Impl and AccumulateRow<Name>Impl from the
// engine in matmul-inl.h with decoder Fmt. Use inside HWY_NAMESPACE.
#define LFMVOX_DEFINE_MATMUL_KERNELS(Name, Fmt)                                                         \
  void MatMul##Name##Impl(const float* x, size_t m, size_t ldx, const MatrixView& w, const float* bias, \
                          float* y, size_t ldy, ThreadTeam& team) {                                     \
    MatMulWith<Fmt>(x, m, ldx, w, bias, y, ldy, team);                                                  \
  }                                                                                                     \
  void AccumulateRow##Name##Impl(const MatrixView& w, size_t row, float* acc) {                         \
    AccumulateRowWith<Fmt>(w, row, acc);                                                                \
  }

// The per-target part for a block format: MatMul<Name>Impl and
// AccumulateRow<Name>Impl from the integer engine of matmul_quant-inl.h.
#define LFMVOX_DEFINE_QUANT_MATMUL_KERNELS(Name, Fmt)                                                   \
  bool ReadsSteps16##Name##Impl() { return QReadsSteps16<Fmt>(); }                                      \
  void MatMul##Name##Impl(const float* x, size_t m, size_t ldx, const MatrixView& w, const float* bias, \
                          float* y, size_t ldy, ThreadTeam& team) {                                     \
    QuantMatMulWith<Fmt>(x, m, ldx, w, bias, y, ldy, team);                                             \
  }                                                                                                     \
  void AccumulateRow##Name##Impl(const MatrixView& w, size_t row, float* acc) {                         \
    QuantAccumulateRowWith<Fmt>(w, row, acc);                                                           \
  }
