// fp8 codes of a contiguous f32 span with one divisor, vectorized by hand
// with AVX-512 and AVX2 (the portable path is raggemm::fp8_encode_span,
// GCC's target_clones loop; on a Zen 3 the AVX2 intrinsics quantized a
// 4096 x 1024 lhs in 3.3 ms against its 4.9-6.3):
//   out[j] = encode(src[j] / divisor), saturating, NaN kept
// bit-identical to f32_to_fp8_e4m3 and f32_to_fp8_e5m2(..., true). Activation
// quantization of an fp8 gmm runs it on every input element.
#pragma once

#include <cstdint>

#include "raggemm/dtype.h"

namespace raggemm::ops {

// dtype: DType::kF8E4M3 or kF8E5M2.
void encode_fp8_span(DType dtype, const float* src, int64_t count, float divisor, uint8_t* out);

// One implementation by name ("AVX512", "AVX2", "PORTABLE"), for tests; false when
// this CPU or build lacks it.
bool encode_fp8_span_on(const char* isa, DType dtype, const float* src, int64_t count,
                        float divisor, uint8_t* out);

}  // namespace raggemm::ops
