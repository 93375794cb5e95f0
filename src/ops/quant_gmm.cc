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
#include <vector>

#include "ops/options_spec.h"
#include "ops/quantize_scaled.h"
#include "ops/recipe_call.h"
#include "ops/run_spec.h"
#include "ops/validate.h"
#include "raggemm/error.h"
#include "raggemm/quant.h"

namespace raggemm {
namespace {

constexpr std::initializer_list<DType> kFloatTypes = {DType::kF32, DType::kBF16, DType::kF16};


// A weight [G,K,N] as stored must be of the recipe's operand type (its
// codes, scales and granularity are checked with the other operands).
void check_weight(const QuantizedTensor& weight, const QuantGmmOptions& quant) {
  const QuantType expected = recipe_operand_type(quant.recipe);
  require(weight.type == expected, "weight", quant_type_name(weight.type),
          std::string("recipe ") + quant_recipe_name(quant.recipe) + " needs " +
              quant_type_name(expected) + " weights");
}

std::string kernel_setting(KernelVersion kernel) { return kernel_name(kernel); }

using ops::settings_of;

// A quantized tensor as a spec operand; `in_kernel`: its scales are applied
// by the backend (false: folded into the other operand already).
backends::GmmOperand operand_of(const QuantizedTensor& q, bool in_kernel) {
  return backends::GmmOperand(q.values.view(),
                              backends::OperandScales{q.scales.view(), q.type, q.granularity, in_kernel});
}

// The quantization options of a gmm pass: what the recipe and the kernel
// settings allow, checked before anything is quantized.
void check_quant_options(const GmmOptions& o, const QuantGmmOptions& quant,
                         const QuantizedTensor& weight) {
  if (quant.lhs_k_block == 0) return;
  require(quant.lhs_k_block >= kMinBlockSize && quant.lhs_k_block <= kMaxBlockSize, "lhs_k_block",
          quant.lhs_k_block, "must be 0 (per row) or in 32..512");
  require(!o.transpose_rhs, "lhs_k_block", quant.lhs_k_block,
          "K-blocks of lhs scales apply to the forward pass only");
  require(o.kernel == KernelVersion::kV2, "kernel", kernel_setting(o.kernel),
          "lhs scales per K-block of " + std::to_string(quant.lhs_k_block) + " need kernel v2");
  const Granularity& w = weight.granularity;
  if (w.has_block() && std::max(w.block_size, quant.lhs_k_block) %
                               std::min(w.block_size, quant.lhs_k_block) != 0) {
    fail("lhs_k_block", std::to_string(quant.lhs_k_block),
         "must divide or be a multiple of the weight's block size " + std::to_string(w.block_size));
  }
}

// The spec of a quantized gmm pass (fwd, or dlhs with transpose_rhs) on
// `lhs` (plain before quantization, codes after), validated.
backends::GmmSpec gmm_pass_spec(const backends::GmmOperand& lhs, const QuantizedTensor& weight,
                                bool weight_scales_in_kernel, const TensorView& group_sizes,
                                const GmmOptions& o, const QuantGmmOptions& quant) {
  check_weight(weight, quant);
  backends::GmmSpec spec =
      ops::validated_spec(lhs, operand_of(weight, weight_scales_in_kernel), group_sizes, o);
  check_quant_options(o, quant, weight);
  if (!o.transpose_rhs) spec.contracted_block = std::max(spec.contracted_block, quant.lhs_k_block);
  return spec;
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
  // Everything that can be refused is refused before anything is quantized,
  // the tiles included (an explicit tile k that block-wise scales rule out).
  const backends::GmmSpec spec =
      gmm_pass_spec(lhs, weight, true, group_sizes, options, quant);
  const ops::CallSettings settings = settings_of(options);
  ops::resolve_config(ops::backend_for(spec, settings), spec, settings);
  const int threads = backends::resolved_threads(spec);
  QuantizedGmmOperands operands;
  operands.rhs = weight;
  if (!options.transpose_rhs) {
    const Granularity per_row = quant.lhs_k_block > 0
                                    ? Granularity::channel({0}, 1, quant.lhs_k_block)
                                    : Granularity::channel({0});
    operands.lhs = quantize(lhs, recipe_operand_type(quant.recipe), per_row, std::nullopt, threads);
    operands.rhs_scales_in_kernel = true;
    return operands;
  }
  // dlhs: lhs is dout [M,N]. A weight scale that varies only by group and
  // column N lies on the contracted dim: fold it into dout, then quantize.
  // Scales that also vary along K (the output dim here) stay in the kernel.
  const bool fold = !scales_vary_along(weight, 1);
  // Scales [G_rhs, 1, N]: group g's scale of column j at g * N + j (a
  // per-tensor or per-expert scale broadcasts: stride 0). Row r of dout is
  // multiplied by the scales of its group; rows of no local group are not.
  std::vector<const float*> row_scales;
  int64_t col_stride = 1;
  if (fold) {
    const Shape& scale_shape = weight.scales.shape();
    const int64_t group_stride = scale_shape[0] == 1 ? 0 : scale_shape[2];
    col_stride = scale_shape[2] == 1 ? 0 : 1;
    row_scales.assign(static_cast<size_t>(spec.m), nullptr);
    for (int64_t local = 0; local < spec.resolved_local_groups; ++local) {
      const int64_t g = options.group_offset + local;
      std::fill(row_scales.begin() + spec.starts[g], row_scales.begin() + spec.starts[g + 1],
                weight.scales.as<const float>() + local * group_stride);
    }
  }
  const ops::RowFactors factors = [&](int64_t row, float* scratch) -> const float* {
    const float* scales = row_scales.empty() ? nullptr : row_scales[static_cast<size_t>(row)];
    if (!scales || col_stride == 1) return scales;
    std::fill(scratch, scratch + spec.k, scales[0]);
    return scratch;
  };
  operands.lhs =
      ops::quantize_scaled(lhs, recipe_gradient_type(quant.recipe), 0, factors, threads);
  operands.rhs_scales_in_kernel = !fold;
  return operands;
}

Tensor run_quantized_gmm(const QuantizedGmmOperands& operands, const TensorView& group_sizes,
                         const GmmOptions& o, const QuantGmmOptions& quant) {
  return ops::run_into_new(gmm_pass_spec(operand_of(operands.lhs, true), operands.rhs,
                                         operands.rhs_scales_in_kernel, group_sizes, o, quant),
                           settings_of(o), "run_quantized_gmm");
}

void run_quantized_gmm_into(const QuantizedGmmOperands& operands, const TensorView& group_sizes,
                            const TensorView& out, const GmmOptions& o,
                            const QuantGmmOptions& quant) {
  backends::GmmSpec spec = gmm_pass_spec(operand_of(operands.lhs, true), operands.rhs,
                                         operands.rhs_scales_in_kernel, group_sizes, o, quant);
  spec.out = out;
  ops::run(spec, settings_of(o));
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
  GmmOptions with = options;
  with.quantize = quant;
  return gmm(lhs, weight_f32, group_sizes, with);
}

GmmOperand::GmmOperand(const QuantizedTensor& quantized)
    : values(quantized.values.view()),
      scales(quantized.scales.view()),
      type(quantized.type),
      granularity(quantized.granularity),
      source(&quantized) {}

namespace ops {

Tensor recipe_gmm(const GmmOperand& lhs, const GmmOperand& rhs, const TensorView& group_sizes,
                  const std::optional<TensorView>& out, const GmmOptions& options) {
  const QuantGmmOptions quant = *options.quantize;
  GmmOptions plain = options;
  plain.quantize.reset();
  if (lhs.quantized()) {
    fail("lhs", "quantized", "options.quantize quantizes a plain lhs; run quantized operands without it");
  }
  QuantizedTensor quantized_weight;
  const QuantizedTensor* weight = rhs.source;
  if (rhs.quantized()) {
    if (!weight) fail("rhs", "quantized view", "options.quantize takes a plain weight or a QuantizedTensor");
  } else {
    // Settings that cannot work are refused before the weight is quantized.
    if (quant.rhs_scaling.block() && options.kernel == KernelVersion::kV1) {
      fail("kernel", kernel_setting(options.kernel),
           "rhs_scales=" + quant.rhs_scaling.to_string() + " (block-wise) needs kernel v2");
    }
    ops::check_tensor(rhs.values, "weight", 3, kFloatTypes);
    quantized_weight = quantize_weight(rhs.values, quant.recipe, quant.rhs_scaling);
    weight = &quantized_weight;
  }
  const QuantizedGmmOperands operands =
      prepare_quantized_gmm(lhs.values, *weight, group_sizes, plain, quant);
  if (!out) return run_quantized_gmm(operands, group_sizes, plain, quant);
  run_quantized_gmm_into(operands, group_sizes, *out, plain, quant);
  return Tensor();
}

Tensor recipe_tgmm(const GmmOperand& lhs, const GmmOperand& dout, const TensorView& group_sizes,
                   const std::optional<TensorView>& out, const TgmmOptions& options) {
  const QuantGmmOptions quant = *options.quantize;
  TgmmOptions plain = options;
  plain.quantize.reset();
  if (lhs.quantized() || dout.quantized()) {
    fail(lhs.quantized() ? "lhs" : "dout", "quantized",
         "options.quantize quantizes plain operands; run quantized operands without it");
  }
  const QuantizedTgmmOperands operands =
      prepare_quantized_tgmm(lhs.values, dout.values, group_sizes, plain, quant);
  if (!out) return run_quantized_tgmm(operands, group_sizes, plain);
  run_quantized_tgmm_into(operands, group_sizes, *out, plain);
  return Tensor();
}

}  // namespace ops

namespace {

// The validated spec of a quantized tgmm (drhs) on its codes.
backends::GmmSpec tgmm_pass_spec(const QuantizedTgmmOperands& operands,
                                 const TensorView& group_sizes, const TgmmOptions& o) {
  // dout's per-column scales scale the output's columns: applied as dout
  // is packed, which is the same product.
  return ops::validated_spec(operand_of(operands.lhs, operands.lhs_scales_in_kernel),
                             operand_of(operands.dout, true), group_sizes, o);
}

}  // namespace

QuantizedTgmmOperands prepare_quantized_tgmm(const TensorView& lhs, const TensorView& dout,
                                             const TensorView& group_sizes,
                                             const TgmmOptions& options,
                                             const QuantGmmOptions& quant) {
  const backends::GmmSpec spec = ops::validated_spec(lhs, dout, group_sizes, options);
  require(quant.lhs_k_block == 0, "lhs_k_block", quant.lhs_k_block,
          "K-blocks of lhs scales apply to the forward pass only");
  const int threads = backends::resolved_threads(spec);
  QuantizedTgmmOperands operands;
  operands.lhs = quantize(lhs, recipe_operand_type(quant.recipe), Granularity::channel({0}),
                          std::nullopt, threads);
  // The lhs row scale lies on the contracted (token) dim: fold it into dout.
  const float* row_scales = operands.lhs.scales.as<const float>();
  const ops::RowFactors factors = [&](int64_t row, float* scratch) -> const float* {
    std::fill(scratch, scratch + spec.n, row_scales[row]);
    return scratch;
  };
  operands.dout =
      ops::quantize_scaled(dout, recipe_gradient_type(quant.recipe), 1, factors, threads);
  operands.lhs_scales_in_kernel = false;
  return operands;
}

Tensor run_quantized_tgmm(const QuantizedTgmmOperands& operands, const TensorView& group_sizes,
                          const TgmmOptions& o) {
  return ops::run_into_new(tgmm_pass_spec(operands, group_sizes, o), settings_of(o),
                           "run_quantized_tgmm");
}

void run_quantized_tgmm_into(const QuantizedTgmmOperands& operands,
                             const TensorView& group_sizes, const TensorView& out,
                             const TgmmOptions& o) {
  backends::GmmSpec spec = tgmm_pass_spec(operands, group_sizes, o);
  spec.out = out;
  ops::run(spec, settings_of(o));
}

Tensor quantized_tgmm(const TensorView& lhs, const TensorView& dout, const TensorView& group_sizes,
                      const TgmmOptions& options, const QuantGmmOptions& quant) {
  TgmmOptions with = options;
  with.quantize = quant;
  return tgmm(lhs, dout, group_sizes, with);
}

}  // namespace raggemm
