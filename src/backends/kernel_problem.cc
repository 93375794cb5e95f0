#include "backends/kernel_problem.h"

namespace raggemm::backends {
namespace {

// The OperandScale of a 2-D slice (row_axis, col_axis) of quantized scales,
// in storage coordinates; *group_stride: floats between slices along axis 0
// of a 3-D operand (0 when the scales do not vary by group).
kernels::OperandScale slice_scale(const OperandScales& q, int row_axis, int col_axis,
                                  int64_t* group_stride) {
  const Shape& shape = q.scales.shape;
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

// A 2-D operand (plain, or codes with their scales when they are applied in
// the kernel).
kernels::Operand matrix_operand(const GmmOperand& op) {
  kernels::Operand out{op.values.data, op.values.dtype, op.values.dim(1), {}};
  if (op.quant && op.quant->in_kernel) out.scale = slice_scale(*op.quant, 0, 1, nullptr);
  return out;
}

// A per-column output-stage vector: f32 [N] (shared) or [G_rhs, N].
const float* column_vector(const std::optional<TensorView>& v, int64_t n, int64_t* group_stride) {
  *group_stride = 0;
  if (!v) return nullptr;
  if (v->rank() == 2) *group_stride = n;
  return v->as<const float>();
}

// The spec's SwiGLU stage as the kernels read it.
kernels::SwigluStage swiglu_stage(const GmmSpec& s) {
  using Kind = kernels::SwigluStage::Kind;
  if (const auto& f = s.swiglu_forward_stage) {
    return {Kind::kForward, f->gate.as<const float>(), nullptr, f->act.as<float>()};
  }
  if (const auto& b = s.swiglu_backward_stage) {
    return {Kind::kBackward, b->gate.as<const float>(), b->up.as<const float>(), nullptr,
            b->dgate.as<float>(), b->dup.as<float>()};
  }
  return {};
}

// What every kernel problem (f32/bf16/quantized gmm, tgmm, int8 gmm) takes
// from the spec alike: the dims, the groups and the output.
template <class Problem>
void set_dims_groups_output(const GmmSpec& s, Problem& p) {
  p.m = s.m;
  p.k = s.k;
  p.n = s.n;
  p.starts = s.starts.data();
  p.num_groups = s.num_groups();
  p.group_offset = s.group_offset;
  p.local_groups = s.resolved_local_groups;
  p.out = s.out.dtype == DType::kF32 ? s.out.as<float>() : nullptr;
  p.out_bf16 = s.out.dtype == DType::kBF16 ? s.out.as<uint16_t>() : nullptr;
  p.accumulate = s.accumulate;
}

}  // namespace

kernels::GmmProblem gmm_problem(const GmmSpec& s) {
  kernels::GmmProblem p;
  p.lhs = matrix_operand(s.lhs);
  // rhs [G, K, N], or [G, N', K'] read transposed: row length is its last dim.
  p.rhs.base = kernels::Operand{s.rhs.values.data, s.rhs.values.dtype, s.rhs.values.dim(2), {}};
  p.rhs.stride = s.k * s.n;
  if (s.rhs.quant && s.rhs.quant->in_kernel) {
    p.rhs.base.scale = slice_scale(*s.rhs.quant, 1, 2, &p.rhs.scale_stride);
  }
  p.transpose_rhs = s.transpose_rhs();
  set_dims_groups_output(s, p);
  p.epilogue.swiglu = s.fuse_swiglu;
  p.epilogue.col_scale = column_vector(s.col_scale, s.n, &p.epilogue.col_scale_group_stride);
  p.epilogue.col_bias = column_vector(s.col_bias, s.n, &p.epilogue.col_bias_group_stride);
  p.epilogue.row_scale = s.row_scale ? s.row_scale->as<const float>() : nullptr;
  p.swiglu_stage = swiglu_stage(s);
  return p;
}

kernels::TgmmProblem tgmm_problem(const GmmSpec& s) {
  kernels::TgmmProblem p;
  p.lhs = matrix_operand(s.lhs);
  // dout's per-column scales scale the output's columns; applied as dout is
  // packed, which is the same product.
  p.dout = matrix_operand(s.rhs);
  set_dims_groups_output(s, p);
  return p;
}

std::optional<kernels::Int8GmmProblem> int8_problem(const GmmSpec& s) {
  const auto int8 = [](const GmmOperand& op) {
    return op.quant && op.quant->type == QuantType::kInt8 && op.quant->in_kernel;
  };
  if (s.pass != Pass::kForward || s.staged() || !int8(s.lhs) || !int8(s.rhs)) return std::nullopt;
  const bool per_row = s.lhs.quant->granularity == Granularity::channel({0});
  const bool per_column = s.rhs.quant->scales.dim(1) == 1;
  if (!per_row || !per_column || !kernels::int8_gmm_available()) return std::nullopt;
  int64_t group_stride = 0;
  const kernels::OperandScale ws = slice_scale(*s.rhs.quant, 1, 2, &group_stride);
  kernels::Int8GmmProblem p;
  p.lhs = s.lhs.values.as<const int8_t>();
  p.row_scale = s.lhs.quant->scales.as<const float>();
  p.rhs = s.rhs.values.as<const int8_t>();
  p.rhs_group_stride = s.k * s.n;
  p.col_scale = ws.data;
  p.col_scale_stride = ws.col_stride;
  p.col_scale_group_stride = group_stride;
  set_dims_groups_output(s, p);
  p.swiglu_stage = swiglu_stage(s);
  return p;
}

}  // namespace raggemm::backends
