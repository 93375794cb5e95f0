#include "kernels/epilogue.h"

#include <cmath>

namespace raggemm::kernels {
namespace {

float silu(float x) { return x / (1.0f + std::exp(-x)); }

}  // namespace

void apply_epilogue(const GmmProblem& problem, int64_t g, int64_t row0, int64_t rows,
                    int64_t col0, int64_t width, const float* acc, int64_t acc_ld) {
  const Epilogue& e = problem.epilogue;
  const OutputView out = problem.output();
  const float* col_scale = e.col_scale ? e.col_scale + g * e.col_scale_group_stride : nullptr;
  const float* col_bias = e.col_bias ? e.col_bias + g * e.col_bias_group_stride : nullptr;
  const int64_t half = problem.n / 2;
  // Value of accumulator column `col` (absolute) held at acc_row[offset].
  auto finish = [&](const float* acc_row, int64_t offset, int64_t col, float row_scale) {
    float v = acc_row[offset] * row_scale;
    if (col_scale) v *= col_scale[col];
    if (col_bias) v += col_bias[col];
    return v;
  };
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t r = row0 + i;
    const float row_scale = e.row_scale ? e.row_scale[r] : 1.0f;
    const float* acc_row = acc + i * acc_ld;
    // Each value is finished in f32, then stored (rounded once to a bf16 output).
    for (int64_t j = 0; j < width; ++j) {
      if (e.swiglu) {
        const float gate = finish(acc_row, j, col0 + j, row_scale);
        const float up = finish(acc_row, width + j, half + col0 + j, row_scale);
        out.store_value(r, col0 + j, silu(gate) * up);
      } else {
        out.store_value(r, col0 + j, finish(acc_row, j, col0 + j, row_scale));
      }
    }
  }
}

}  // namespace raggemm::kernels
