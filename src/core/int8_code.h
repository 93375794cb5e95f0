// The int8 code of a scaled value, the one definition the quantizer's
// portable loops use (core's encoder hook, ops/quant.cc, ops/int8_encode.cc):
//   code = round_half_even(clamp(scaled, -127, 127))
// Symmetric: -128 is never written, so negating a code never overflows.
#pragma once

#include <algorithm>
#include <cstdint>

namespace raggemm::core {

inline constexpr float kInt8CodeMax = 127.0f;

// Round half to even for |x| <= 2^22: adding and subtracting 1.5 * 2^23
// leaves the nearest integer under the default rounding mode (not folded:
// IEEE arithmetic without -ffast-math).
inline float round_half_even(float x) {
  constexpr float kMagic = 12582912.0f;
  return (x + kMagic) - kMagic;
}

inline int8_t int8_code(float scaled) {
  const float clamped = std::min(kInt8CodeMax, std::max(-kInt8CodeMax, scaled));
  return static_cast<int8_t>(round_half_even(clamped));
}

}  // namespace raggemm::core
