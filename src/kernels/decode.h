// Reading operand elements as f32: widening (bf16, f16), decoding (fp8, int8)
// and dequantization scales, one contiguous span of a row at a time so the
// dtype switch stays outside the inner loop.
#pragma once

#include <cstdint>

#include "kernels/operand.h"

namespace raggemm::kernels {

// out[j * out_stride] = value of op(r, c0 + j) for j in [0, count).
void decode_span(const Operand& op, int64_t r, int64_t c0, int64_t count, float* out,
                 int64_t out_stride);

// One element (slow path; reference and tests).
float decode_element(const Operand& op, int64_t r, int64_t c);

}  // namespace raggemm::kernels
