#include "kernels/macro_kernel.h"

#include <algorithm>

#include "kernels/row_panels.h"

namespace raggemm::kernels {
namespace {

// Streamed tiles of a contraction this short are bound by their stores: a
// 12 x 32 tile's 1.5 KB takes one core about 65 ns to stream (23 GB/s) and
// its FMAs about 3 ns per k step (about 250 GFLOP/s), so below about 22
// steps the stores dominate; with the row-band order (31-33 GB/s) below
// about 16.
constexpr int64_t kRowBandMaxDepth = 16;

}  // namespace

int stream_lines_per_step(int64_t lines, int64_t steps) {
  if (lines <= 0 || steps <= 0) return 0;
  return static_cast<int>(std::max<int64_t>(1, (lines + steps - 1) / steps));
}

void macro_kernel(const Microkernel& uk, int64_t kc, const float* a_packed, int64_t rows,
                  const float* b_packed, int64_t cols, float* c, int64_t ldc, bool accumulate,
                  int prefetch_depth, const NextSource& next, bool stream_stores,
                  const BSource& b_source) {
  const Store store = accumulate      ? Store::kAccumulate
                      : stream_stores ? Store::kStream
                                      : Store::kOverwrite;
  const RowPanels split = row_panels(rows, uk.mr);  // how pack_a dealt the rows
  // One register tile: A micro-panel `panel` times B micro-panel j / nr. With
  // b_source, the first A micro-panel packs each B micro-panel as it reads it.
  auto tile = [&](int64_t panel, int64_t j, int width, const float* prefetch,
                  const PrefetchStream* call_stream) {
    const float* a = a_packed + panel * uk.mr * kc;
    const int64_t b_offset = (j / uk.nr) * uk.nr * kc;
    float* cp = c + split.first_row(panel) * ldc + j;
    if (b_source.data && panel == 0) {
      uk.run_packing_b(kc, a, b_source.data + j, b_source.ld, b_source.packed + b_offset, cp, ldc,
                       split.rows(panel), store, prefetch, call_stream);
    } else {
      uk.run(kc, a, b_packed + b_offset, cp, ldc, split.rows(panel), width, store, prefetch,
             call_stream);
    }
  };
  if (store == Store::kStream && kc <= kRowBandMaxDepth) {
    // Streamed C with a short contraction (a tgmm group of a few tokens) is
    // bound by its stores, not by B's reuse: tiles go along the rows, so the
    // stores fill MR rows left to right instead of walking down an NR-wide
    // strip of rows N floats apart (one core: 31-33 GB/s against 23).
    for (int64_t panel = 0; panel < split.count; ++panel) {
      for (int64_t j = 0; j < cols; j += uk.nr) {
        tile(panel, j, static_cast<int>(std::min<int64_t>(uk.nr, cols - j)), nullptr, nullptr);
      }
    }
    return;
  }
  const int64_t a_panels = split.count;
  const int64_t b_panels = (cols + uk.nr - 1) / uk.nr;
  PrefetchStream stream = next.start;
  stream.lines_per_step = stream_lines_per_step(next.lines, a_panels * b_panels * kc);
  stream.end_line = next.lines;
  const bool stream_next = next.start.base && stream.lines_per_step > 0;
  int64_t streamed = 0;  // lines of `next` handed out so far
  for (int64_t j = 0; j < cols; j += uk.nr) {
    const int width = static_cast<int>(std::min<int64_t>(uk.nr, cols - j));
    for (int64_t panel = 0; panel < a_panels; ++panel) {
      const float* prefetch = nullptr;
      if (prefetch_depth > 0 && panel + prefetch_depth < a_panels) {
        prefetch = a_packed + (panel + prefetch_depth) * uk.mr * kc;
      }
      const PrefetchStream* call_stream = nullptr;
      if (stream_next && streamed < next.lines) {
        stream.first_line = streamed;
        call_stream = &stream;
        streamed += kc * stream.lines_per_step;
      }
      tile(panel, j, width, prefetch, call_stream);
    }
  }
}

}  // namespace raggemm::kernels
