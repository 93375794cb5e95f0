// The bf16 output's store stage over a row of finished f32 values, in
// vectors: each value rounded to bf16 as core::bf16_bits_of does (to nearest
// even, NaN kept quiet), bit for bit.
#pragma once

#include <cstdint>

namespace raggemm::kernels {

// dst[j] = core::bf16_bits_of(src[j]), j < n. With `stream`, where dst is
// aligned to a vector the stores are non-temporal (final values of an
// output larger than the caches: its lines are not read first); the caller
// fences with hwy::FlushStream() before the values are read elsewhere.
void round_row_to_bf16(const float* src, int64_t n, uint16_t* dst, bool stream);

}  // namespace raggemm::kernels
