// The two 8-bit float formats of fp8 training, bit-exact:
//  - e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities,
//    S.1111.111 is NaN, largest finite 448, smallest subnormal 2^-9.
//  - e5m2: 1 sign, 5 exponent (bias 15), 2 mantissa bits, IEEE-like with
//    infinities and NaNs; largest finite 57344, smallest subnormal 2^-16.
// Decoding is exact. Encoding rounds to nearest, ties to even.
#pragma once

#include <cstdint>

#include "raggemm/dtype.h"

namespace raggemm {

inline constexpr float kFp8E4M3Max = 448.0f;
inline constexpr float kFp8E5M2Max = 57344.0f;

float fp8_e4m3_to_f32(uint8_t code);
float fp8_e5m2_to_f32(uint8_t code);

// A 256-entry table code -> f32 for DType::kF8E4M3 or kF8E5M2, built once on
// first use (thread-safe) and valid for the life of the program. Packing
// loops decode through it. Throws Error for any other dtype.
const float* fp8_decode_table(DType dtype);

// Bulk decoding for packing loops: out[j] = decode(src[j]) * scale *
// (col_scales ? col_scales[j] : 1) for j < count. Branch-free integer
// arithmetic (no table), compiled per SIMD level and chosen at load time;
// bit-identical to the table. dtype: kF8E4M3 or kF8E5M2.
void fp8_decode_span(DType dtype, const uint8_t* src, int64_t count, float scale,
                     const float* col_scales, float* out);

// Bulk encoding for quantization loops: out[j] = encode(src[j] / divisor),
// saturating (both formats), bit-identical to f32_to_fp8_e4m3 and
// f32_to_fp8_e5m2(..., true). Branch-free, compiled per SIMD level.
void fp8_encode_span(DType dtype, const float* src, int64_t count, float divisor, uint8_t* out);

// Saturating: finite values beyond +-448 and infinities become +-448; NaN
// becomes 0x7f / 0xff (the format's NaN, sign kept).
uint8_t f32_to_fp8_e4m3(float value);

// saturate=true: values beyond +-57344 and infinities become +-57344.
// saturate=false: values that round past the max become +-inf (IEEE), and an
// infinity stays infinite. NaN stays NaN (quiet, sign kept) in both modes.
uint8_t f32_to_fp8_e5m2(float value, bool saturate);

}  // namespace raggemm
