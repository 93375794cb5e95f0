#include "raggemm/fp8.h"

#include "core/dtype_traits.h"
#include "core/float_bits.h"
#include "raggemm/error.h"

namespace raggemm {
namespace {

using core::bits_of;
using core::float_of;

// A small binary float format: exponent bias and mantissa width.
struct MiniFloat {
  int bias;
  int mantissa_bits;
};

constexpr MiniFloat kE4M3{7, 3};
constexpr MiniFloat kE5M2{15, 2};

// Decodes the finite, non-NaN magnitude code (sign bit cleared). Exact: every
// 8-bit float is an f32 value.
float decode_magnitude(uint32_t code, MiniFloat format) {
  uint32_t exponent = code >> format.mantissa_bits;
  uint32_t mantissa = code & ((1u << format.mantissa_bits) - 1u);
  if (exponent == 0) {
    // Subnormal: mantissa units of 2^(1 - bias - mantissa_bits).
    int unit_exp = 1 - format.bias - format.mantissa_bits;
    return static_cast<float>(mantissa) * float_of(static_cast<uint32_t>(127 + unit_exp) << 23);
  }
  uint32_t f32_exponent = exponent - static_cast<uint32_t>(format.bias) + 127u;
  return float_of((f32_exponent << 23) | (mantissa << (23 - format.mantissa_bits)));
}

// Rounds a finite non-negative f32 magnitude to the format's magnitude code,
// nearest-even, without any overflow handling: the result may exceed the
// format's largest finite code (callers saturate or overflow it). Codes grow
// monotonically with the value, and a subnormal that rounds up to the
// smallest normal lands on its code naturally.
uint32_t round_magnitude(float magnitude, MiniFloat format) {
  float min_normal = float_of(static_cast<uint32_t>(127 + 1 - format.bias) << 23);
  if (magnitude < min_normal) {
    // Scale so one subnormal unit is 1.0; exact (multiplication by a power of two).
    int scale_exp = format.bias - 1 + format.mantissa_bits;
    float scaled = magnitude * float_of(static_cast<uint32_t>(127 + scale_exp) << 23);
    uint32_t whole = static_cast<uint32_t>(scaled);
    float fraction = scaled - static_cast<float>(whole);  // exact: scaled < 2^mantissa_bits
    if (fraction > 0.5f || (fraction == 0.5f && (whole & 1u))) ++whole;
    return whole;
  }
  // Normal: rebias the exponent and round away 23 - mantissa_bits bits.
  uint32_t rebased = bits_of(magnitude) - (static_cast<uint32_t>(127 - format.bias) << 23);
  int shift = 23 - format.mantissa_bits;
  uint32_t rounding = ((1u << (shift - 1)) - 1u) + ((rebased >> shift) & 1u);
  return (rebased + rounding) >> shift;
}

}  // namespace

float fp8_e4m3_to_f32(uint8_t code) {
  uint32_t magnitude = code & 0x7fu;
  bool negative = (code & 0x80u) != 0;
  if (magnitude == 0x7fu) return float_of(negative ? 0xffc00000u : 0x7fc00000u);
  float value = decode_magnitude(magnitude, kE4M3);
  return negative ? -value : value;
}

float fp8_e5m2_to_f32(uint8_t code) {
  uint32_t magnitude = code & 0x7fu;
  bool negative = (code & 0x80u) != 0;
  uint32_t sign = negative ? 0x80000000u : 0u;
  if (magnitude == 0x7cu) return float_of(sign | 0x7f800000u);
  if (magnitude > 0x7cu) return float_of(sign | 0x7fc00000u);
  float value = decode_magnitude(magnitude, kE5M2);
  return negative ? -value : value;
}

const float* fp8_decode_table(DType dtype) {
  require(dtype == DType::kF8E4M3 || dtype == DType::kF8E5M2, "dtype", dtype_name(dtype),
          "no fp8 decode table (expected fp8_e4m3 or fp8_e5m2)");
  return core::code_table(dtype);  // built from the decoders above
}

namespace {

// One code to f32 bits without a table, so loops over spans vectorize:
// normal magnitudes rebias the exponent and widen the mantissa; subnormal
// ones are mantissa * 2^(1 - bias - mantissa_bits), exact in f32.
// Selects are written as masks: with ?: the compiler sees control flow and
// gives up vectorizing.
inline uint32_t mask_if(bool condition) { return 0u - static_cast<uint32_t>(condition); }

inline float decode_e4m3_branchless(uint8_t code) {
  const uint32_t sign = static_cast<uint32_t>(code & 0x80u) << 24;
  const uint32_t magnitude = code & 0x7fu;
  const uint32_t normal = (magnitude << 20) + (120u << 23);
  const uint32_t subnormal = bits_of(static_cast<float>(static_cast<int32_t>(magnitude)) * 0x1p-9f);
  const uint32_t is_normal = mask_if(magnitude >= 8u);
  const uint32_t is_nan = mask_if(magnitude == 0x7fu);
  const uint32_t bits = (normal & is_normal) | (subnormal & ~is_normal);
  return float_of(sign | (bits & ~is_nan) | (0x7fc00000u & is_nan));
}

inline float decode_e5m2_branchless(uint8_t code) {
  const uint32_t sign = static_cast<uint32_t>(code & 0x80u) << 24;
  const uint32_t magnitude = code & 0x7fu;
  const uint32_t normal = (magnitude << 21) + (112u << 23);
  const uint32_t subnormal =
      bits_of(static_cast<float>(static_cast<int32_t>(magnitude)) * 0x1p-16f);
  const uint32_t is_normal = mask_if(magnitude >= 4u);
  // Infinities, and NaNs (quiet, as the table has them).
  const uint32_t is_special = mask_if(magnitude >= 0x7cu);
  const uint32_t special = 0x7f800000u | (0x00400000u & mask_if((magnitude & 3u) != 0));
  const uint32_t bits = (normal & is_normal) | (subnormal & ~is_normal);
  return float_of(sign | (bits & ~is_special) | (special & is_special));
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_ADDRESS__)
#define RAGGEMM_FP8_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define RAGGEMM_FP8_CLONES
#endif

template <float (*Decode)(uint8_t)>
inline void decode_loop(const uint8_t* src, int64_t count, float scale, const float* col_scales,
                        float* out) {
  if (col_scales) {
    for (int64_t j = 0; j < count; ++j) out[j] = Decode(src[j]) * scale * col_scales[j];
  } else {
    for (int64_t j = 0; j < count; ++j) out[j] = Decode(src[j]) * scale;
  }
}

RAGGEMM_FP8_CLONES void decode_e4m3_span(const uint8_t* src, int64_t count, float scale,
                                         const float* col_scales, float* out) {
  decode_loop<decode_e4m3_branchless>(src, count, scale, col_scales, out);
}

RAGGEMM_FP8_CLONES void decode_e5m2_span(const uint8_t* src, int64_t count, float scale,
                                         const float* col_scales, float* out) {
  decode_loop<decode_e5m2_branchless>(src, count, scale, col_scales, out);
}

// Encoding, branch-free: the normal path rebiases and rounds the f32 bits
// (nearest even), the subnormal path rounds magnitude * 2^(bias - 1 + m)
// with the 1.5 * 2^23 trick (exact below 2^22), then masks pick one, clamp
// to the largest finite code and put NaN back.
template <int kBias, int kMantissa, uint32_t kMaxCode, uint32_t kNanCode>
inline uint8_t encode_branchless(float value) {
  const uint32_t bits = bits_of(value);
  const uint32_t sign = (bits >> 24) & 0x80u;
  const uint32_t magnitude_bits = bits & 0x7fffffffu;
  constexpr int kShift = 23 - kMantissa;
  const uint32_t rebased = magnitude_bits - (static_cast<uint32_t>(127 - kBias) << 23);
  const uint32_t normal =
      (rebased + ((1u << (kShift - 1)) - 1u) + ((rebased >> kShift) & 1u)) >> kShift;
  constexpr float kSubnormalScale = static_cast<float>(1u << (kBias - 1 + kMantissa));
  constexpr uint32_t kMinNormalBits = static_cast<uint32_t>(127 + 1 - kBias) << 23;
  const uint32_t is_subnormal = mask_if(magnitude_bits < kMinNormalBits);
  // Only subnormal magnitudes enter the product (others become 0), so the
  // rounded value stays tiny and the conversion in range.
  const float scaled = float_of(magnitude_bits & is_subnormal) * kSubnormalScale;
  const uint32_t subnormal =
      static_cast<uint32_t>(static_cast<int32_t>((scaled + 12582912.0f) - 12582912.0f));
  uint32_t code = (subnormal & is_subnormal) | (normal & ~is_subnormal);
  // Past the max (and infinities): the largest finite code.
  const uint32_t too_big = mask_if(magnitude_bits >= 0x7f800000u) | mask_if(code > kMaxCode);
  code = (code & ~too_big) | (kMaxCode & too_big);
  const uint32_t is_nan = mask_if(magnitude_bits > 0x7f800000u);
  code = (code & ~is_nan) | (kNanCode & is_nan);
  return static_cast<uint8_t>(sign | code);
}

RAGGEMM_FP8_CLONES void encode_e4m3_span(const float* src, int64_t count, float divisor,
                                         uint8_t* out) {
  for (int64_t j = 0; j < count; ++j)
    out[j] = encode_branchless<7, 3, 0x7eu, 0x7fu>(src[j] / divisor);
}

RAGGEMM_FP8_CLONES void encode_e5m2_span(const float* src, int64_t count, float divisor,
                                         uint8_t* out) {
  for (int64_t j = 0; j < count; ++j)
    out[j] = encode_branchless<15, 2, 0x7bu, 0x7eu>(src[j] / divisor);
}

}  // namespace

void fp8_encode_span(DType dtype, const float* src, int64_t count, float divisor, uint8_t* out) {
  if (dtype == DType::kF8E4M3) {
    encode_e4m3_span(src, count, divisor, out);
  } else if (dtype == DType::kF8E5M2) {
    encode_e5m2_span(src, count, divisor, out);
  } else {
    fail("dtype", dtype_name(dtype), "not an fp8 type (expected fp8_e4m3 or fp8_e5m2)");
  }
}

void fp8_decode_span(DType dtype, const uint8_t* src, int64_t count, float scale,
                     const float* col_scales, float* out) {
  if (dtype == DType::kF8E4M3) {
    decode_e4m3_span(src, count, scale, col_scales, out);
  } else if (dtype == DType::kF8E5M2) {
    decode_e5m2_span(src, count, scale, col_scales, out);
  } else {
    fail("dtype", dtype_name(dtype), "not an fp8 type (expected fp8_e4m3 or fp8_e5m2)");
  }
}

uint8_t f32_to_fp8_e4m3(float value) {
  uint32_t bits = bits_of(value);
  uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7fu);  // NaN
  constexpr uint32_t kMaxCode = 0x7eu;                                    // 448
  if (abs_bits >= bits_of(kFp8E4M3Max)) return static_cast<uint8_t>(sign | kMaxCode);
  uint32_t code = round_magnitude(float_of(abs_bits), kE4M3);
  if (code > kMaxCode) code = kMaxCode;
  return static_cast<uint8_t>(sign | code);
}

uint8_t f32_to_fp8_e5m2(float value, bool saturate) {
  uint32_t bits = bits_of(value);
  uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7eu);  // quiet NaN
  constexpr uint32_t kMaxCode = 0x7bu;                                    // 57344
  constexpr uint32_t kInfCode = 0x7cu;
  if (abs_bits == 0x7f800000u) return static_cast<uint8_t>(sign | (saturate ? kMaxCode : kInfCode));
  uint32_t code;
  if (abs_bits >= bits_of(2.0f * kFp8E5M2Max)) {
    code = kInfCode;  // far past the max: avoid rounding near the f32 top
  } else {
    code = round_magnitude(float_of(abs_bits), kE5M2);
  }
  if (code > kMaxCode) code = saturate ? kMaxCode : kInfCode;
  return static_cast<uint8_t>(sign | code);
}

}  // namespace raggemm
