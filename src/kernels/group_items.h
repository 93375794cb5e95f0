// The work items of the group-aligned gmm drivers (v2 on f32 panels, and the
// bf16 and int8 dot-product paths): each is (local group, a range of up to
// kRowTilesPerItem m-tiles of that group's rows counted from the group's
// first row, a range of output columns), so no item straddles a group and
// an item packs each k-slice of its B tile once for all of its m-tiles.
// Also the other steps those drivers share: zeroing the rows no local group
// covers, and rounding tiles to whole micro-panels.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/output_store.h"

namespace raggemm::kernels {

constexpr int64_t kRowTilesPerItem = 4;

struct GroupItem {
  int64_t group;  // local group index
  int64_t row_begin, row_end;
  int64_t col_begin, col_end;  // output columns
  int64_t rows() const { return row_end - row_begin; }
  int64_t cols() const { return col_end - col_begin; }
};

struct GroupItems {
  std::vector<GroupItem> items;
  std::vector<int64_t> costs;  // for parallel_items
};

// Local groups 0 .. local_groups-1 have rows starts[group_offset + g] ..
// starts[group_offset + g + 1]. Items: rows_per_item rows of a group at a
// time, times column ranges of col_step over [0, cols); each costs
// (rows + row_overhead) * columns (row_overhead: work an item does whatever
// its rows, such as packing its B slice).
GroupItems group_items(const int64_t* starts, int64_t group_offset, int64_t local_groups,
                       int64_t rows_per_item, int64_t cols, int64_t col_step, int64_t row_overhead);

// How many row ranges of rows_per_item the local groups make (one column
// range).
int64_t group_row_ranges(const int64_t* starts, int64_t group_offset, int64_t local_groups,
                         int64_t rows_per_item);

// Zero-fills the output rows that no local group covers (rows before the
// first local group's and from the last one's end to m), `cols` columns a
// row, through the output's store stage: bf16 zeros for a bf16 output, and
// nothing when accumulating (out + 0 leaves those rows as they were).
void zero_uncovered_rows(const int64_t* starts, int64_t group_offset, int64_t local_groups,
                         int64_t m, const OutputView& out, int64_t cols);

// A tile extent rounded down to whole micro-panels of `panel` (at least one).
inline int64_t whole_panels(int64_t tile, int panel) {
  return std::max<int64_t>(panel, tile / panel * panel);
}

}  // namespace raggemm::kernels
