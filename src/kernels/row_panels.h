// How the rows of a packed A block are dealt into micro-panels of at most MR
// rows (docs/kernels.md, "Packed layouts"): as many panels as MR-row panels
// would take, ceil(rows / MR), with the rows spread as evenly over them as
// they go (the first panels one row taller), instead of full panels and a
// short last one.
//
// Why: a register tile of R rows keeps 2R accumulator chains (two vectors
// per row), and the FMA units need latency x pipes of them in flight (4 x 2
// on the x86 cores of docs/performance.md) to run at full rate; a tile of
// fewer than four rows stalls on its own chains. A 32-row group tiled 6 x 6
// rows on AVX2 was five full tiles and a 2-row one at under half speed;
// dealt evenly it is 6, 6, 5, 5, 5, 5, all at full rate. Microkernel calls
// over a 32-row x 64-column x 256-deep block, all in cache (Zen 3, one
// thread): 81-91 GFLOP/s dealt MR-first, 96-97 dealt evenly.
//
// The split changes which rows share a register tile, never an element's
// summation (the microkernel contract), so results are bit-identical.
#pragma once

#include <algorithm>
#include <cstdint>

namespace raggemm::kernels {

struct RowPanels {
  int64_t count = 0;   // panels
  int64_t base = 0;    // rows of the shorter panels
  int64_t taller = 0;  // the first `taller` panels hold base + 1 rows

  int64_t first_row(int64_t panel) const { return panel * base + std::min(panel, taller); }
  int rows(int64_t panel) const { return static_cast<int>(base + (panel < taller ? 1 : 0)); }
};

inline RowPanels row_panels(int64_t rows, int mr) {
  if (rows <= 0) return {};
  const int64_t count = (rows + mr - 1) / mr;
  return {count, rows / count, rows % count};
}

}  // namespace raggemm::kernels
