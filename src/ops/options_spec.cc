#include "ops/options_spec.h"

#include "ops/run_spec.h"
#include "raggemm/error.h"

namespace raggemm::ops {
namespace {

// The fields GmmOptions and TgmmOptions share, by the same names.
template <class Options>
CallSettings shared_settings(const Options& o) {
  backends::Workspace* workspace = o.workspace ? &o.workspace->backend_workspace() : nullptr;
  return CallSettings{o.tiles, o.kernel, o.input_buffer_count, o.out_dtype, o.backend, workspace};
}

template <class Options>
backends::GmmSpec shared_spec(Pass pass, const backends::GmmOperand& lhs,
                              const backends::GmmOperand& rhs, const TensorView& group_sizes,
                              const Options& o) {
  backends::GmmSpec spec;
  spec.pass = pass;
  spec.lhs = lhs;
  spec.rhs = rhs;
  spec.group_sizes = group_sizes;
  spec.group_offset = o.group_offset;
  spec.local_groups = o.local_groups;
  spec.accumulate = o.accumulate;
  spec.threads = o.threads;
  return spec;
}

}  // namespace

CallSettings settings_of(const GmmOptions& o) { return shared_settings(o); }
CallSettings settings_of(const TgmmOptions& o) { return shared_settings(o); }

backends::GmmSpec validated_spec(const backends::GmmOperand& lhs, const backends::GmmOperand& rhs,
                                 const TensorView& group_sizes, const GmmOptions& o) {
  backends::GmmSpec spec = shared_spec(o.transpose_rhs ? Pass::kGradLhs : Pass::kForward, lhs,
                                       rhs, group_sizes, o);
  spec.fuse_swiglu = o.fuse_swiglu;
  spec.col_scale = o.col_scale;
  spec.col_bias = o.col_bias;
  spec.row_scale = o.row_scale;
  spec.swiglu_forward_stage = o.swiglu_forward_stage;
  spec.swiglu_backward_stage = o.swiglu_backward_stage;
  validate(spec, settings_of(o));
  return spec;
}

backends::GmmSpec validated_spec(const backends::GmmOperand& lhs, const backends::GmmOperand& dout,
                                 const TensorView& group_sizes, const TgmmOptions& o) {
  backends::GmmSpec spec = shared_spec(Pass::kGradRhs, lhs, dout, group_sizes, o);
  validate(spec, settings_of(o));
  return spec;
}

void refuse_accumulate(bool accumulate, const std::string& caller) {
  if (accumulate) {
    fail("accumulate", "true",
         caller + " allocates its output: accumulate into one with " + caller + "_into");
  }
}

Tensor run_into_new(backends::GmmSpec spec, const CallSettings& settings,
                    const std::string& caller) {
  refuse_accumulate(spec.accumulate, caller);
  Tensor out(settings.out_dtype, output_shape(spec));
  spec.out = out.view();
  run(spec, settings);
  return out;
}

}  // namespace raggemm::ops
