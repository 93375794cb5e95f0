// The gmm's SwiGLU stage (SwigluStage in kernels/gmm_kernel.h; the public
// contract is include/raggemm/swiglu_stage.h): the MoE layer's elementwise
// SwiGLU run by the kernels' store stage on each output block as soon as its
// values are final, so the block is read back from L1/L2 on the thread that
// wrote it rather than from memory by a serial pass afterwards. The rows go
// through the vector loops of kernels/glue_simd.h, the layer's own, so the
// bits are those of the separate pass.
#pragma once

#include <cstdint>

#include "kernels/gmm_kernel.h"

namespace raggemm::kernels {

// The stage on rows [row0, row0 + rows) and columns [col0, col0 + cols) of
// the f32 output `out` (row stride ld, the stage's arrays' too), whose
// values there are final. No-op when the stage is off.
void apply_swiglu_stage(const SwigluStage& stage, const float* out, int64_t ld, int64_t row0,
                        int64_t rows, int64_t col0, int64_t cols);
inline void apply_swiglu_stage(const GmmProblem& p, int64_t row0, int64_t rows, int64_t col0,
                               int64_t cols) {
  apply_swiglu_stage(p.swiglu_stage, p.out, p.out_cols(), row0, rows, col0, cols);
}

// Zeroes the stage's outputs ([m, cols]) on the rows no local group covers,
// the rows the gmm zeroes in its output.
void zero_swiglu_stage_uncovered(const SwigluStage& stage, const int64_t* starts,
                                 int64_t group_offset, int64_t local_groups, int64_t m,
                                 int64_t cols);
inline void zero_swiglu_stage_uncovered(const GmmProblem& p) {
  zero_swiglu_stage_uncovered(p.swiglu_stage, p.starts, p.group_offset, p.local_groups, p.m,
                              p.out_cols());
}

}  // namespace raggemm::kernels
