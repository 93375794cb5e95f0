// The int8 forward gmm on integer dot products: int8 lhs codes [M,K] with a
// scale per row, int8 weight codes [K,N] per group with a scale per column
// (per group, or shared), i32 accumulation, and both scales applied in the
// output stage:
//
//   out[i, j] = float(sum_k A[i,k] * B_g[k,j]) * row_scale[i] * col_scale_g[j]
//
// Same contract as the other kernels (DESIGN.md s.1): rows no local group
// covers come out zero, results do not depend on the thread count (integer
// sums are exact and every output element is written by one item).
#pragma once

#include <cstdint>

#include "kernels/gmm_kernel.h"
#include "kernels/microkernel_registry.h"

namespace raggemm::kernels {

struct Int8GmmProblem {
  const int8_t* lhs = nullptr;       // [M, K] codes, row-major
  const float* row_scale = nullptr;  // [M]
  const int8_t* rhs = nullptr;       // local group g at rhs + g * rhs_group_stride: [K, N]
  int64_t rhs_group_stride = 0;
  const float* col_scale = nullptr;  // group g, column j: col_scale[g * group_stride + j * stride]
  int64_t col_scale_stride = 1;      // 0: one scale for all columns
  int64_t col_scale_group_stride = 0;
  int64_t m = 0, k = 0, n = 0;
  const int64_t* starts = nullptr;  // size num_groups + 1
  int64_t num_groups = 0;
  int64_t group_offset = 0;
  int64_t local_groups = 0;
  float* out = nullptr;  // [M, N], contiguous f32 output, or null:
  uint16_t* out_bf16 = nullptr;  // the bf16 output instead, rounded once in the output stage
  bool accumulate = false;       // out += result (rows of other groups left as they are)
  SwigluStage swiglu_stage{};    // on the f32 output (kernels/swiglu_stage.h)
  OutputView output() const { return OutputView{out, out_bf16, n, accumulate}; }
};

// Whether the fast path is worth taking here (a SIMD int8 kernel exists).
bool int8_gmm_available();

// Runs with the best microkernel, or with `kernel` (tests force each one).
void int8_gmm(const Int8GmmProblem& problem, const Schedule& schedule,
              const Int8Microkernel* kernel = nullptr);

}  // namespace raggemm::kernels
