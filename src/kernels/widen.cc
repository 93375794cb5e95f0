#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/widen.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>

#include "kernels/bf16_lanes-inl.h"
#include "kernels/widen.h"
#include "raggemm/dtype.h"

HWY_BEFORE_NAMESPACE();
namespace raggemm::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void WidenBf16(const uint16_t* src, int64_t count, float* dst) {
  const hn::ScalableTag<float> df;
  const auto lanes = static_cast<int64_t>(hn::Lanes(df));
  int64_t j = 0;
  for (; j + lanes <= count; j += lanes) hn::StoreU(LoadBf16AsF32(df, src + j), df, dst + j);
  for (; j < count; ++j) dst[j] = bf16_to_f32(src[j]);
}

// Rows of bf16 straight into packed B micro-panels: row p's columns
// [panel * nr, panel * nr + nr) go to dst + panel * nr * rows + p * nr, the
// last panel zero-padded. One pass, no f32 staging line.
//
// Whole panels go panel by panel, each row's nr values widened inline: the
// panel is written front to back, and there is no call per row (calling
// WidenBf16 for every 32 values made bf16 B packing about 1.5x as slow per
// byte written as f32's memcpy, and bf16 gmm at 128 groups of 32 rows 0.8x f32).
void WidenBf16Panels(const uint16_t* src, int64_t ld, int64_t rows, int64_t cols, int64_t nr,
                     float* dst) {
  const hn::ScalableTag<float> df;
  const auto lanes = static_cast<int64_t>(hn::Lanes(df));
  int64_t whole = 0;  // panels done by the inline loop
  if (nr % lanes == 0) {
    whole = cols / nr;
    for (int64_t panel = 0; panel < whole; ++panel) {
      const uint16_t* column = src + panel * nr;
      float* out = dst + panel * nr * rows;
      for (int64_t p = 0; p < rows; ++p, out += nr) {
        const uint16_t* row = column + p * ld;
        for (int64_t j = 0; j < nr; j += lanes) hn::StoreU(LoadBf16AsF32(df, row + j), df, out + j);
      }
    }
  }
  const int64_t panels = (cols + nr - 1) / nr;
  if (whole == panels) return;
  for (int64_t p = 0; p < rows; ++p) {
    const uint16_t* row = src + p * ld;
    for (int64_t panel = whole; panel < panels; ++panel) {
      const int64_t c0 = panel * nr;
      const int64_t width = std::min(nr, cols - c0);
      float* out = dst + panel * nr * rows + p * nr;
      WidenBf16(row + c0, width, out);
      for (int64_t j = width; j < nr; ++j) out[j] = 0.0f;
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace raggemm::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace raggemm::kernels {

HWY_EXPORT(WidenBf16);
HWY_EXPORT(WidenBf16Panels);

void widen_bf16(const uint16_t* src, int64_t count, float* dst) {
  HWY_DYNAMIC_DISPATCH(WidenBf16)(src, count, dst);
}

void widen_bf16_panels(const uint16_t* src, int64_t ld, int64_t rows, int64_t cols, int nr,
                       float* dst) {
  HWY_DYNAMIC_DISPATCH(WidenBf16Panels)(src, ld, rows, cols, nr, dst);
}

}  // namespace raggemm::kernels
#endif  // HWY_ONCE
