// Whether hand-written SIMD code (intrinsics behind a CPU feature check: the
// fp8 decoder, the quantization encoders) may use a vector family now: the
// Highway dispatch of the f32 kernels has not been forced below it, so
// forcing Highway down to AVX2 (`raggemm bench --target AVX2`, or
// hwy::SetSupportedTargetsForTest in a test, at any time) moves every kernel
// of a pass to AVX2 together. Asked on every call (one dynamic-dispatch
// lookup, microkernel_registry.h); the rule itself is the registry's.
#pragma once

#include "kernels/microkernel_registry.h"

namespace raggemm::kernels {

inline bool avx512_family_allowed() { return family_allowed(VectorFamily::kAvx512); }
inline bool avx2_family_allowed() { return family_allowed(VectorFamily::kAvx2); }

}  // namespace raggemm::kernels
