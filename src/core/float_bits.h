// The bit pattern of an f32 and back, for the scalar dtype conversions
// (dtype.cc: bf16, f16; fp8.cc: fp8). constexpr and inline, so the
// branchless fp8 decode loops still vectorize.
#pragma once

#include <bit>
#include <cstdint>

namespace raggemm::core {

constexpr uint32_t bits_of(float value) { return std::bit_cast<uint32_t>(value); }

constexpr float float_of(uint32_t bits) { return std::bit_cast<float>(bits); }

}  // namespace raggemm::core
