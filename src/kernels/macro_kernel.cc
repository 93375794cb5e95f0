#include "kernels/macro_kernel.h"

#include <algorithm>

namespace raggemm::kernels {

void macro_kernel(const Microkernel& uk, int64_t kc, const float* a_packed, int64_t rows,
                  const float* b_packed, int64_t cols, float* c, int64_t ldc, bool accumulate,
                  int prefetch_depth) {
  const int64_t a_panels = (rows + uk.mr - 1) / uk.mr;
  for (int64_t j = 0; j < cols; j += uk.nr) {
    const float* b = b_packed + (j / uk.nr) * uk.nr * kc;
    const int width = static_cast<int>(std::min<int64_t>(uk.nr, cols - j));
    for (int64_t panel = 0; panel < a_panels; ++panel) {
      const int64_t i = panel * uk.mr;
      const int height = static_cast<int>(std::min<int64_t>(uk.mr, rows - i));
      const float* prefetch = nullptr;
      if (prefetch_depth > 0 && panel + prefetch_depth < a_panels) {
        prefetch = a_packed + (panel + prefetch_depth) * uk.mr * kc;
      }
      uk.run(kc, a_packed + panel * uk.mr * kc, b, c + i * ldc + j, ldc, height, width,
             accumulate, prefetch);
    }
  }
}

}  // namespace raggemm::kernels
