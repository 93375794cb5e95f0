#include "backends/gmm_spec.h"

#include <omp.h>

#include "core/group_offsets.h"

namespace raggemm::backends {

void derive(GmmSpec& s) {
  s.m = s.lhs.values.dim(0);
  s.k = s.lhs.values.dim(1);
  if (s.pass == Pass::kGradRhs) {
    s.n = s.rhs.values.dim(1);
    s.rhs_groups = s.local_groups < 0 ? s.num_groups() : s.local_groups;
    s.out_cols = s.n;
  } else {
    s.n = s.rhs.values.dim(s.transpose_rhs() ? 1 : 2);
    s.rhs_groups = s.rhs.values.dim(0);
    s.out_cols = s.fuse_swiglu ? s.n / 2 : s.n;
  }
  s.resolved_local_groups = s.local_groups < 0 ? s.num_groups() : s.local_groups;
  s.starts = group_row_starts(s.group_sizes);
}

int resolved_threads(const GmmSpec& spec) {
  return spec.threads > 0 ? spec.threads : omp_get_max_threads();
}

GmmShape GmmSpec::shape() const {
  GmmShape shape;
  shape.pass = pass;
  shape.m = m;
  shape.k = k;
  // The heuristic tiles a gmm's output columns (after SwiGLU halves them).
  shape.n = pass == Pass::kGradRhs ? n : out_cols;
  shape.groups = resolved_local_groups;
  shape.lhs_dtype = lhs.quantized() ? DType::kF32 : lhs.values.dtype;
  shape.rhs_dtype = rhs.quantized() ? DType::kF32 : rhs.values.dtype;
  // The tune cache names quantized problems by the training config's recipe.
  if (lhs.quantized() || rhs.quantized()) {
    const QuantType type = lhs.quantized() ? lhs.quant->type : rhs.quant->type;
    shape.quantization = type == QuantType::kInt8 ? QuantRecipe::kInt8 : QuantRecipe::kFp8;
  }
  for (int64_t g = 0; g < resolved_local_groups; ++g) {
    shape.group_sizes.push_back(
        static_cast<int32_t>(starts[group_offset + g + 1] - starts[group_offset + g]));
  }
  return shape;
}

}  // namespace raggemm::backends
