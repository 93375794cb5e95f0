// Per-target inline helper, included by files compiled once per Highway
// target (foreach_target.h): one vector of bf16 values loaded as f32. A bf16
// value is the upper half of the f32 with the same bits, so widening is a
// zero-extension and a 16-bit shift. Shared by the bf16 panel widening
// (widen.cc) and the bf16 row interleave (interleave.cc).

// Highway's per-target include guard: toggled for each target's pass.
#if defined(RAGGEMM_KERNELS_BF16_LANES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef RAGGEMM_KERNELS_BF16_LANES_INL_H_
#undef RAGGEMM_KERNELS_BF16_LANES_INL_H_
#else
#define RAGGEMM_KERNELS_BF16_LANES_INL_H_
#endif

#include <hwy/highway.h>

#include <cstdint>

HWY_BEFORE_NAMESPACE();
namespace raggemm::kernels {
namespace HWY_NAMESPACE {

// Lanes(df) bf16 values from `p` (unaligned), as f32.
template <class DF>
HWY_INLINE hwy::HWY_NAMESPACE::Vec<DF> LoadBf16AsF32(DF df, const uint16_t* p) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::RebindToUnsigned<DF> du32;
  const hn::Rebind<uint16_t, DF> du16;
  return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, p))));
}

}  // namespace HWY_NAMESPACE
}  // namespace raggemm::kernels
HWY_AFTER_NAMESPACE();

#endif  // RAGGEMM_KERNELS_BF16_LANES_INL_H_
