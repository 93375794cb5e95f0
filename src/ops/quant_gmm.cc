// Quantized passes (include/raggemm/quant.h): what each pass quantizes, how
// the scales reach the kernels, and which settings cannot work.
//
// The kernels decode fp8/int8 codes and multiply scales while packing
// (kernels/operand.h), so a quantized pass is an ordinary gmm/tgmm call on
// Operands whose dtype is the storage type and whose OperandScale points at
// the QuantizedTensor's scales. The int8 forward pass with per-row and
// per-column scales instead runs on integer dot products (kernels/int8_gmm.h)
// and applies both scales in its output stage.
#include <omp.h>

#include <algorithm>

#include "kernels/gmm_kernel.h"
#include "kernels/int8_gmm.h"
#include "ops/default_tiles.h"
#include "ops/validate.h"
#include "raggemm/error.h"
#include "raggemm/quant.h"

namespace raggemm {
namespace {

constexpr std::initializer_list<DType> kFloatTypes = {DType::kF32, DType::kBF16, DType::kF16};

int resolve_threads(int threads) { return threads > 0 ? threads : omp_get_max_threads(); }

// The OperandScale of a 2-D slice (row_axis, col_axis) of a quantized
// tensor, in storage coordinates; *group_stride: floats between slices along
// axis 0 of a 3-D tensor (0 when the scales do not vary by group).
kernels::OperandScale slice_scale(const QuantizedTensor& q, int row_axis, int col_axis,
                                  int64_t* group_stride) {
  const Shape& shape = q.scales.shape();
  const Shape strides = row_major_strides(shape);
  auto stride_of = [&](int axis) { return shape[axis] == 1 ? int64_t{0} : strides[axis]; };
  auto block_of = [&](int axis) {
    return axis == q.granularity.block_axis ? q.granularity.block_size : int64_t{1};
  };
  kernels::OperandScale scale;
  scale.data = q.scales.as<const float>();
  scale.row_stride = stride_of(row_axis);
  scale.col_stride = stride_of(col_axis);
  scale.row_block = block_of(row_axis);
  scale.col_block = block_of(col_axis);
  if (group_stride) *group_stride = q.scales.rank() == 3 ? stride_of(0) : 0;
  return scale;
}

kernels::Operand codes_operand(const QuantizedTensor& q, bool with_scales) {
  kernels::Operand op;
  op.data = q.values.data();
  op.dtype = q.values.dtype();
  op.ld = q.values.dim(q.values.rank() - 1);
  if (with_scales) op.scale = slice_scale(q, q.values.rank() - 2, q.values.rank() - 1, nullptr);
  return op;
}

// A weight [G,K,N] as stored: values, scales and granularity must agree, and
// the type must be the recipe's operand type.
void check_weight(const QuantizedTensor& weight, const QuantGmmOptions& quant) {
  const QuantType expected = recipe_operand_type(quant.recipe);
  require(weight.type == expected, "weight", quant_type_name(weight.type),
          std::string("recipe ") + quant_recipe_name(quant.recipe) + " needs " +
              quant_type_name(expected) + " weights");
  ops::check_tensor(weight.values, "weight", 3, {quant_storage_dtype(expected)});
  ops::check_tensor(weight.scales, "weight.scales", 3, {DType::kF32});
  const Shape expected_scales = weight.granularity.scale_shape(weight.values.shape(), "weight");
  require(
      weight.scales.shape() == expected_scales, "weight.scales",
      shape_string(weight.scales.shape()),
      "granularity " + weight.granularity.to_string() + " needs " + shape_string(expected_scales));
  require(!weight.granularity.has_block() || weight.granularity.block_axis == 1, "weight",
          weight.granularity.to_string(), "weight blocks must lie along K (axis 1)");
}

std::string kernel_setting(KernelVersion kernel) { return kernel_name(kernel); }

// Block-wise scales along the contracted dim need v2 and a tile k that the
// block divides (or one tile covering all of k). Unset tile k is rounded up
// to a multiple of the block. Returns the tiles to run.
Tiles resolve_tiles(const Tiles& requested, ops::OpKind op, int64_t m, int64_t k, int64_t n,
                    const std::vector<int64_t>& starts, int64_t group_offset,
                    int64_t local_groups, KernelVersion kernel, int threads,
                    int64_t k_block, const std::string& block_setting) {
  Tiles tiles = ops::fill_default_tiles(requested, op, m, k, n, starts, group_offset,
                                        local_groups, kernel, threads);
  if (k_block <= 0 || tiles.k >= k || tiles.k % k_block == 0) return tiles;
  if (requested.k != 0) {
    fail("tiles",
         std::to_string(requested.m) + "," + std::to_string(requested.k) + "," +
             std::to_string(requested.n),
         block_setting + " needs a tile k that is a multiple of " + std::to_string(k_block) +
             " (tile k = " + std::to_string(requested.k) + ")");
  }
  tiles.k = std::min(k, (tiles.k + k_block - 1) / k_block * k_block);
  return tiles;
}

struct PassShape {
  int64_t m, k, n, out_cols, weight_groups, local_groups;
  std::vector<int64_t> starts;
};

// The checks of a quantized gmm (fwd or dlhs) that do not depend on data.
PassShape check_gmm_pass(const TensorView& lhs, const QuantizedTensor& weight,
                         const TensorView& group_sizes, const GmmOptions& o,
                         const QuantGmmOptions& quant) {
  ops::check_tensor(lhs, "lhs", 2, kFloatTypes);
  check_weight(weight, quant);
  PassShape s;
  s.m = lhs.dim(0);
  s.k = lhs.dim(1);
  s.weight_groups = weight.values.dim(0);
  // fwd: weight [G,K,N], contracted K on axis 1. dlhs: lhs is dout [M,N],
  // weight [G,K,N] read transposed, contracted N on axis 2.
  const int contracted_axis = o.transpose_rhs ? 2 : 1;
  ops::check_dim(weight.values, "weight", contracted_axis, s.k,
                 o.transpose_rhs ? "N of dout, the weight is [G,K,N] read transposed"
                                 : "K of lhs, the weight is [G,K,N]");
  s.n = weight.values.dim(o.transpose_rhs ? 1 : 2);
  s.starts = ops::check_group_sizes(group_sizes, s.m);
  s.local_groups = ops::check_local_groups(o.group_offset, o.local_groups, group_sizes.dim(0),
                                           s.weight_groups, "weight");
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
    require(s.n % 2 == 0, "weight", shape_string(weight.values.shape()),
            "fuse_swiglu needs an even number of columns (gate|up halves)");
  }
  s.out_cols = o.fuse_swiglu ? s.n / 2 : s.n;
  if (weight.granularity.has_block() && o.kernel == KernelVersion::kV1) {
    fail("kernel", kernel_setting(o.kernel),
         "block-wise weight scales (" + weight.granularity.to_string() + ") need kernel v2");
  }
  if (quant.lhs_k_block != 0) {
    require(quant.lhs_k_block >= kMinBlockSize && quant.lhs_k_block <= kMaxBlockSize, "lhs_k_block",
            quant.lhs_k_block, "must be 0 (per row) or in 32..512");
    require(!o.transpose_rhs, "lhs_k_block", quant.lhs_k_block,
            "K-blocks of lhs scales apply to the forward pass only");
    require(o.kernel == KernelVersion::kV2, "kernel", kernel_setting(o.kernel),
            "lhs scales per K-block of " + std::to_string(quant.lhs_k_block) + " need kernel v2");
  }
  return s;
}

// The k-block the forward tiles must respect (0: none).
int64_t contracted_block(const QuantizedTensor& weight, const GmmOptions& o,
                         const QuantGmmOptions& quant, std::string* setting) {
  int64_t block = 0;
  if (!o.transpose_rhs && weight.granularity.has_block()) {
    block = weight.granularity.block_size;
    *setting = "rhs_scales=block:" + std::to_string(block);
  }
  if (quant.lhs_k_block > 0) {
    block = std::max(block, quant.lhs_k_block);
    if (weight.granularity.has_block() && !o.transpose_rhs &&
        std::max(weight.granularity.block_size, quant.lhs_k_block) %
                std::min(weight.granularity.block_size, quant.lhs_k_block) !=
            0) {
      fail("lhs_k_block", std::to_string(quant.lhs_k_block),
           "must divide or be a multiple of the weight's block size " +
               std::to_string(weight.granularity.block_size));
    }
    *setting = (setting->empty() ? "" : *setting + " and ") +
               "lhs_k_block=" + std::to_string(quant.lhs_k_block);
  }
  return block;
}

// f32 copy of a float matrix (bf16/f16 widened).
Tensor to_f32(const TensorView& view) {
  if (view.dtype == DType::kF32) {
    Tensor copy(DType::kF32, view.shape);
    std::copy_n(view.as<const float>(), view.numel(), copy.as<float>());
    return copy;
  }
  Tensor out(DType::kF32, view.shape);
  const uint16_t* bits = view.as<const uint16_t>();
  float* dst = out.as<float>();
  for (int64_t i = 0; i < view.numel(); ++i) {
    dst[i] = view.dtype == DType::kBF16 ? bf16_to_f32(bits[i]) : f16_to_f32(bits[i]);
  }
  return out;
}

bool scales_vary_along(const QuantizedTensor& q, int axis) { return q.scales.dim(axis) > 1; }

}  // namespace

