// Public gmm / tgmm on plain operands: a spec of the call, validated once
// (ops/validate.cc) before any write, then run on the chosen backend
// (ops/run_spec.cc).
#include "raggemm/gmm.h"

#include "ops/recipe_call.h"
#include "ops/run_spec.h"
#include "raggemm/error.h"

namespace raggemm {
namespace {

ops::CallSettings gmm_settings(const GmmOptions& o) {
  return ops::CallSettings{o.tiles, o.kernel, o.input_buffer_count, o.out_dtype, o.backend};
}

ops::CallSettings tgmm_settings(const TgmmOptions& o) {
  return ops::CallSettings{o.tiles, o.kernel, o.input_buffer_count, o.out_dtype, o.backend};
}

// A public operand as the spec carries it: a quantized one's scales are the
// backend's to apply.
backends::GmmOperand spec_operand(const GmmOperand& op) {
  if (!op.quantized()) return backends::GmmOperand(op.values);
  return backends::GmmOperand(op.values, backends::OperandScales{*op.scales, op.type, op.granularity, true});
}

backends::GmmSpec gmm_spec(const GmmOperand& lhs, const GmmOperand& rhs,
                           const TensorView& group_sizes, const GmmOptions& o) {
  backends::GmmSpec spec;
  spec.pass = o.transpose_rhs ? Pass::kGradLhs : Pass::kForward;
  spec.lhs = spec_operand(lhs);
  spec.rhs = spec_operand(rhs);
  spec.group_sizes = group_sizes;
  spec.group_offset = o.group_offset;
  spec.local_groups = o.local_groups;
  spec.fuse_swiglu = o.fuse_swiglu;
  spec.col_scale = o.col_scale;
  spec.col_bias = o.col_bias;
  spec.row_scale = o.row_scale;
  spec.accumulate = o.accumulate;
  spec.threads = o.threads;
  ops::validate(spec, gmm_settings(o));
  return spec;
}

backends::GmmSpec tgmm_spec(const GmmOperand& lhs, const GmmOperand& dout,
                            const TensorView& group_sizes, const TgmmOptions& o) {
  backends::GmmSpec spec;
  spec.pass = Pass::kGradRhs;
  spec.lhs = spec_operand(lhs);
  spec.rhs = spec_operand(dout);
  spec.group_sizes = group_sizes;
  spec.group_offset = o.group_offset;
  spec.local_groups = o.local_groups;
  spec.accumulate = o.accumulate;
  spec.threads = o.threads;
  ops::validate(spec, tgmm_settings(o));
  return spec;
}

}  // namespace

void gmm_into(const GmmOperand& lhs, const GmmOperand& rhs, const TensorView& group_sizes,
              const TensorView& out, const GmmOptions& o) {
  if (o.quantize) {
    ops::recipe_gmm(lhs, rhs, group_sizes, out, o);
    return;
  }
  backends::GmmSpec spec = gmm_spec(lhs, rhs, group_sizes, o);
  spec.out = out;
  ops::run(spec, gmm_settings(o));
}

Tensor gmm(const GmmOperand& lhs, const GmmOperand& rhs, const TensorView& group_sizes,
           const GmmOptions& options) {
  if (options.quantize) {
    if (options.accumulate) {
      fail("accumulate", "true", "gmm allocates its output: accumulate into one with gmm_into");
    }
    return ops::recipe_gmm(lhs, rhs, group_sizes, std::nullopt, options);
  }
  backends::GmmSpec spec = gmm_spec(lhs, rhs, group_sizes, options);
  if (options.accumulate) {
    fail("accumulate", "true", "gmm allocates its output: accumulate into one with gmm_into");
  }
  Tensor out(options.out_dtype, ops::output_shape(spec));
  spec.out = out.view();
  ops::run(spec, gmm_settings(options));
  return out;
}

void tgmm_into(const GmmOperand& lhs, const GmmOperand& dout, const TensorView& group_sizes,
               const TensorView& out, const TgmmOptions& o) {
  if (o.quantize) {
    ops::recipe_tgmm(lhs, dout, group_sizes, out, o);
    return;
  }
  backends::GmmSpec spec = tgmm_spec(lhs, dout, group_sizes, o);
  spec.out = out;
  ops::run(spec, tgmm_settings(o));
}

Tensor tgmm(const GmmOperand& lhs, const GmmOperand& dout, const TensorView& group_sizes,
            const TgmmOptions& options) {
  if (options.quantize) {
    if (options.accumulate) {
      fail("accumulate", "true", "tgmm allocates its output: accumulate into one with tgmm_into");
    }
    return ops::recipe_tgmm(lhs, dout, group_sizes, std::nullopt, options);
  }
  backends::GmmSpec spec = tgmm_spec(lhs, dout, group_sizes, options);
  if (options.accumulate) {
    fail("accumulate", "true", "tgmm allocates its output: accumulate into one with tgmm_into");
  }
  Tensor out(options.out_dtype, ops::output_shape(spec));
  spec.out = out.view();
  ops::run(spec, tgmm_settings(options));
  return out;
}

}  // namespace raggemm
