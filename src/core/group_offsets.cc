#include "core/group_offsets.h"

#include <limits>

#include "raggemm/error.h"

namespace raggemm {
namespace {

template <class Size>
std::vector<int64_t> prefix_sum(const Size* sizes, size_t groups) {
  std::vector<int64_t> starts(groups + 1, 0);
  for (size_t g = 0; g < groups; ++g) {
    int64_t next;
    if (__builtin_add_overflow(starts[g], static_cast<int64_t>(sizes[g]), &next)) {
      next = sizes[g] < 0 ? std::numeric_limits<int64_t>::min()
                          : std::numeric_limits<int64_t>::max();
    }
    starts[g + 1] = next;
  }
  return starts;
}

}  // namespace

std::vector<int64_t> group_row_starts(std::span<const int32_t> group_sizes) {
  return prefix_sum(group_sizes.data(), group_sizes.size());
}

std::vector<int64_t> group_row_starts(std::span<const int64_t> group_sizes) {
  return prefix_sum(group_sizes.data(), group_sizes.size());
}

std::vector<int64_t> group_row_starts(const TensorView& group_sizes) {
  require(group_sizes.rank() == 1, "group_sizes", shape_string(group_sizes.shape),
          "must be rank 1 [G]");
  const size_t groups = static_cast<size_t>(group_sizes.dim(0));
  switch (group_sizes.dtype) {
    case DType::kI32:
      return prefix_sum(static_cast<const int32_t*>(group_sizes.data), groups);
    case DType::kI64:
      return prefix_sum(static_cast<const int64_t*>(group_sizes.data), groups);
    default:
      fail("group_sizes", dtype_name(group_sizes.dtype), "must be i32 or i64");
  }
}

}  // namespace raggemm
