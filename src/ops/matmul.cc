// ops::MatMul and ops::AccumulateRow: one look-up of the view's format per
// call, to that format's translation unit (matmul_<format>.cc), which then
// dispatches to the CPU's Highway target.
#include <hwy/base.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <vector>

#include "ops/matmul_kernels.h"
#include "ops/ops.h"
#include "tensor/quant.h"

namespace lfmvox::ops {

namespace {

struct FormatKernels {
  internal::MatMulKernel matmul;
  internal::AccumulateRowKernel accumulate_row;
};

// One entry per WeightFormat, in enum order.
constexpr FormatKernels kKernels[] = {
    {internal::MatMulF32, internal::AccumulateRowF32},    // kF32
    {internal::MatMulBf16, internal::AccumulateRowBf16},  // kBF16
    {internal::MatMulF16, internal::AccumulateRowF16},    // kF16
    {internal::MatMulQ8_0, internal::AccumulateRowQ8_0},  // kQ8_0
    {internal::MatMulQ4_0, internal::AccumulateRowQ4_0},  // kQ4_0
    {internal::MatMulQ6_K, internal::AccumulateRowQ6_K},  // kQ6_K
};
static_assert(std::size(kKernels) == kWeightFormatCount,
              "every WeightFormat needs its kernels here (or an entry of nullptrs and a load-time refusal)");

const FormatKernels* KernelsFor(WeightFormat f) {
  const auto i = static_cast<size_t>(f);
  if (i >= std::size(kKernels) || kKernels[i].matmul == nullptr) return nullptr;
  return &kKernels[i];
}

// Reached only through a view that LoadMatrix would have refused (a caller
// bug, never user input): stop loudly rather than compute garbage.
const FormatKernels& KernelsOrDie(WeightFormat f) {
  const FormatKernels* k = KernelsFor(f);
  if (k == nullptr) HWY_ABORT("ops: no kernel for weight format %d", static_cast<int>(f));
  return *k;
}

}  // namespace

internal::QuantScratch& internal::ThreadQuantScratch() {
  thread_local QuantScratch scratch;
  return scratch;
}

size_t internal::DecodeL1XBytes() {
  static const size_t bytes = [] {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (__builtin_cpu_is("intel")) return size_t{4096};
#endif
    return size_t{8192};
  }();
  return bytes;
}

bool HasMatMulKernel(WeightFormat f) { return KernelsFor(f) != nullptr; }

bool PrefersSteps16Layout(WeightFormat f) {
  if (f == WeightFormat::kQ8_0) return internal::ReadsSteps16Q8_0();
  if (f == WeightFormat::kQ4_0) return internal::ReadsSteps16Q4_0();
  if (f == WeightFormat::kQ6_K) return internal::ReadsSteps16Q6_K();
  return false;
}

void MatMul(const float* x, size_t m, size_t ldx, const Weight& w, const float* bias, float* y, size_t ldy,
            ThreadTeam& team) {
  if (w.layout == WeightLayout::kTiles) return internal::MatMulTiles(x, m, ldx, w, bias, y, ldy, team);
  KernelsOrDie(w.format).matmul(x, m, ldx, w, bias, y, ldy, team);
}

void MatMulShared(const float* x, size_t m, size_t ldx, std::span<const MatMulOut> outs, ThreadTeam& team) {
  const bool tiles = !outs.empty() && std::all_of(outs.begin(), outs.end(), [](const MatMulOut& o) {
    return o.w->layout == WeightLayout::kTiles;
  });
  if (tiles) return internal::MatMulTilesShared(x, m, ldx, outs, team);
  for (const MatMulOut& o : outs) MatMul(x, m, ldx, *o.w, o.bias, o.y, o.ldy, team);
}

void AccumulateRow(const Weight& table, size_t row, float* acc) {
  if (table.layout == WeightLayout::kTiles) {
    // The row gathered from its tiles (the thread's buffer, grown once), then as a one-row BF16 matrix.
    thread_local std::vector<uint8_t> one;
    one.resize(std::max(one.size(), FormatRowBytes(table.format, table.cols)));
    const uint8_t* r = RowAsBlocks(table, row, one.data());
    return AccumulateRow(Weight::Dense(table.format, r, 1, table.cols, table.cols), 0, acc);
  }
  KernelsOrDie(table.format).accumulate_row(table, row, acc);
}

}  // namespace lfmvox::ops
