#include "kernels/group_items.h"

#include <cstring>

namespace raggemm::kernels {

GroupItems group_items(const int64_t* starts, int64_t group_offset, int64_t local_groups,
                       int64_t rows_per_item, int64_t cols, int64_t col_step,
                       int64_t row_overhead) {
  GroupItems out;
  const int64_t step = std::max<int64_t>(col_step, 1);
  for (int64_t g = 0; g < local_groups; ++g) {
    const int64_t begin = starts[group_offset + g];
    const int64_t end = starts[group_offset + g + 1];
    for (int64_t r = begin; r < end; r += rows_per_item) {
      for (int64_t c = 0; c < cols; c += step) {
        const GroupItem item{g, r, std::min(end, r + rows_per_item), c, std::min(cols, c + step)};
        out.items.push_back(item);
        out.costs.push_back((item.rows() + row_overhead) * item.cols());
      }
    }
  }
  return out;
}

int64_t group_row_ranges(const int64_t* starts, int64_t group_offset, int64_t local_groups,
                         int64_t rows_per_item) {
  int64_t ranges = 0;
  for (int64_t g = 0; g < local_groups; ++g) {
    const int64_t rows = starts[group_offset + g + 1] - starts[group_offset + g];
    ranges += (rows + rows_per_item - 1) / rows_per_item;
  }
  return ranges;
}

void zero_uncovered_rows(const int64_t* starts, int64_t group_offset, int64_t local_groups,
                         int64_t m, const OutputView& out, int64_t cols) {
  const int64_t first = starts[group_offset];
  const int64_t last = starts[group_offset + local_groups];
  if (first > 0) out.zero(0, 0, first, cols);
  if (m > last) out.zero(last, 0, m - last, cols);
}

}  // namespace raggemm::kernels
