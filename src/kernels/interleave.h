// Interleaving of row-major rows into a micro-panel: the inner step of packing
// an lhs panel (MR rows, depth along K) and a transposed rhs panel (NR rows of
// the [N,K]-viewed rhs in dlhs). Both read `rows` source rows, each
// contiguous along the depth, and write depth-major: one panel column per
// source row. A scalar loop does this with one strided store per element and
// one short read stream at a time, which made the dlhs B packing 3x the cost
// of its FMAs at 32-row groups; the SIMD version transposes 8x8 (or 4x4)
// blocks in registers and reads 8 rows at once.
#pragma once

#include <cstdint>

namespace raggemm::kernels {

// dst[p * width + i] = src[i * ld + p] for i < rows, p < depth;
// dst[p * width + i] = 0 for rows <= i < width. Requires rows <= width.
void interleave_rows(const float* src, int64_t ld, int rows, int64_t depth, int width, float* dst);

// The same from bf16 rows (raw bits), widened to f32 on the way.
void interleave_rows_bf16(const uint16_t* src, int64_t ld, int rows, int64_t depth, int width,
                          float* dst);

}  // namespace raggemm::kernels
