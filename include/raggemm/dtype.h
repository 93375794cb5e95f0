// Element types and the scalar conversions between them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace raggemm {

enum class DType : uint8_t {
  kF32,
  kBF16,
  kF16,
  kI32,
  kI64,
  kI8,
  kU8,
  kF8E4M3,  // fp8 e4m3fn, stored as its raw bit pattern
  kF8E5M2,  // fp8 e5m2, stored as its raw bit pattern
};
// How many DType values there are (0 .. kDTypeCount - 1): what each
// storage type is lives in one table, src/core/dtype_traits.{h,cc}.
inline constexpr int kDTypeCount = static_cast<int>(DType::kF8E5M2) + 1;

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);
// Parses the names dtype_name prints ("f32", "bf16", "f16", "i32", "i64", "i8",
// "u8", "fp8_e4m3", "fp8_e5m2"); throws Error naming `argument` otherwise.
DType parse_dtype(std::string_view name, const std::string& argument);

// bf16: round to nearest even; NaN stays NaN and becomes quiet.
uint16_t f32_to_bf16(float value);
inline float bf16_to_f32(uint16_t bits) {
  uint32_t widened = static_cast<uint32_t>(bits) << 16;
  float out;
  __builtin_memcpy(&out, &widened, sizeof(out));
  return out;
}

// IEEE binary16: round to nearest even, overflow to infinity, NaN kept quiet.
uint16_t f32_to_f16(float value);
float f16_to_f32(uint16_t bits);

}  // namespace raggemm
