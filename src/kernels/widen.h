// SIMD widening of bf16 storage to f32, the packers' inner step for bf16
// operands. The portable loop in decode.cc compiles for the baseline ISA
// (SSE2: 8 values per iteration), which at 128 groups of 32 rows cost as
// much time as the FMAs; this one is compiled per Highway target.
#pragma once

#include <cstdint>

namespace raggemm::kernels {

// dst[j] = bf16 value src[j] as f32, j < count.
void widen_bf16(const uint16_t* src, int64_t count, float* dst);

// `rows` rows of `cols` bf16 values, `ld` apart, widened straight into B
// micro-panels of `nr` columns (pack_b's layout: panel q holds columns
// [q * nr, q * nr + nr) of every row, row-major, the last one zero-padded).
void widen_bf16_panels(const uint16_t* src, int64_t ld, int64_t rows, int64_t cols, int nr,
                       float* dst);

}  // namespace raggemm::kernels
