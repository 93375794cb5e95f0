// Public gmm / tgmm on plain operands: a spec of the call, validated once
// (ops/validate.cc) before any write, then run on the chosen backend
// (ops/run_spec.cc).
#include "raggemm/gmm.h"

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

backends::GmmSpec gmm_spec(const TensorView& lhs, const TensorView& rhs,
                           const TensorView& group_sizes, const GmmOptions& o) {
  backends::GmmSpec spec;
  spec.pass = o.transpose_rhs ? Pass::kGradLhs : Pass::kForward;
  spec.lhs = lhs;
  spec.rhs = rhs;
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

backends::GmmSpec tgmm_spec(const TensorView& lhs, const TensorView& dout,
                            const TensorView& group_sizes, const TgmmOptions& o) {
  backends::GmmSpec spec;
  spec.pass = Pass::kGradRhs;
  spec.lhs = lhs;
  spec.rhs = dout;
  spec.group_sizes = group_sizes;
  spec.group_offset = o.group_offset;
  spec.local_groups = o.local_groups;
  spec.accumulate = o.accumulate;
  spec.threads = o.threads;
  ops::validate(spec, tgmm_settings(o));
  return spec;
}

}  // namespace

void gmm_into(const TensorView& lhs, const TensorView& rhs, const TensorView& group_sizes,
              const TensorView& out, const GmmOptions& o) {
  backends::GmmSpec spec = gmm_spec(lhs, rhs, group_sizes, o);
  spec.out = out;
  ops::run(spec, gmm_settings(o));
}

Tensor gmm(const TensorView& lhs, const TensorView& rhs, const TensorView& group_sizes,
           const GmmOptions& options) {
  backends::GmmSpec spec = gmm_spec(lhs, rhs, group_sizes, options);
  if (options.accumulate) {
    fail("accumulate", "true", "gmm allocates its output: accumulate into one with gmm_into");
  }
  Tensor out(options.out_dtype, ops::output_shape(spec));
  spec.out = out.view();
  ops::run(spec, gmm_settings(options));
  return out;
}

void tgmm_into(const TensorView& lhs, const TensorView& dout, const TensorView& group_sizes,
               const TensorView& out, const TgmmOptions& o) {
  backends::GmmSpec spec = tgmm_spec(lhs, dout, group_sizes, o);
  spec.out = out;
  ops::run(spec, tgmm_settings(o));
}

Tensor tgmm(const TensorView& lhs, const TensorView& dout, const TensorView& group_sizes,
            const TgmmOptions& options) {
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
