// Whether hand-written SIMD code (intrinsics behind a CPUID check: the fp8
// decoder, the quantization encoders) may use a vector family: the CPU has
// it AND the Highway dispatch of the f32 kernels may use it, so forcing
// Highway down to AVX2 (`raggemm bench --target AVX2`, which does so before
// any kernel runs) moves every kernel of a pass to AVX2 together.
// Read once, at first use: hwy::SupportedTargets() detects the CPU on every
// call (called per decoded row, it made fp8 decoding 300x slower), so a
// target forced after that first use (hwy::SetSupportedTargetsForTest in a
// test) does not move these.
#pragma once

#include <hwy/targets.h>

namespace raggemm::kernels {

// 2: AVX-512 allowed, 1: AVX2, 0: neither.
inline int simd_family_allowed() {
  static const int level = [] {
    const int64_t targets = hwy::SupportedTargets();
    if (targets & (HWY_AVX3 | HWY_AVX3_DL)) return 2;
    if (targets & HWY_AVX2) return 1;
    return 0;
  }();
  return level;
}

inline bool avx512_family_allowed() { return simd_family_allowed() >= 2; }
inline bool avx2_family_allowed() { return simd_family_allowed() >= 1; }

}  // namespace raggemm::kernels
