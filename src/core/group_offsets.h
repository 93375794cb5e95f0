// The row range of every group: the prefix sum of group_sizes, written once.
//
// Tokens are sorted by group, so group g owns rows starts[g] .. starts[g+1]
// (DESIGN.md s.1); starts has G + 1 entries and starts[0] = 0. Every layer
// that walks groups (validation, kernels' callers, the MoE oracle, the tune
// equivalence check, the CLI's peers) asks here instead of summing again.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "raggemm/tensor.h"

namespace raggemm {

// No validation: a negative size is summed as it is (validate first where
// sizes come from users). A running sum past INT64_MAX is held at INT64_MAX
// rather than overflowing, so a caller that compares starts with a row count
// sees the sum exceed it at the right group.
std::vector<int64_t> group_row_starts(std::span<const int32_t> group_sizes);
std::vector<int64_t> group_row_starts(std::span<const int64_t> group_sizes);
// A rank-1 i32 or i64 view (throws Error naming "group_sizes" otherwise).
std::vector<int64_t> group_row_starts(const TensorView& group_sizes);

}  // namespace raggemm
