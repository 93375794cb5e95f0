#include "ops/validate.h"

#include <algorithm>
#include <limits>

#include "core/group_offsets.h"
#include "raggemm/error.h"

// Every check is `if (!ok) fail(...)` rather than require(...): the value and
// message strings are then built only on failure, not on every call of a hot
// op.
namespace raggemm::ops {

void check_tensor(const TensorView& view, const std::string& argument, int rank,
                  std::initializer_list<DType> dtypes) {
  if (view.rank() != rank) {
    fail(argument, shape_string(view.shape), "expected rank " + std::to_string(rank));
  }
  if (std::find(dtypes.begin(), dtypes.end(), view.dtype) == dtypes.end()) {
    std::string allowed;
    for (DType d : dtypes) allowed += std::string(allowed.empty() ? "" : ", ") + dtype_name(d);
    fail(argument, dtype_name(view.dtype), "unsupported dtype (expected " + allowed + ")");
  }
  const int64_t count = checked_numel(view.shape, argument);
  if (view.strides.size() != view.shape.size() || !view.is_contiguous()) {
    fail(argument, "strides " + shape_string(view.strides), "must be row-major contiguous");
  }
  if (count != 0 && view.data == nullptr) fail(argument, "null", "data is null");
  // Byte offsets must fit in int64 as well.
  if (count > std::numeric_limits<int64_t>::max() / 8) {
    fail(argument, shape_string(view.shape), "too many elements");
  }
}

void check_dim(const TensorView& view, const std::string& argument, int axis, int64_t expected,
               const std::string& what) {
  if (view.dim(axis) != expected) {
    fail(
        argument, shape_string(view.shape),
        "dim " + std::to_string(axis) + " must be " + std::to_string(expected) + " (" + what + ")");
  }
}

std::vector<int64_t> check_group_sizes(const TensorView& group_sizes, int64_t m) {
  check_tensor(group_sizes, "group_sizes", 1, {DType::kI32, DType::kI64});
  const int64_t groups = group_sizes.dim(0);
  if (groups < 1) fail("group_sizes", shape_string(group_sizes.shape), "needs at least one group");
  std::vector<int64_t> starts = group_row_starts(group_sizes);
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t size = group_sizes.dtype == DType::kI32 ? group_sizes.as<const int32_t>()[g]
                                                          : group_sizes.as<const int64_t>()[g];
    if (size < 0) fail("group_sizes[" + std::to_string(g) + "]", to_display(size), "must be >= 0");
    // starts saturate at INT64_MAX, so a sum that would overflow exceeds m here.
    if (starts[g + 1] > m) {
      fail("group_sizes", "sum > " + std::to_string(m),
           "sum of group sizes exceeds the " + std::to_string(m) + " rows (at group " +
               std::to_string(g) + ", size " + std::to_string(size) + ")");
    }
  }
  return starts;
}

void check_tiles(const Tiles& tiles, const std::string& argument) {
  if (tiles == Tiles{}) return;  // unset: the op picks every field
  const std::string why = tile_limit_violation(tiles);
  if (!why.empty()) {
    fail(argument,
         std::to_string(tiles.m) + "," + std::to_string(tiles.k) + "," + std::to_string(tiles.n),
         why);
  }
}

void check_threads(int threads, const std::string& argument) {
  if (threads < 0 || threads > 1024) {
    fail(argument, to_display(threads), "must be in 0..1024 (0: default)");
  }
}

void check_buffer_count(int input_buffer_count, const std::string& argument) {
  if (input_buffer_count < 1 || input_buffer_count > 4) {
    fail(argument, to_display(input_buffer_count), "must be in 1..4");
  }
}

void check_out_dtype(DType out_dtype) {
  if (out_dtype != DType::kF32 && out_dtype != DType::kBF16) {
    fail("out_dtype", dtype_name(out_dtype), "unsupported output dtype (expected f32 or bf16)");
  }
}

void check_out_tensor(const TensorView& out, int rank, DType out_dtype) {
  check_tensor(out, "out", rank, {DType::kF32, DType::kBF16});
  if (out.dtype != out_dtype) {
    fail("out", dtype_name(out.dtype),
         std::string("dtype must match out_dtype = ") + dtype_name(out_dtype));
  }
}

int64_t check_local_groups(int64_t group_offset, int64_t local_groups, int64_t total_groups,
                           int64_t rhs_groups, const std::string& rhs_argument) {
  if (local_groups < 0) {
    if (local_groups != -1) fail("local_groups", to_display(local_groups), "must be -1 or >= 0");
    if (group_offset != 0) {
      fail("group_offset", to_display(group_offset), "must be 0 unless local_groups is set");
    }
    if (rhs_groups != total_groups) {
      fail(rhs_argument, to_display(rhs_groups),
           "number of groups must equal len(group_sizes) = " + std::to_string(total_groups));
    }
    return total_groups;
  }
  if (group_offset < 0 || group_offset > total_groups) {
    fail("group_offset", to_display(group_offset), "must be in 0.." + std::to_string(total_groups));
  }
  if (local_groups > total_groups - group_offset) {
    fail("local_groups", to_display(local_groups),
         "group_offset + local_groups exceeds len(group_sizes) = " + std::to_string(total_groups));
  }
  if (rhs_groups != local_groups) {
    fail(rhs_argument, to_display(rhs_groups),
         "number of groups must equal local_groups = " + std::to_string(local_groups));
  }
  return local_groups;
}

TgmmShape check_tgmm_args(const TensorView& lhs, const TensorView& dout,
                          const TensorView& group_sizes, const TgmmOptions& o) {
  check_tensor(lhs, "lhs", 2, {DType::kF32, DType::kBF16, DType::kF16});
  check_tensor(dout, "dout", 2, {DType::kF32, DType::kBF16, DType::kF16});
  TgmmShape s;
  s.m = lhs.dim(0);
  s.k = lhs.dim(1);
  check_dim(dout, "dout", 0, s.m, "rows of lhs");
  s.n = dout.dim(1);
  s.starts = check_group_sizes(group_sizes, s.m);
  const int64_t total = group_sizes.dim(0);
  const int64_t local = o.local_groups < 0 ? total : o.local_groups;
  s.local_groups = check_local_groups(o.group_offset, o.local_groups, total, local, "out");
  check_tiles(o.tiles, "tiles");
  check_threads(o.threads, "threads");
  check_buffer_count(o.input_buffer_count, "input_buffer_count");
  check_out_dtype(o.out_dtype);
  checked_numel({s.local_groups, s.k, s.n}, "out");
  return s;
}

}  // namespace raggemm::ops
