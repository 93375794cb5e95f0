#include "raggemm/dtype.h"

#include <vector>

#include "core/dtype_traits.h"
#include "core/float_bits.h"
#include "raggemm/error.h"

namespace raggemm {
namespace {

using core::bits_of;
using core::float_of;

}  // namespace

// Byte-or-wider types only (sub-byte types, when there are any, are sized
// by the count of codes: core::dtype_traits(dtype).bits).
size_t dtype_size(DType dtype) { return static_cast<size_t>(core::dtype_traits(dtype).bits / 8); }

const char* dtype_name(DType dtype) { return core::dtype_traits(dtype).name; }

DType parse_dtype(std::string_view name, const std::string& argument) {
  for (const core::DTypeTraits& row : core::all_dtype_traits()) {
    if (name == row.name) return row.dtype;
  }
  std::vector<const char*> names;
  for (const core::DTypeTraits& row : core::all_dtype_traits()) names.push_back(row.name);
  fail(argument, std::string(name), "unknown dtype (expected " + core::or_list(names) + ")");
}

uint16_t f32_to_bf16(float value) { return core::bf16_bits_of(value); }

uint16_t f32_to_f16(float value) {
  uint32_t bits = bits_of(value);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) {  // NaN, quiet, keep top payload bits
    return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  }
  if (abs >= 0x477ff000u) {  // rounds to >= 65520: overflow to infinity
    return static_cast<uint16_t>(sign | 0x7c00u);
  }
  if (abs < 0x38800000u) {  // below the smallest normal half (2^-14): subnormal or zero
    // Value = abs_f * 2^24 units of the smallest subnormal; round to nearest even.
    float scaled = float_of(abs) * 16777216.0f;  // exact: power-of-two scale
    uint32_t whole = static_cast<uint32_t>(scaled);
    float frac = scaled - static_cast<float>(whole);
    if (frac > 0.5f || (frac == 0.5f && (whole & 1u))) ++whole;
    return static_cast<uint16_t>(sign | whole);
  }
  // Normal: rebias the exponent (127 -> 15) and round 23 -> 10 mantissa bits.
  uint32_t rebased = abs - (112u << 23);
  uint32_t rounding = 0xfffu + ((rebased >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rebased + rounding) >> 13));
}

float f16_to_f32(uint16_t half) {
  uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  uint32_t exponent = (half >> 10) & 0x1fu;
  uint32_t mantissa = half & 0x3ffu;
  if (exponent == 0x1f) return float_of(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    float magnitude = static_cast<float>(mantissa) * (1.0f / 16777216.0f);
    return sign ? -magnitude : magnitude;
  }
  return float_of(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

}  // namespace raggemm
