// The bit pattern of an f32 and back, for the scalar dtype conversions
// (dtype.cc: bf16, f16; fp8.cc: fp8). constexpr and inline, so the
// branchless fp8 decode loops still vectorize.
#pragma once

#include <bit>
#include <cstdint>

namespace raggemm::core {

constexpr uint32_t bits_of(float value) { return std::bit_cast<uint32_t>(value); }

constexpr float float_of(uint32_t bits) { return std::bit_cast<float>(bits); }

// f32 -> bf16 bits, round to nearest even; NaN stays NaN (sign and top
// payload bits kept, quiet bit forced). The one definition f32_to_bf16
// (dtype.cc) calls; inline so that loops rounding whole buffers (the
// optimizer writing bf16 weights) vectorize.
constexpr uint16_t bf16_bits_of(float value) {
  const uint32_t bits = bits_of(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

}  // namespace raggemm::core
