// The work items and row zeroing shared by the group-aligned gmm drivers
// (kernels/group_items.h): every covered (row, column) is in exactly one
// item, no item straddles a group, and exactly the rows no local group
// covers are zeroed; over every empty/non-empty pattern of 4 groups, with
// rows past the groups (sum < M), a group offset (expert parallelism) and
// steps that divide nothing.
#include "kernels/group_items.h"

#include <gtest/gtest.h>

#include <vector>

namespace raggemm::kernels {
namespace {

TEST(GmmGroupItems, CoverEveryGroupRowAndColumnOnceAndZeroTheRest) {
  constexpr int64_t kLocal = 4, kOffset = 1, kCols = 23;
  for (int pattern = 0; pattern < (1 << kLocal); ++pattern) {
    // Global groups: one before the local ones, four local, one after.
    std::vector<int64_t> sizes = {3};
    for (int g = 0; g < kLocal; ++g) sizes.push_back((pattern >> g) & 1 ? 5 + 4 * g : 0);
    sizes.push_back(2);
    std::vector<int64_t> starts = {0};
    for (int64_t s : sizes) starts.push_back(starts.back() + s);
    const int64_t m = starts.back() + 3;  // rows past every group
    for (int64_t col_step : {int64_t{7}, kCols, int64_t{100}}) {
      SCOPED_TRACE(testing::Message() << "pattern " << pattern << " col_step " << col_step);
      const GroupItems made = group_items(starts.data(), kOffset, kLocal, /*rows_per_item=*/4,
                                          kCols, col_step, /*row_overhead=*/8);
      ASSERT_EQ(made.items.size(), made.costs.size());
      std::vector<int> hits(static_cast<size_t>(m * kCols), 0);
      for (size_t i = 0; i < made.items.size(); ++i) {
        const GroupItem& item = made.items[i];
        const int64_t begin = starts[kOffset + item.group], end = starts[kOffset + item.group + 1];
        EXPECT_GE(item.row_begin, begin);
        EXPECT_LE(item.row_end, end);
        EXPECT_LE(item.row_end - item.row_begin, 4);
        EXPECT_EQ(made.costs[i],
                  (item.row_end - item.row_begin + 8) * (item.col_end - item.col_begin));
        for (int64_t r = item.row_begin; r < item.row_end; ++r) {
          for (int64_t c = item.col_begin; c < item.col_end; ++c) ++hits[r * kCols + c];
        }
      }
      const int64_t first = starts[kOffset], last = starts[kOffset + kLocal];
      for (int64_t r = 0; r < m; ++r) {
        for (int64_t c = 0; c < kCols; ++c) {
          ASSERT_EQ(hits[r * kCols + c], r >= first && r < last ? 1 : 0) << r << "," << c;
        }
      }
      EXPECT_EQ(group_row_ranges(starts.data(), kOffset, kLocal, 4),
                col_step >= kCols ? static_cast<int64_t>(made.items.size())
                                  : static_cast<int64_t>(made.items.size()) / 4);
      std::vector<float> out(static_cast<size_t>(m * kCols), 1.0f);
      zero_uncovered_rows(starts.data(), kOffset, kLocal, m,
                          OutputView{out.data(), nullptr, kCols, false}, kCols);
      for (int64_t r = 0; r < m; ++r) {
        ASSERT_EQ(out[r * kCols], r >= first && r < last ? 1.0f : 0.0f) << r;
        ASSERT_EQ(out[r * kCols + kCols - 1], r >= first && r < last ? 1.0f : 0.0f) << r;
      }
    }
  }
}

TEST(GmmGroupItems, WholePanelsRoundsDownToAtLeastOnePanel) {
  EXPECT_EQ(whole_panels(100, 12), 96);
  EXPECT_EQ(whole_panels(96, 12), 96);
  EXPECT_EQ(whole_panels(5, 12), 12);
  EXPECT_EQ(whole_panels(0, 8), 8);
}

}  // namespace
}  // namespace raggemm::kernels