QuantizedTensor quantize_weight(const TensorView& weight, QuantRecipe recipe,
                                const RhsScaling& scaling) {
  ops::check_tensor(weight, "weight", 3, kFloatTypes);
  if (scaling.block()) {
    require(scaling.block_size >= kMinBlockSize && scaling.block_size <= kMaxBlockSize,
            "rhs_scales", scaling.to_string(), "block size must be in 32..512");
  }
  return quantize(weight, recipe_operand_type(recipe), weight_granularity(scaling));
}

QuantizedGmmOperands prepare_quantized_gmm(const TensorView& lhs, const QuantizedTensor& weight,
                                           const TensorView& group_sizes, const GmmOptions& options,
                                           const QuantGmmOptions& quant) {
  const PassShape s = check_gmm_pass(lhs, weight, group_sizes, options, quant);
  std::string setting;
  const int64_t block = contracted_block(weight, options, quant, &setting);
  resolve_tiles(options.tiles, ops::gmm_kind(options.transpose_rhs), s.m, s.k, s.out_cols, s.starts,
                options.group_offset, s.local_groups, options.kernel,
                resolve_threads(options.threads), block, setting);
  QuantizedGmmOperands operands;
  operands.rhs = weight;
  if (!options.transpose_rhs) {
    const Granularity per_row = quant.lhs_k_block > 0
                                    ? Granularity::channel({0}, 1, quant.lhs_k_block)
                                    : Granularity::channel({0});
    operands.lhs = quantize(lhs, recipe_operand_type(quant.recipe), per_row, std::nullopt,
                            resolve_threads(options.threads));
    operands.rhs_scales_in_kernel = true;
    return operands;
  }
  // dlhs: lhs is dout [M,N]. A weight scale that varies only by group and
  // column N lies on the contracted dim: fold it into dout, then quantize.
  // Scales that also vary along K (the output dim here) stay in the kernel.
  const bool fold = !scales_vary_along(weight, 1);
  Tensor dout = to_f32(lhs);
  if (fold) {
    int64_t group_stride = 0;
    const kernels::OperandScale ws = slice_scale(weight, 1, 2, &group_stride);
    float* d = dout.as<float>();
    for (int64_t local = 0; local < s.local_groups; ++local) {
      const int64_t g = options.group_offset + local;
      const float* group_scales = ws.data + local * group_stride;
      for (int64_t row = s.starts[g]; row < s.starts[g + 1]; ++row) {
        float* r = d + row * s.k;
        for (int64_t j = 0; j < s.k; ++j) r[j] *= group_scales[j * ws.col_stride];
      }
    }
  }
  operands.lhs = quantize(dout, recipe_gradient_type(quant.recipe), Granularity::channel({0}),
                          std::nullopt, resolve_threads(options.threads));
  operands.rhs_scales_in_kernel = !fold;
  return operands;
}

