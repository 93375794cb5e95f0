// The v2 output stage: scales, bias and the fused SwiGLU, applied once a
// tile's contraction is complete.
#pragma once

#include <cstdint>

#include "kernels/gmm_kernel.h"

namespace raggemm::kernels {

// acc: rows x acc_cols (ld = acc_ld) for global rows [row0, row0 + rows) of
// group g (local index) and accumulator columns [col0, col0 + width) — with
// swiglu the gate half sits at acc[:, 0:width] and the up half at
// acc[:, width:2*width], for accumulator columns col0.. and n/2 + col0..
// Writes out[row, col0 + j] for j < width.
void apply_epilogue(const GmmProblem& problem, int64_t g, int64_t row0, int64_t rows,
                    int64_t col0, int64_t width, const float* acc, int64_t acc_ld);

}  // namespace raggemm::kernels
