#include "model/rmsnorm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "moe/ordered_sums.h"

// Serial on purpose, like the other glue loops (docs/moe_configuration.md:
// under load an OpenMP region around a loop this size cost more than the loop).
// The rows' sums run kOrderedSumChains rows at a time (moe/ordered_sums.h):
// each in its serial order, so the same bits as one row at a time.

namespace raggemm::model {

template <class T>
void rmsnorm_forward(const T* x, const T* scale, int64_t rows, int64_t dim, T* y, T* inv_rms) {
  // Block by block, so each block's rows are read from memory once: summed
  // (into inv_rms, then replaced by 1/rms), then scaled while in cache.
  for (int64_t b = 0; b < rows; b += moe::kOrderedSumChains) {
    const int64_t count = std::min(moe::kOrderedSumChains, rows - b);
    const T* xb = x + b * dim;
    moe::ordered_row_sums(
        count, dim, [xb, dim](int64_t r, int64_t i) { return xb[r * dim + i] * xb[r * dim + i]; },
        inv_rms + b);
    for (int64_t r = b; r < b + count; ++r) {
      const T* xr = x + r * dim;
      const T inv = T(1) / std::sqrt(inv_rms[r] / static_cast<T>(dim) + static_cast<T>(kNormEps));
      inv_rms[r] = inv;
      for (int64_t i = 0; i < dim; ++i) y[r * dim + i] = xr[i] * inv * scale[i];
    }
  }
}

template <class T>
void rmsnorm_backward(const T* x, const T* scale, const T* inv_rms, const T* dy, int64_t rows,
                      int64_t dim, T* dx, T* dscale) {
  for (int64_t i = 0; i < dim; ++i) dscale[i] = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * dim;
    const T* dyr = dy + r * dim;
    const T inv = inv_rms[r];
    for (int64_t i = 0; i < dim; ++i) dscale[i] += dyr[i] * xr[i] * inv;
  }
  // Each row's dot product of x * scale with dy, in index order.
  thread_local std::vector<T> dots;
  dots.resize(static_cast<size_t>(rows));
  moe::ordered_row_sums(
      rows, dim,
      [x, scale, dy, dim](int64_t r, int64_t i) {
        return x[r * dim + i] * scale[i] * dy[r * dim + i];
      },
      dots.data());
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * dim;
    const T* dyr = dy + r * dim;
    const T inv = inv_rms[r];
    const T coeff = dots[r] * inv * inv * inv / static_cast<T>(dim);
    T* dxr = dx + r * dim;
    for (int64_t i = 0; i < dim; ++i) dxr[i] += inv * scale[i] * dyr[i] - xr[i] * coeff;
  }
}

template void rmsnorm_forward<float>(const float*, const float*, int64_t, int64_t, float*, float*);
template void rmsnorm_forward<double>(const double*, const double*, int64_t, int64_t, double*,
                                      double*);
template void rmsnorm_backward<float>(const float*, const float*, const float*, const float*,
                                      int64_t, int64_t, float*, float*);
template void rmsnorm_backward<double>(const double*, const double*, const double*, const double*,
                                       int64_t, int64_t, double*, double*);

}  // namespace raggemm::model
