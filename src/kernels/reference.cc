#include "kernels/reference.h"

#include <cmath>
#include <vector>

#include "kernels/decode.h"

namespace raggemm::kernels {

void reference_gmm(const GmmProblem& p) {
  const int64_t out_cols = p.out_cols();
  const Epilogue& e = p.epilogue;
  std::vector<double> acc(static_cast<size_t>(p.n));
  for (int64_t r = 0; r < p.m; ++r) {
    float* out = p.out + r * out_cols;
    int64_t g = -1;
    for (int64_t h = 0; h < p.local_groups; ++h) {
      if (r >= p.starts[p.group_offset + h] && r < p.starts[p.group_offset + h + 1]) g = h;
    }
    if (g < 0) {
      for (int64_t j = 0; j < out_cols; ++j) out[j] = 0.0f;
      continue;
    }
    const Operand rhs = p.rhs.group(g);
    for (int64_t j = 0; j < p.n; ++j) {
      double sum = 0.0;
      for (int64_t q = 0; q < p.k; ++q) {
        const double b = p.transpose_rhs ? decode_element(rhs, j, q) : decode_element(rhs, q, j);
        sum += static_cast<double>(decode_element(p.lhs, r, q)) * b;
      }
      if (e.row_scale) sum *= e.row_scale[r];
      if (e.col_scale) sum *= e.col_scale[g * e.col_scale_group_stride + j];
      if (e.col_bias) sum += e.col_bias[g * e.col_bias_group_stride + j];
      acc[j] = sum;
    }
    for (int64_t j = 0; j < out_cols; ++j) {
      if (e.swiglu) {
        const double gate = acc[j];
        const double up = acc[out_cols + j];
        out[j] = static_cast<float>(gate / (1.0 + std::exp(-gate)) * up);
      } else {
        out[j] = static_cast<float>(acc[j]);
      }
    }
  }
}

void reference_tgmm(const TgmmProblem& p) {
  for (int64_t g = 0; g < p.local_groups; ++g) {
    const int64_t begin = p.starts[p.group_offset + g];
    const int64_t end = p.starts[p.group_offset + g + 1];
    const double scale = p.out_group_scale ? p.out_group_scale[g] : 1.0;
    for (int64_t i = 0; i < p.k; ++i) {
      for (int64_t j = 0; j < p.n; ++j) {
        double sum = 0.0;
        for (int64_t t = begin; t < end; ++t) {
          sum += static_cast<double>(decode_element(p.lhs, t, i)) * decode_element(p.dout, t, j);
        }
        p.out[(g * p.k + i) * p.n + j] = static_cast<float>(sum * scale);
      }
    }
  }
}

}  // namespace raggemm::kernels
