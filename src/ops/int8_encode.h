// The int8 codes of a contiguous f32 span with one scale, vectorized by hand:
//   out[j] = round_half_even(clamp(src[j] / scale, -127, 127))
// GCC does not vectorize this loop (it sees control flow in the clamp under
// trapping math), and activation quantization runs it on every element of a
// quantized gmm's input. Bit-identical to the scalar formula for finite and
// infinite inputs (NaN is refused before encoding).
#pragma once

#include <cstdint>

namespace raggemm::ops {

void encode_int8_span(const float* src, int64_t count, float scale, int8_t* out);

// One implementation by name ("AVX512", "AVX2", "SCALAR"), for tests;
// false (nothing written) when this CPU or build lacks it.
bool encode_int8_span_on(const char* isa, const float* src, int64_t count, float scale,
                         int8_t* out);

}  // namespace raggemm::ops
