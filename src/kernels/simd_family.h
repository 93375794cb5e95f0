// Whether hand-written SIMD code (intrinsics behind a CPUID check: the int8
// microkernels, the fp8 decoder, the quantization encoders) may use a
// vector family now: the CPU has it AND the Highway dispatch of the f32
// kernels may use it, so forcing Highway down to AVX2
// (hwy::SetSupportedTargetsForTest, `raggemm bench --target AVX2`) moves
// every kernel of a pass to AVX2 together.
#pragma once

#include <hwy/targets.h>

namespace raggemm::kernels {

inline bool avx512_family_allowed() {
  return (hwy::SupportedTargets() & (HWY_AVX3 | HWY_AVX3_DL)) != 0;
}

inline bool avx2_family_allowed() {
  return (hwy::SupportedTargets() & (HWY_AVX2 | HWY_AVX3 | HWY_AVX3_DL)) != 0;
}

}  // namespace raggemm::kernels
