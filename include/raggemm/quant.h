// Quantization as data (DESIGN.md s.4): a quantized tensor is integer or fp8
// codes + f32 scales + the spec that says how the scales tile the tensor.
//
//   value(x) = decode(code(x)) * scale(cell(x))
//
// Storage types: fp8 e4m3fn (max 448), fp8 e5m2 (max 57344), int8 symmetric
// (codes -127..127). Granularity, written as a SPEC string:
//   per_tensor                      one scale; every scale axis has size 1
//   channel:AXES                    the comma-separated AXES keep their size,
//                                   every other axis is reduced to 1
//   channel:AXES+block:AXIS:SIZE    as above, and AXIS (not one of AXES) is
//                                   cut into blocks of SIZE (32..512): its
//                                   scale axis has ceil(dim / SIZE) entries
// Examples: lhs [M,K] per row "channel:0" -> scales [M,1]; rhs [G,K,N] per
// expert and column "channel:0,2" -> [G,1,N]; rhs block-wise along K
// "channel:0,2+block:1:128" -> [G,ceil(K/128),N].
//
// Calibration: dynamic absmax (scale = absmax(cell) / type max; a cell of
// zeros gets scale 1 and zero codes) or a static range R (scale = R / type
// max for every cell; values beyond R saturate). Encoding: fp8 rounds to
// nearest even and saturates to the finite max; int8 is
// clamp(round_half_even(x / scale), -127, 127).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "raggemm/gmm.h"
#include "raggemm/quant_types.h"
#include "raggemm/tensor.h"

namespace raggemm {

struct QuantizedTensor {
  Tensor values;  // DType quant_storage_dtype(type), the input's shape
  Tensor scales;  // f32, granularity.scale_shape(values.shape())
  QuantType type = QuantType::kFp8E4M3;
  Granularity granularity;
};

// Quantizes an f32 (or bf16/f16) tensor of any rank. static_range, when set,
// must be finite and > 0. Dynamic calibration refuses non-finite inputs.
// threads: how many OpenMP threads may share the work (0: all); the result
// does not depend on it, bit for bit.
QuantizedTensor quantize(const TensorView& input, QuantType type, const Granularity& granularity,
                         std::optional<float> static_range = std::nullopt, int threads = 1);

// Decodes codes times scales into a new f32 tensor. `values` holds raw codes:
// DType kF8E4M3/kF8E5M2 or kU8 (raw fp8 bits) for fp8 types, kI8 for int8.
// `scales` is f32 of granularity.scale_shape(values.shape).
Tensor dequantize(const TensorView& values, const TensorView& scales, QuantType type,
                  const Granularity& granularity);
Tensor dequantize(const QuantizedTensor& quantized);

// ---------------------------------------------------------------------------
// Quantized grouped matmuls.
//
// Recipes: fp8 (fp8_full: weights and activations e4m3, gradients e5m2) and
// int8 (int8 everywhere). Per pass:
//   fwd  (gmm):  lhs per row, dynamic (optionally per K-block of 512, v2);
//                rhs per expert and output column, or block-wise along K (v2).
//   dlhs (gmm, transpose_rhs): dout per row in the gradient type; a rhs
//                channel scale lies on the contracted N, so it is folded into
//                dout before dout is quantized (block-wise rhs scales, which
//                vary along the output dim too, are applied while packing).
//   drhs (tgmm): lhs re-quantized per row, lhs scales folded into dout, dout
//                quantized per column, its scales applied to the output.
// Gradients are straight-through: quantization's own backward is identity.
// The kernels decode codes and multiply scales while packing (kernels/
// operand.h), so each pass computes the reference on the dequantized
// operands up to f32 summation order; int8 fwd with per-row and per-column
// scales runs on integer dot products instead (i32 accumulation).

// A weight [G,K,N] quantized for the recipe: operand type, weight_granularity.
QuantizedTensor quantize_weight(const TensorView& weight, QuantRecipe recipe,
                                const RhsScaling& scaling);

// The operands a quantized pass hands to the kernels, exposed so tests can
// check the kernels against the reference on exactly these values.
struct QuantizedGmmOperands {
  QuantizedTensor lhs;  // [M, contracted]
  QuantizedTensor rhs;  // the weight as stored: [G,K,N] (fwd) or [G,K,N] read transposed (dlhs)
  bool rhs_scales_in_kernel = true;  // false when they were folded into lhs
};
struct QuantizedTgmmOperands {
  QuantizedTensor lhs;                // [M, K], per row
  QuantizedTensor dout;               // [M, N], per column, lhs row scales folded in
  bool lhs_scales_in_kernel = false;  // folded into dout: the kernel reads codes only
};

// fwd (options.transpose_rhs false): lhs [M,K] f32, weight [G,K,N] (already
// quantized, or f32 and quantized here). dlhs (transpose_rhs true): lhs is
// dout [M,N], weight [G,K,N] read transposed; returns [M,K].
QuantizedGmmOperands prepare_quantized_gmm(const TensorView& lhs, const QuantizedTensor& weight,
                                           const TensorView& group_sizes, const GmmOptions& options,
                                           const QuantGmmOptions& quant);
Tensor quantized_gmm(const TensorView& lhs, const QuantizedTensor& weight,
                     const TensorView& group_sizes, const GmmOptions& options = {},
                     const QuantGmmOptions& quant = {});
Tensor quantized_gmm(const TensorView& lhs, const TensorView& weight_f32,
                     const TensorView& group_sizes, const GmmOptions& options = {},
                     const QuantGmmOptions& quant = {});
// Runs the kernels on operands already prepared (for the bench, which
// times quantization apart, and for tests).
Tensor run_quantized_gmm(const QuantizedGmmOperands& operands, const TensorView& group_sizes,
                         const GmmOptions& options, const QuantGmmOptions& quant);
// The same into a caller-provided f32 [M, N_out] contiguous tensor (the
// bench times it so, as it times gmm_into for f32).
void run_quantized_gmm_into(const QuantizedGmmOperands& operands, const TensorView& group_sizes,
                            const TensorView& out, const GmmOptions& options,
                            const QuantGmmOptions& quant);

// drhs: lhs [M,K] f32, dout [M,N] f32 -> [G_local,K,N] of options.out_dtype.
QuantizedTgmmOperands prepare_quantized_tgmm(const TensorView& lhs, const TensorView& dout,
                                             const TensorView& group_sizes,
                                             const TgmmOptions& options,
                                             const QuantGmmOptions& quant);
Tensor quantized_tgmm(const TensorView& lhs, const TensorView& dout, const TensorView& group_sizes,
                      const TgmmOptions& options = {}, const QuantGmmOptions& quant = {});
Tensor run_quantized_tgmm(const QuantizedTgmmOperands& operands, const TensorView& group_sizes,
                          const TgmmOptions& options);
// The same into a caller-provided [G_local, K, N] tensor of options.out_dtype
// (f32 or bf16), added to when options.accumulate.
void run_quantized_tgmm_into(const QuantizedTgmmOperands& operands,
                             const TensorView& group_sizes, const TensorView& out,
                             const TgmmOptions& options);

}  // namespace raggemm