Tensor run_quantized_gmm(const QuantizedGmmOperands& operands, const TensorView& group_sizes,
                         const GmmOptions& o, const QuantGmmOptions& quant) {
  const Shape& lhs_shape = operands.lhs.values.shape();
  require(lhs_shape.size() == 2, "lhs", shape_string(lhs_shape), "expected [M, K]");
  const Shape& w = operands.rhs.values.shape();
  require(w.size() == 3, "weight", shape_string(w), "expected [G, K, N]");
  const int64_t n = w[o.transpose_rhs ? 1 : 2];
  if (o.accumulate) {
    fail("accumulate", "true",
         "run_quantized_gmm allocates its output: accumulate with run_quantized_gmm_into");
  }
  Tensor out(o.out_dtype, {lhs_shape[0], o.fuse_swiglu ? n / 2 : n});
  run_quantized_gmm_into(operands, group_sizes, out.view(), o, quant);
  return out;
}

void run_quantized_gmm_into(const QuantizedGmmOperands& operands, const TensorView& group_sizes,
                            const TensorView& out_view, const GmmOptions& o,
                            const QuantGmmOptions& quant) {
  const QuantizedTensor& lhs = operands.lhs;
  const QuantizedTensor& weight = operands.rhs;
  require(lhs.values.rank() == 2, "lhs", shape_string(lhs.values.shape()), "expected [M, K]");
  const TensorView lhs_shape(DType::kF32, lhs.values.shape(), lhs.values.data());
  const PassShape s = check_gmm_pass(lhs_shape, weight, group_sizes, o, quant);
  std::string setting;
  const int64_t block = contracted_block(weight, o, quant, &setting);
  kernels::Schedule schedule;
  schedule.threads = resolve_threads(o.threads);
  schedule.tiles = resolve_tiles(o.tiles, ops::gmm_kind(o.transpose_rhs), s.m, s.k, s.out_cols, s.starts,
                                 o.group_offset, s.local_groups, o.kernel, schedule.threads, block,
                                 setting);
  schedule.input_buffer_count = o.input_buffer_count;
  ops::check_out_tensor(out_view, 2, o.out_dtype);
  ops::check_dim(out_view, "out", 0, s.m, "rows of lhs");
  ops::check_dim(out_view, "out", 1, s.out_cols, "output columns");
  float* const out = out_view.dtype == DType::kF32 ? out_view.as<float>() : nullptr;
  uint16_t* const out_bf16 = out_view.dtype == DType::kBF16 ? out_view.as<uint16_t>() : nullptr;

  const bool staged = o.fuse_swiglu || o.col_scale || o.col_bias || o.row_scale;
  const bool per_row = lhs.granularity == Granularity::channel({0});
  const bool per_column = !scales_vary_along(weight, 1);
  if (quant.recipe == QuantRecipe::kInt8 && !o.transpose_rhs && !staged && per_row && per_column &&
      operands.rhs_scales_in_kernel && kernels::int8_gmm_available()) {
    int64_t group_stride = 0;
    const kernels::OperandScale ws = slice_scale(weight, 1, 2, &group_stride);
    kernels::Int8GmmProblem p;
    p.lhs = lhs.values.as<const int8_t>();
    p.row_scale = lhs.scales.as<const float>();
    p.rhs = weight.values.as<const int8_t>();
    p.rhs_group_stride = s.k * s.n;
    p.col_scale = ws.data;
    p.col_scale_stride = ws.col_stride;
    p.col_scale_group_stride = group_stride;
    p.m = s.m;
    p.k = s.k;
    p.n = s.n;
    p.starts = s.starts.data();
    p.num_groups = group_sizes.dim(0);
    p.group_offset = o.group_offset;
    p.local_groups = s.local_groups;
    p.out = out;
    p.out_bf16 = out_bf16;
    p.accumulate = o.accumulate;
    kernels::int8_gmm(p, schedule);
    return;
  }

  kernels::GmmProblem p;
  p.lhs = codes_operand(lhs, /*with_scales=*/true);
  p.rhs.base = codes_operand(weight, operands.rhs_scales_in_kernel);
  p.rhs.stride = s.k * s.n;
  if (operands.rhs_scales_in_kernel) {
    p.rhs.base.scale = slice_scale(weight, 1, 2, &p.rhs.scale_stride);
  }
  p.transpose_rhs = o.transpose_rhs;
  p.m = s.m;
  p.k = s.k;
  p.n = s.n;
  p.starts = s.starts.data();
  p.num_groups = group_sizes.dim(0);
  p.group_offset = o.group_offset;
  p.local_groups = s.local_groups;
  p.out = out;
  p.out_bf16 = out_bf16;
  p.accumulate = o.accumulate;
  // The caller's output stage (v2 only, checked above).
  auto column_vector = [&](const std::optional<TensorView>& v, const std::string& name,
                           int64_t* group_stride) -> const float* {
    *group_stride = 0;
    if (!v) return nullptr;
    ops::check_tensor(*v, name, v->rank(), {DType::kF32});
    require(v->rank() == 1 || v->rank() == 2, name, shape_string(v->shape),
            "expected [N] or [G, N]");
    ops::check_dim(*v, name, v->rank() - 1, s.n, "weight columns");
    if (v->rank() == 2) {
      ops::check_dim(*v, name, 0, s.weight_groups, "weight groups");
      *group_stride = s.n;
    }
    return v->as<const float>();
  };
  p.epilogue.swiglu = o.fuse_swiglu;
  p.epilogue.col_scale =
      column_vector(o.col_scale, "col_scale", &p.epilogue.col_scale_group_stride);
  p.epilogue.col_bias = column_vector(o.col_bias, "col_bias", &p.epilogue.col_bias_group_stride);
  if (o.row_scale) {
    ops::check_tensor(*o.row_scale, "row_scale", 1, {DType::kF32});
    ops::check_dim(*o.row_scale, "row_scale", 0, s.m, "rows of lhs");
    p.epilogue.row_scale = o.row_scale->as<const float>();
  }
  if (o.kernel == KernelVersion::kV1) {
    kernels::gmm_v1(p, schedule);
  } else {
    kernels::gmm_v2(p, schedule);
  }
}

