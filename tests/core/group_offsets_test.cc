// The one prefix sum of group sizes (core/group_offsets.h).
#include "core/group_offsets.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "raggemm/error.h"

namespace raggemm {
namespace {

TEST(GroupRowStarts, StartsAtZeroAndSumsIncludingEmptyGroups) {
  const std::vector<int32_t> sizes{3, 0, 2, 0};
  EXPECT_EQ(group_row_starts(sizes), (std::vector<int64_t>{0, 3, 3, 5, 5}));
  const std::vector<int64_t> sizes64{0, 7};
  EXPECT_EQ(group_row_starts(sizes64), (std::vector<int64_t>{0, 0, 7}));
  EXPECT_EQ(group_row_starts(std::vector<int32_t>{}), (std::vector<int64_t>{0}));
}

TEST(GroupRowStarts, ViewsOfBothIndexTypes) {
  const std::vector<int32_t> sizes{1, 2};
  const std::vector<int64_t> sizes64{4, 0, 1};
  EXPECT_EQ(group_row_starts(TensorView(DType::kI32, Shape{2}, sizes.data())),
            (std::vector<int64_t>{0, 1, 3}));
  EXPECT_EQ(group_row_starts(TensorView(DType::kI64, Shape{3}, sizes64.data())),
            (std::vector<int64_t>{0, 4, 4, 5}));
  const std::vector<float> wrong{1.0f};
  EXPECT_THROW(group_row_starts(TensorView(DType::kF32, Shape{1}, wrong.data())), Error);
}

TEST(GroupRowStarts, SaturatesInsteadOfOverflowing) {
  const int64_t big = std::numeric_limits<int64_t>::max() - 1;
  const std::vector<int64_t> sizes{big, big, 1};
  const std::vector<int64_t> starts = group_row_starts(sizes);
  EXPECT_EQ(starts[1], big);
  EXPECT_EQ(starts[2], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(starts[3], std::numeric_limits<int64_t>::max());
}

}  // namespace
}  // namespace raggemm
