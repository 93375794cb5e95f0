#include "ops/validate.h"

#include <algorithm>
#include <array>
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

namespace {

constexpr std::initializer_list<DType> kFloatTypes = {DType::kF32, DType::kBF16, DType::kF16};

// A quantized operand: codes of its type's storage dtype, f32 scales of the
// shape its granularity gives the codes' shape.
void check_quantized(const backends::GmmOperand& op, const std::string& argument, int rank) {
  const backends::OperandScales& q = *op.quant;
  check_tensor(op.values, argument, rank, {quant_storage_dtype(q.type)});
  check_tensor(q.scales, argument + ".scales", rank, {DType::kF32});
  const Shape expected = q.granularity.scale_shape(op.values.shape, argument);
  if (q.scales.shape != expected) {
    fail(argument + ".scales", shape_string(q.scales.shape),
         "granularity " + q.granularity.to_string() + " needs " + shape_string(expected));
  }
}

void check_operand(const backends::GmmOperand& op, const std::string& argument, int rank) {
  if (op.quantized()) {
    check_quantized(op, argument, rank);
  } else {
    check_tensor(op.values, argument, rank, kFloatTypes);
  }
}

// A per-column output-stage vector: f32 [N] (shared) or [G_rhs, N].
void check_column_vector(const std::optional<TensorView>& v, const std::string& argument,
                         int64_t groups, int64_t n, const std::string& groups_what,
                         const std::string& columns_what) {
  if (!v) return;
  if (v->rank() != 1 && v->rank() != 2) fail(argument, shape_string(v->shape), "expected [N] or [G, N]");
  check_tensor(*v, argument, v->rank(), {DType::kF32});
  if (v->rank() == 1) {
    check_dim(*v, argument, 0, n, columns_what);
  } else {
    check_dim(*v, argument, 0, groups, groups_what);
    check_dim(*v, argument, 1, n, columns_what);
  }
}

void validate_tgmm(backends::GmmSpec& s, const CallSettings& c, int threads) {
  check_operand(s.lhs, "lhs", 2);
  check_operand(s.rhs, "dout", 2);
  for (const auto& [op, name] : {std::pair{&s.lhs, "lhs"}, std::pair{&s.rhs, "dout"}}) {
    if (op->quant && op->quant->granularity.has_block()) {
      fail(name, op->quant->granularity.to_string(), "tgmm takes per-tensor or per-channel scales, not blocks");
    }
  }
  const int64_t m = s.lhs.values.dim(0);
  check_dim(s.rhs.values, "dout", 0, m, "rows of lhs");
  const std::vector<int64_t> starts = check_group_sizes(s.group_sizes, m);
  const int64_t total = s.group_sizes.dim(0);
  const int64_t local = s.local_groups < 0 ? total : s.local_groups;
  check_local_groups(s.group_offset, s.local_groups, total, local, "out");
  check_tiles(c.tiles, "tiles");
  check_threads(threads, "threads");
  check_buffer_count(c.input_buffer_count, "input_buffer_count");
  check_out_dtype(c.out_dtype);
  checked_numel({local, s.lhs.values.dim(1), s.rhs.values.dim(1)}, "out");
}

void validate_gmm(backends::GmmSpec& s, const CallSettings& c, int threads) {
  const bool quantized = s.rhs.quantized();
  const std::string rhs = quantized ? "weight" : "rhs";
  check_operand(s.lhs, "lhs", 2);
  check_operand(s.rhs, rhs, 3);
  if (quantized && s.rhs.quant->granularity.has_block() && s.rhs.quant->granularity.block_axis != 1) {
    fail(rhs, s.rhs.quant->granularity.to_string(), "weight blocks must lie along K (axis 1)");
  }
  const int64_t m = s.lhs.values.dim(0), k = s.lhs.values.dim(1);
  const bool transpose = s.transpose_rhs();
  const char* layout = quantized ? (transpose ? "N of dout, the weight is [G,K,N] read transposed"
                                             : "K of lhs, the weight is [G,K,N]")
                                 : (transpose ? "K of lhs, rhs is [G,N,K] with transpose_rhs"
                                              : "K of lhs, rhs is [G,K,N]");
  check_dim(s.rhs.values, rhs, transpose ? 2 : 1, k, layout);
  const int64_t n = s.rhs.values.dim(transpose ? 1 : 2);
  check_group_sizes(s.group_sizes, m);
  check_local_groups(s.group_offset, s.local_groups, s.group_sizes.dim(0), s.rhs.values.dim(0), rhs);
  check_tiles(c.tiles, "tiles");
  check_threads(threads, "threads");
  check_buffer_count(c.input_buffer_count, "input_buffer_count");
  check_out_dtype(c.out_dtype);
  if (c.kernel == KernelVersion::kV1 && s.staged()) {
    fail("kernel", "v1",
         "the fused output stage (fuse_swiglu, col_scale, col_bias, row_scale) needs kernel v2");
  }
  if (s.fuse_swiglu && n % 2 != 0) {
    fail(rhs, shape_string(s.rhs.values.shape),
         "fuse_swiglu needs an even number of columns (gate|up halves)");
  }
  if (s.row_scale) {
    check_tensor(*s.row_scale, "row_scale", 1, {DType::kF32});
    check_dim(*s.row_scale, "row_scale", 0, m, "rows of lhs");
  }
  const int64_t rhs_groups = s.rhs.values.dim(0);
  const std::string groups_what = quantized ? "weight groups" : "rhs groups";
  const std::string columns_what = quantized ? "weight columns" : "rhs columns";
  check_column_vector(s.col_scale, "col_scale", rhs_groups, n, groups_what, columns_what);
  check_column_vector(s.col_bias, "col_bias", rhs_groups, n, groups_what, columns_what);
  if (quantized && s.rhs.quant->granularity.has_block() && c.kernel == KernelVersion::kV1) {
    fail("kernel", kernel_name(c.kernel),
         "block-wise weight scales (" + s.rhs.quant->granularity.to_string() + ") need kernel v2");
  }
  // lhs blocks: along K, in the forward pass, on v2 (what the kernels read).
  if (s.lhs.quant && s.lhs.quant->granularity.has_block()) {
    const Granularity& g = s.lhs.quant->granularity;
    if (transpose || g.block_axis != 1) {
      fail("lhs", g.to_string(), "lhs scales in blocks exist along K in the forward pass only");
    }
    if (c.kernel == KernelVersion::kV1) {
      fail("kernel", kernel_name(c.kernel), "lhs scales per K-block (" + g.to_string() + ") need kernel v2");
    }
  }
}

// Whether two views' bytes overlap.
bool overlap(const TensorView& a, const TensorView& b) {
  const auto* a0 = static_cast<const char*>(a.data);
  const auto* b0 = static_cast<const char*>(b.data);
  return a.nbytes() > 0 && b.nbytes() > 0 && a0 < b0 + b.nbytes() && b0 < a0 + a.nbytes();
}

// The SwiGLU stage (raggemm/swiglu_stage.h): f32 [M, N_out] tensors, an f32
// output written, not accumulated, and outputs that overlap nothing else
// (each thread's blocks read the others' untouched).
void check_swiglu_stage(const backends::GmmSpec& s, const CallSettings& c) {
  if (!s.swiglu_forward_stage && !s.swiglu_backward_stage) return;
  const char* name = s.swiglu_forward_stage ? "swiglu_forward_stage" : "swiglu_backward_stage";
  if (s.swiglu_forward_stage && s.swiglu_backward_stage) {
    fail("swiglu_backward_stage", "set",
         "at most one of swiglu_forward_stage and swiglu_backward_stage");
  }
  if (s.fuse_swiglu) fail(name, "set", "not with fuse_swiglu (that stage already applies SwiGLU)");
  if (c.out_dtype != DType::kF32) {
    fail("out_dtype", dtype_name(c.out_dtype),
         std::string(name) + " reads the f32 output: out_dtype must be f32");
  }
  if (s.accumulate) {
    fail("accumulate", "true", std::string(name) + " needs the output overwritten");
  }
  struct Named {
    const TensorView* view;
    const char* argument;
  };
  std::array<Named, 2> read{}, written{};
  size_t reads = 1, writes = 1;
  if (const auto& f = s.swiglu_forward_stage) {
    read[0] = {&f->gate, "swiglu_forward_stage.gate"};
    written[0] = {&f->act, "swiglu_forward_stage.act"};
  } else {
    const SwigluBackwardStage& b = *s.swiglu_backward_stage;
    read = {Named{&b.gate, "swiglu_backward_stage.gate"}, Named{&b.up, "swiglu_backward_stage.up"}};
    written = {Named{&b.dgate, "swiglu_backward_stage.dgate"},
               Named{&b.dup, "swiglu_backward_stage.dup"}};
    reads = writes = 2;
  }
  for (const auto& [list, count] : {std::pair{&read, reads}, std::pair{&written, writes}}) {
    for (size_t i = 0; i < count; ++i) {
      const Named& t = (*list)[i];
      check_tensor(*t.view, t.argument, 2, {DType::kF32});
      check_dim(*t.view, t.argument, 0, s.m, "rows of lhs");
      check_dim(*t.view, t.argument, 1, s.out_cols, "output columns");
    }
  }
  for (size_t i = 0; i < writes; ++i) {
    const Named& w = written[i];
    if (overlap(*w.view, s.out)) {
      fail(w.argument, "overlaps out", "the stage's outputs must not overlap out");
    }
    for (size_t j = 0; j < reads; ++j) {
      if (overlap(*w.view, *read[j].view)) {
        fail(w.argument, std::string("overlaps ") + read[j].argument,
             "the stage's outputs must not overlap its inputs");
      }
    }
    for (size_t j = i + 1; j < writes; ++j) {
      if (overlap(*w.view, *written[j].view)) {
        fail(w.argument, std::string("overlaps ") + written[j].argument,
             "the stage's outputs must not overlap each other");
      }
    }
  }
}

}  // namespace