Tensor quantized_gmm(const TensorView& lhs, const QuantizedTensor& weight,
                     const TensorView& group_sizes, const GmmOptions& options,
                     const QuantGmmOptions& quant) {
  return run_quantized_gmm(prepare_quantized_gmm(lhs, weight, group_sizes, options, quant),
                           group_sizes, options, quant);
}

Tensor quantized_gmm(const TensorView& lhs, const TensorView& weight_f32,
                     const TensorView& group_sizes, const GmmOptions& options,
                     const QuantGmmOptions& quant) {
  // Settings that cannot work are refused before the weight is quantized.
  if (quant.rhs_scaling.block() && options.kernel == KernelVersion::kV1) {
    fail("kernel", kernel_setting(options.kernel),
         "rhs_scales=" + quant.rhs_scaling.to_string() + " (block-wise) needs kernel v2");
  }
  ops::check_tensor(weight_f32, "weight", 3, kFloatTypes);
  return quantized_gmm(lhs, quantize_weight(weight_f32, quant.recipe, quant.rhs_scaling),
                       group_sizes, options, quant);
}


QuantizedTgmmOperands prepare_quantized_tgmm(const TensorView& lhs, const TensorView& dout,
                                             const TensorView& group_sizes,
                                             const TgmmOptions& options,
                                             const QuantGmmOptions& quant) {
  const ops::TgmmShape s = ops::check_tgmm_args(lhs, dout, group_sizes, options);
  require(quant.lhs_k_block == 0, "lhs_k_block", quant.lhs_k_block,
          "K-blocks of lhs scales apply to the forward pass only");
  QuantizedTgmmOperands operands;
  operands.lhs = quantize(lhs, recipe_operand_type(quant.recipe), Granularity::channel({0}),
                          std::nullopt, resolve_threads(options.threads));
  // The lhs row scale lies on the contracted (token) dim: fold it into dout.
  Tensor folded = to_f32(dout);
  const float* row_scales = operands.lhs.scales.as<const float>();
  float* d = folded.as<float>();
  for (int64_t row = 0; row < s.m; ++row) {
    for (int64_t j = 0; j < s.n; ++j) d[row * s.n + j] *= row_scales[row];
  }
  operands.dout = quantize(folded, recipe_gradient_type(quant.recipe), Granularity::channel({1}),
                           std::nullopt, resolve_threads(options.threads));
  operands.lhs_scales_in_kernel = false;
  return operands;
}

