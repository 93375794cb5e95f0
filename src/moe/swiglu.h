// SiLU-GLU (SwiGLU) activation and its backward, elementwise over rows.
//   act = silu(gate) * up,  silu(z) = z * sigmoid(z)
// f32 rows go through the Highway kernels of glue_simd.h (the same bits as
// the scalar loop here, which double keeps).
// Serial below 4M elements: a parallel region costs more than it saves on a
// busy 2-core machine (measured: 40 ms vs ~5 ms per call under load).
// Gate and up live either in two buffers or side by side in one [rows, 2F]
// buffer (the fused gate|up layout); `stride` is the row stride of gate/up.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/glue_simd.h"

namespace raggemm::moe {

template <class T>
void swiglu_forward(const T* gate, const T* up, int64_t rows, int64_t width, int64_t stride,
                    T* act) {
#pragma omp parallel for schedule(static) if (rows * width >= (1 << 22))
  for (int64_t r = 0; r < rows; ++r) {
    const T* g = gate + r * stride;
    const T* u = up + r * stride;
    T* a = act + r * width;
    if constexpr (std::is_same_v<T, float>) {
      kernels::swiglu_forward_f32(g, u, width, a);
      continue;
    }
    for (int64_t i = 0; i < width; ++i) a[i] = g[i] / (T(1) + std::exp(-g[i])) * u[i];
  }
}

// dgate, dup have row stride `stride` (they may interleave in one buffer).
template <class T>
void swiglu_backward(const T* gate, const T* up, const T* dact, int64_t rows, int64_t width,
                     int64_t stride, T* dgate, T* dup) {
#pragma omp parallel for schedule(static) if (rows * width >= (1 << 22))
  for (int64_t r = 0; r < rows; ++r) {
    const T* g = gate + r * stride;
    const T* u = up + r * stride;
    const T* da = dact + r * width;
    T* dg = dgate + r * stride;
    T* du = dup + r * stride;
    if constexpr (std::is_same_v<T, float>) {
      kernels::swiglu_backward_f32(g, u, da, width, dg, du);
      continue;
    }
    for (int64_t i = 0; i < width; ++i) {
      const T sig = T(1) / (T(1) + std::exp(-g[i]));
      const T silu = g[i] * sig;
      dg[i] = da[i] * u[i] * sig * (T(1) + g[i] * (T(1) - sig));
      du[i] = da[i] * silu;
    }
  }
}

}  // namespace raggemm::moe
