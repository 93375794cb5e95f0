// RMSNorm over rows: y = x / rms(x) * scale (eps 1e-6, MaxText's
// normalization_layer_epsilon default), and its backward.
#pragma once

#include <cstdint>

namespace raggemm::model {

inline constexpr double kNormEps = 1e-6;

// Keeps 1/rms per row in inv_rms for backward.
template <class T>
void rmsnorm_forward(const T* x, const T* scale, int64_t rows, int64_t dim, T* y, T* inv_rms);

// dx += (d rmsnorm / dx)^T dy; dscale (overwritten) = sum over rows of dy * x / rms.
template <class T>
void rmsnorm_backward(const T* x, const T* scale, const T* inv_rms, const T* dy, int64_t rows,
                      int64_t dim, T* dx, T* dscale);

}  // namespace raggemm::model
