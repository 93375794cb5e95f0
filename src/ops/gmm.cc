// Public gmm / tgmm on plain operands: a spec of the call, validated once
// (ops/validate.cc) before any write, then run on the chosen backend
// (ops/run_spec.cc). With options.quantize set, the recipe's pass
// (ops/quant_gmm.cc) quantizes the operands first.
#include "raggemm/gmm.h"

#include "ops/options_spec.h"
#include "ops/recipe_call.h"
#include "ops/run_spec.h"

namespace raggemm {
namespace {

// A public operand as the spec carries it: a quantized one's scales are the
// backend's to apply.
backends::GmmOperand spec_operand(const GmmOperand& op) {
  if (!op.quantized()) return backends::GmmOperand(op.values);
  return backends::GmmOperand(op.values, backends::OperandScales{*op.scales, op.type, op.granularity, true});
}

}  // namespace

void gmm_into(const GmmOperand& lhs, const GmmOperand& rhs, const TensorView& group_sizes,
              const TensorView& out, const GmmOptions& o) {
  if (o.quantize) {
    ops::recipe_gmm(lhs, rhs, group_sizes, out, o);
    return;
  }
  backends::GmmSpec spec = ops::validated_spec(spec_operand(lhs), spec_operand(rhs), group_sizes, o);
  spec.out = out;
  ops::run(spec, ops::settings_of(o));
}

Tensor gmm(const GmmOperand& lhs, const GmmOperand& rhs, const TensorView& group_sizes,
           const GmmOptions& options) {
  if (options.quantize) {
    ops::refuse_accumulate(options.accumulate, "gmm");
    return ops::recipe_gmm(lhs, rhs, group_sizes, std::nullopt, options);
  }
  return ops::run_into_new(
      ops::validated_spec(spec_operand(lhs), spec_operand(rhs), group_sizes, options),
      ops::settings_of(options), "gmm");
}

void tgmm_into(const GmmOperand& lhs, const GmmOperand& dout, const TensorView& group_sizes,
               const TensorView& out, const TgmmOptions& o) {
  if (o.quantize) {
    ops::recipe_tgmm(lhs, dout, group_sizes, out, o);
    return;
  }
  backends::GmmSpec spec = ops::validated_spec(spec_operand(lhs), spec_operand(dout), group_sizes, o);
  spec.out = out;
  ops::run(spec, ops::settings_of(o));
}

Tensor tgmm(const GmmOperand& lhs, const GmmOperand& dout, const TensorView& group_sizes,
            const TgmmOptions& options) {
  if (options.quantize) {
    ops::refuse_accumulate(options.accumulate, "tgmm");
    return ops::recipe_tgmm(lhs, dout, group_sizes, std::nullopt, options);
  }
  return ops::run_into_new(
      ops::validated_spec(spec_operand(lhs), spec_operand(dout), group_sizes, options),
      ops::settings_of(options), "tgmm");
}

}  // namespace raggemm