void validate(backends::GmmSpec& spec, const CallSettings& settings) {
  if (spec.pass == Pass::kGradRhs) {
    validate_tgmm(spec, settings, spec.threads);
  } else {
    validate_gmm(spec, settings, spec.threads);
  }
  backends::derive(spec);
  // Block-wise scales along the contracted dim (forward only) fix tile k's
  // multiple; the quantized passes check that lhs and weight blocks agree.
  if (spec.pass == Pass::kForward) {
    int64_t block = 0;
    // lhs [M, K] and the weight [G, K, N] both contract their axis 1.
    for (const backends::GmmOperand* op : {&spec.lhs, &spec.rhs}) {
      if (op->quant && op->quant->granularity.block_axis == 1) {
        block = std::max(block, op->quant->granularity.block_size);
      }
    }
    spec.contracted_block = std::max(spec.contracted_block, block);
  }
}

Shape output_shape(const backends::GmmSpec& spec) {
  if (spec.pass == Pass::kGradRhs) return {spec.resolved_local_groups, spec.k, spec.n};
  return {spec.m, spec.out_cols};
}

void validate_out(const backends::GmmSpec& spec, const CallSettings& settings) {
  const Shape shape = output_shape(spec);
  check_out_tensor(spec.out, static_cast<int>(shape.size()), settings.out_dtype);
  if (spec.pass == Pass::kGradRhs) {
    check_dim(spec.out, "out", 0, shape[0], "groups");
    check_dim(spec.out, "out", 1, shape[1], "K of lhs");
    check_dim(spec.out, "out", 2, shape[2], "N of dout");
  } else {
    check_dim(spec.out, "out", 0, shape[0], "rows of lhs");
    check_dim(spec.out, "out", 1, shape[1], "output columns");
  }
  check_swiglu_stage(spec, settings);
}

}  // namespace raggemm::ops
