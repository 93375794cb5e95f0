#include "kernels/macro_kernel.h"

#include <algorithm>

namespace raggemm::kernels {

void macro_kernel(const Microkernel& uk, int64_t kc, const float* a_packed, int64_t rows,
                  const float* b_packed, int64_t cols, float* c, int64_t ldc, bool accumulate,
                  int prefetch_depth, const NextSource& next, bool stream_stores) {
  const Store store = accumulate      ? Store::kAccumulate
                      : stream_stores ? Store::kStream
                                      : Store::kOverwrite;
  const int64_t a_panels = (rows + uk.mr - 1) / uk.mr;
  // Each call streams kc lines of `next`, starting on a row boundary.
  const int64_t row_lines = int64_t{1} << next.start.row_shift;
  const bool stream_next = next.start.base && kc % row_lines == 0;
  int64_t streamed = 0;  // lines of `next` handed out so far
  PrefetchStream stream = next.start;
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
      const PrefetchStream* call_stream = nullptr;
      if (stream_next && streamed < next.lines) {
        stream.base = next.start.base + (streamed >> next.start.row_shift) * next.start.row_stride;
        call_stream = &stream;
        streamed += kc;
      }
      uk.run(kc, a_packed + panel * uk.mr * kc, b, c + i * ldc + j, ldc, height, width,
             store, prefetch, call_stream);
    }
  }
}

}  // namespace raggemm::kernels
