#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/widen.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/widen.h"
#include "raggemm/dtype.h"

HWY_BEFORE_NAMESPACE();
namespace raggemm::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void WidenBf16(const uint16_t* src, int64_t count, float* dst) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du32;
  const hn::Rebind<uint16_t, decltype(du32)> du16;
  const auto lanes = static_cast<int64_t>(hn::Lanes(df));
  int64_t j = 0;
  // A bf16 value is the upper half of the f32 with the same bits.
  for (; j + lanes <= count; j += lanes) {
    const auto wide = hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, src + j)));
    hn::StoreU(hn::BitCast(df, wide), df, dst + j);
  }
  for (; j < count; ++j) dst[j] = bf16_to_f32(src[j]);
}

}  // namespace HWY_NAMESPACE
}  // namespace raggemm::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace raggemm::kernels {

HWY_EXPORT(WidenBf16);

void widen_bf16(const uint16_t* src, int64_t count, float* dst) {
  HWY_DYNAMIC_DISPATCH(WidenBf16)(src, count, dst);
}

}  // namespace raggemm::kernels
#endif  // HWY_ONCE
