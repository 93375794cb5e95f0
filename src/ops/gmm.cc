// Public gmm / tgmm: validation (DESIGN.md s.1) before any write, tile
// defaults, then dispatch to the chosen kernel generation.
#include "raggemm/gmm.h"

#include <omp.h>

#include "kernels/gmm_kernel.h"
#include "ops/default_tiles.h"
#include "ops/validate.h"
#include "raggemm/error.h"

namespace raggemm {

namespace {

constexpr std::initializer_list<DType> kFloatTypes = {DType::kF32, DType::kBF16, DType::kF16};

kernels::Operand operand_of(const TensorView& view, int64_t ld) {
  return kernels::Operand{view.data, view.dtype, ld, {}};
}

// The kernels' output pointers: f32 or bf16 (validated by check_out_tensor).
void set_output(const TensorView& out, float** f32, uint16_t** bf16) {
  *f32 = out.dtype == DType::kF32 ? out.as<float>() : nullptr;
  *bf16 = out.dtype == DType::kBF16 ? out.as<uint16_t>() : nullptr;
}

int resolve_threads(int threads) { return threads > 0 ? threads : omp_get_max_threads(); }

struct CallShape {
  int64_t m, k, n, out_cols, rhs_groups, local_groups;
  std::vector<int64_t> starts;
};

// A per-column output-stage vector: f32 [N] (shared) or [G_rhs, N].
const float* check_column_vector(const std::optional<TensorView>& v, const std::string& argument,
                                 int64_t groups, int64_t n, int64_t* group_stride) {
  *group_stride = 0;
  if (!v) return nullptr;
  require(v->rank() == 1 || v->rank() == 2, argument, shape_string(v->shape),
          "expected [N] or [G, N]");
  ops::check_tensor(*v, argument, v->rank(), {DType::kF32});
  if (v->rank() == 1) {
    ops::check_dim(*v, argument, 0, n, "rhs columns");
  } else {
    ops::check_dim(*v, argument, 0, groups, "rhs groups");
    ops::check_dim(*v, argument, 1, n, "rhs columns");
    *group_stride = n;
  }
  return v->as<const float>();
}

CallShape check_gmm(const TensorView& lhs, const TensorView& rhs, const TensorView& group_sizes,
                   const GmmOptions& o) {
  ops::check_tensor(lhs, "lhs", 2, kFloatTypes);
  ops::check_tensor(rhs, "rhs", 3, kFloatTypes);
  CallShape s;
  s.m = lhs.dim(0);
  s.k = lhs.dim(1);
  s.rhs_groups = rhs.dim(0);
  const int contracted_axis = o.transpose_rhs ? 2 : 1;
  ops::check_dim(rhs, "rhs", contracted_axis, s.k,
                 o.transpose_rhs ? "K of lhs, rhs is [G,N,K] with transpose_rhs"
                                 : "K of lhs, rhs is [G,K,N]");
  s.n = rhs.dim(o.transpose_rhs ? 1 : 2);
  s.starts = ops::check_group_sizes(group_sizes, s.m);
  s.local_groups = ops::check_local_groups(o.group_offset, o.local_groups, group_sizes.dim(0),
                                           s.rhs_groups, "rhs");
  ops::check_tiles(o.tiles, "tiles");
  ops::check_threads(o.threads, "threads");
  ops::check_buffer_count(o.input_buffer_count, "input_buffer_count");
  ops::check_out_dtype(o.out_dtype);
  const bool staged = o.fuse_swiglu || o.col_scale || o.col_bias || o.row_scale;
  if (o.kernel == KernelVersion::kV1 && staged) {
    fail("kernel", "v1",
         "the fused output stage (fuse_swiglu, col_scale, col_bias, row_scale) needs kernel v2");
  }
  if (o.fuse_swiglu) {
    require(s.n % 2 == 0, "rhs", shape_string(rhs.shape),
            "fuse_swiglu needs an even number of columns (gate|up halves)");
  }
  s.out_cols = o.fuse_swiglu ? s.n / 2 : s.n;
  if (o.row_scale) {
    ops::check_tensor(*o.row_scale, "row_scale", 1, {DType::kF32});
    ops::check_dim(*o.row_scale, "row_scale", 0, s.m, "rows of lhs");
  }
  return s;
}

}  // namespace

void gmm_into(const TensorView& lhs, const TensorView& rhs, const TensorView& group_sizes,
              const TensorView& out, const GmmOptions& o) {
  CallShape s = check_gmm(lhs, rhs, group_sizes, o);
  ops::check_out_tensor(out, 2, o.out_dtype);
  ops::check_dim(out, "out", 0, s.m, "rows of lhs");
  ops::check_dim(out, "out", 1, s.out_cols, "output columns");

  kernels::GmmProblem p;
  p.lhs = operand_of(lhs, s.k);
  p.rhs.base = operand_of(rhs, o.transpose_rhs ? s.k : s.n);
  p.rhs.stride = s.k * s.n;
  p.transpose_rhs = o.transpose_rhs;
  p.m = s.m;
  p.k = s.k;
  p.n = s.n;
  p.starts = s.starts.data();
  p.num_groups = group_sizes.dim(0);
  p.group_offset = o.group_offset;
  p.local_groups = s.local_groups;
  set_output(out, &p.out, &p.out_bf16);
  p.accumulate = o.accumulate;
  p.epilogue.swiglu = o.fuse_swiglu;
  p.epilogue.col_scale = check_column_vector(o.col_scale, "col_scale", s.rhs_groups, s.n,
                                             &p.epilogue.col_scale_group_stride);
  p.epilogue.col_bias = check_column_vector(o.col_bias, "col_bias", s.rhs_groups, s.n,
                                            &p.epilogue.col_bias_group_stride);
  p.epilogue.row_scale = o.row_scale ? o.row_scale->as<const float>() : nullptr;

  kernels::Schedule schedule;
  schedule.threads = resolve_threads(o.threads);
  schedule.tiles = ops::fill_default_tiles(o.tiles, ops::gmm_kind(o.transpose_rhs), s.m, s.k, s.out_cols,
                                           s.starts, o.group_offset, s.local_groups, o.kernel,
                                           schedule.threads);
  schedule.input_buffer_count = o.input_buffer_count;
  if (o.kernel == KernelVersion::kV1) {
    kernels::gmm_v1(p, schedule);
  } else {
    kernels::gmm_v2(p, schedule);
  }
}

Tensor gmm(const TensorView& lhs, const TensorView& rhs, const TensorView& group_sizes,
           const GmmOptions& options) {
  CallShape s = check_gmm(lhs, rhs, group_sizes, options);
  if (options.accumulate) {
    fail("accumulate", "true", "gmm allocates its output: accumulate into one with gmm_into");
  }
  Tensor out(options.out_dtype, {s.m, s.out_cols});
  gmm_into(lhs, rhs, group_sizes, out, options);
  return out;
}


void tgmm_into(const TensorView& lhs, const TensorView& dout, const TensorView& group_sizes,
               const TensorView& out, const TgmmOptions& o) {
  ops::TgmmShape s = ops::check_tgmm_args(lhs, dout, group_sizes, o);
  ops::check_out_tensor(out, 3, o.out_dtype);
  ops::check_dim(out, "out", 0, s.local_groups, "groups");
  ops::check_dim(out, "out", 1, s.k, "K of lhs");
  ops::check_dim(out, "out", 2, s.n, "N of dout");

  kernels::TgmmProblem p;
  p.lhs = operand_of(lhs, s.k);
  p.dout = operand_of(dout, s.n);
  p.m = s.m;
  p.k = s.k;
  p.n = s.n;
  p.starts = s.starts.data();
  p.num_groups = group_sizes.dim(0);
  p.group_offset = o.group_offset;
  p.local_groups = s.local_groups;
  set_output(out, &p.out, &p.out_bf16);
  p.accumulate = o.accumulate;

  kernels::Schedule schedule;
  // Kernel terms: m tiles K, k tiles the tokens, n tiles N.
  schedule.threads = resolve_threads(o.threads);
  schedule.tiles = ops::fill_default_tiles(o.tiles, ops::OpKind::kTgmm, s.k, s.m, s.n, s.starts,
                                           o.group_offset, s.local_groups, o.kernel,
                                           schedule.threads);
  schedule.input_buffer_count = o.input_buffer_count;
  if (o.kernel == KernelVersion::kV1) {
    kernels::tgmm_v1(p, schedule);
  } else {
    kernels::tgmm_v2(p, schedule);
  }
}

Tensor tgmm(const TensorView& lhs, const TensorView& dout, const TensorView& group_sizes,
            const TgmmOptions& options) {
  ops::TgmmShape s = ops::check_tgmm_args(lhs, dout, group_sizes, options);
  if (options.accumulate) {
    fail("accumulate", "true", "tgmm allocates its output: accumulate into one with tgmm_into");
  }
  Tensor out(options.out_dtype, {s.local_groups, s.k, s.n});
  tgmm_into(lhs, dout, group_sizes, out, options);
  return out;
}

}  // namespace raggemm
