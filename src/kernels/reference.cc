#include "kernels/reference.h"

#include <cmath>
#include <vector>

#include "kernels/decode.h"
#include "kernels/swiglu_stage.h"

namespace raggemm::kernels {

void reference_gmm(const GmmProblem& p) {
  const int64_t out_cols = p.out_cols();
  const Epilogue& e = p.epilogue;
  const ReferenceGroups groups{p.starts, p.group_offset, p.local_groups};
  std::vector<Operand> rhs(static_cast<size_t>(std::max<int64_t>(p.local_groups, 0)));
  for (int64_t g = 0; g < p.local_groups; ++g) rhs[g] = p.rhs.group(g);
  const auto lhs_at = [&](int64_t r, int64_t q) -> double { return decode_element(p.lhs, r, q); };
  const auto rhs_at = [&](int64_t g, int64_t q, int64_t j) -> double {
    return p.transpose_rhs ? decode_element(rhs[g], j, q) : decode_element(rhs[g], q, j);
  };
  // Written through the drivers' output view: f32 or bf16 (rounded once
  // from the f32 value), overwritten or accumulated into.
  const OutputView out = p.output();
  const auto finish = [&](int64_t r, int64_t g, double* acc) {
    if (g < 0) {
      out.zero(r, 0, 1, out_cols);  // rows of no local group (left as they are when accumulating)
      return;
    }
    for (int64_t j = 0; j < p.n; ++j) {
      if (e.row_scale) acc[j] *= e.row_scale[r];
      if (e.col_scale) acc[j] *= e.col_scale[g * e.col_scale_group_stride + j];
      if (e.col_bias) acc[j] += e.col_bias[g * e.col_bias_group_stride + j];
    }
    for (int64_t j = 0; j < out_cols; ++j) {
      if (e.swiglu) {
        const double gate = acc[j];
        const double up = acc[out_cols + j];
        out.store_value(r, j, static_cast<float>(gate / (1.0 + std::exp(-gate)) * up));
      } else {
        out.store_value(r, j, static_cast<float>(acc[j]));
      }
    }
    // The stage is defined on the stored f32 output (swiglu_stage.h), so the
    // oracle runs the kernels' own on it.
    apply_swiglu_stage(p, r, 1, 0, out_cols);
  };
  zero_swiglu_stage_uncovered(p);
  reference_gmm_rows(groups, p.m, p.k, p.n, lhs_at, rhs_at, finish);
}

void reference_tgmm(const TgmmProblem& p) {
  const ReferenceGroups groups{p.starts, p.group_offset, p.local_groups};
  const auto lhs_at = [&](int64_t t, int64_t i) -> double { return decode_element(p.lhs, t, i); };
  const auto dout_at = [&](int64_t t, int64_t j) -> double { return decode_element(p.dout, t, j); };
  const OutputView out = p.output();
  const auto finish = [&](int64_t g, int64_t i, const double* acc) {
    const double scale = p.out_group_scale ? p.out_group_scale[g] : 1.0;
    for (int64_t j = 0; j < p.n; ++j) {
      out.store_value(g * p.k + i, j, static_cast<float>(acc[j] * scale));
    }
  };
  reference_tgmm_groups(groups, p.k, p.n, lhs_at, dout_at, finish);
}

}  // namespace raggemm::kernels