Tensor run_quantized_tgmm(const QuantizedTgmmOperands& operands, const TensorView& group_sizes,
                          const TgmmOptions& o) {
  const TensorView lhs_shape(DType::kF32, operands.lhs.values.shape(),
                             operands.lhs.values.data());
  const TensorView dout_shape(DType::kF32, operands.dout.values.shape(),
                              operands.dout.values.data());
  const ops::TgmmShape s = ops::check_tgmm_args(lhs_shape, dout_shape, group_sizes, o);
  if (o.accumulate) {
    fail("accumulate", "true",
         "run_quantized_tgmm allocates its output: accumulate with run_quantized_tgmm_into");
  }
  Tensor out(o.out_dtype, {s.local_groups, s.k, s.n});
  run_quantized_tgmm_into(operands, group_sizes, out.view(), o);
  return out;
}

void run_quantized_tgmm_into(const QuantizedTgmmOperands& operands,
                             const TensorView& group_sizes, const TensorView& out,
                             const TgmmOptions& o) {
  const QuantizedTensor& lhs = operands.lhs;
  const QuantizedTensor& dout = operands.dout;
  const TensorView lhs_shape(DType::kF32, lhs.values.shape(), lhs.values.data());
  const TensorView dout_shape(DType::kF32, dout.values.shape(), dout.values.data());
  const ops::TgmmShape s = ops::check_tgmm_args(lhs_shape, dout_shape, group_sizes, o);
  ops::check_out_tensor(out, 3, o.out_dtype);
  ops::check_dim(out, "out", 0, s.local_groups, "groups");
  ops::check_dim(out, "out", 1, s.k, "K of lhs");
  ops::check_dim(out, "out", 2, s.n, "N of dout");
  kernels::TgmmProblem p;
  p.lhs = codes_operand(lhs, operands.lhs_scales_in_kernel);
  // dout's per-column scales scale the output's columns; applied as dout is
  // packed, which is the same product.
  p.dout = codes_operand(dout, /*with_scales=*/true);
  p.m = s.m;
  p.k = s.k;
  p.n = s.n;
  p.starts = s.starts.data();
  p.num_groups = group_sizes.dim(0);
  p.group_offset = o.group_offset;
  p.local_groups = s.local_groups;
  p.out = out.dtype == DType::kF32 ? out.as<float>() : nullptr;
  p.out_bf16 = out.dtype == DType::kBF16 ? out.as<uint16_t>() : nullptr;
  p.accumulate = o.accumulate;
  kernels::Schedule schedule;
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

Tensor quantized_tgmm(const TensorView& lhs, const TensorView& dout, const TensorView& group_sizes,
                      const TgmmOptions& options, const QuantGmmOptions& quant) {
  return run_quantized_tgmm(prepare_quantized_tgmm(lhs, dout, group_sizes, options, quant),
                            group_sizes, options);
}

}  // namespace raggemm
