// Shared test support: random GMM problems, the reference oracle through the
// public tensor types, and error bounds scaled by the contraction length.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/group_offsets.h"
#include "kernels/gmm_kernel.h"
#include "kernels/reference.h"
#include "raggemm/gmm.h"
#include "raggemm/tensor.h"

namespace raggemm::testing {

inline Tensor random_tensor(Shape shape, DType dtype, uint32_t seed) {
  Tensor t(dtype, shape);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float v = normal(rng);
    if (dtype == DType::kF32) t.as<float>()[i] = v;
    if (dtype == DType::kBF16) t.as<uint16_t>()[i] = f32_to_bf16(v);
    if (dtype == DType::kF16) t.as<uint16_t>()[i] = f32_to_f16(v);
  }
  return t;
}

// An output buffer every element of which the op must overwrite: quiet
// NaNs (f32), or a quiet-NaN pattern (16-bit types), so an element a kernel
// fails to write (an empty group's zeros, rows past sum(sizes)) shows
// instead of passing as a freshly allocated zero.
inline Tensor poisoned(const Shape& shape, DType dtype = DType::kF32) {
  Tensor t(dtype, shape);
  if (dtype == DType::kF32) {
    std::fill_n(t.as<float>(), t.numel(), std::nanf(""));
  } else {
    std::fill_n(t.as<uint16_t>(), t.numel(), uint16_t{0x7fc1});
  }
  return t;
}

inline Tensor sizes_tensor(const std::vector<int64_t>& sizes) {
  Tensor t(DType::kI32, {static_cast<int64_t>(sizes.size())});
  for (size_t g = 0; g < sizes.size(); ++g) t.as<int32_t>()[g] = static_cast<int32_t>(sizes[g]);
  return t;
}

inline std::vector<int64_t> starts_of(const std::vector<int64_t>& sizes) {
  return group_row_starts(sizes);
}

inline kernels::Operand operand(const Tensor& t, int64_t ld) {
  return kernels::Operand{t.data(), t.dtype(), ld, {}};
}

// Reference gmm of the public op's arguments (f64 accumulation).
inline Tensor reference_gmm(const Tensor& lhs, const Tensor& rhs, const std::vector<int64_t>& sizes,
                            const GmmOptions& o) {
  const int64_t m = lhs.dim(0), k = lhs.dim(1);
  const int64_t n = o.transpose_rhs ? rhs.dim(1) : rhs.dim(2);
  std::vector<int64_t> starts = starts_of(sizes);
  kernels::GmmProblem p;
  p.lhs = operand(lhs, k);
  p.rhs.base = operand(rhs, o.transpose_rhs ? k : n);
  p.rhs.stride = k * n;
  p.transpose_rhs = o.transpose_rhs;
  p.m = m;
  p.k = k;
  p.n = n;
  p.starts = starts.data();
  p.num_groups = static_cast<int64_t>(sizes.size());
  p.group_offset = o.group_offset;
  p.local_groups = o.local_groups < 0 ? p.num_groups : o.local_groups;
  p.epilogue.swiglu = o.fuse_swiglu;
  if (o.row_scale) p.epilogue.row_scale = o.row_scale->as<const float>();
  if (o.col_scale) {
    p.epilogue.col_scale = o.col_scale->as<const float>();
    p.epilogue.col_scale_group_stride = o.col_scale->rank() == 2 ? n : 0;
  }
  if (o.col_bias) {
    p.epilogue.col_bias = o.col_bias->as<const float>();
    p.epilogue.col_bias_group_stride = o.col_bias->rank() == 2 ? n : 0;
  }
  Tensor out(DType::kF32, {m, p.out_cols()});
  p.out = out.as<float>();
  kernels::reference_gmm(p);
  return out;
}

inline Tensor reference_tgmm(const Tensor& lhs, const Tensor& dout,
                             const std::vector<int64_t>& sizes, const TgmmOptions& o) {
  std::vector<int64_t> starts = starts_of(sizes);
  kernels::TgmmProblem p;
  p.lhs = operand(lhs, lhs.dim(1));
  p.dout = operand(dout, dout.dim(1));
  p.m = lhs.dim(0);
  p.k = lhs.dim(1);
  p.n = dout.dim(1);
  p.starts = starts.data();
  p.num_groups = static_cast<int64_t>(sizes.size());
  p.group_offset = o.group_offset;
  p.local_groups = o.local_groups < 0 ? p.num_groups : o.local_groups;
  Tensor out(DType::kF32, {p.local_groups, p.k, p.n});
  p.out = out.as<float>();
  kernels::reference_tgmm(p);
  return out;
}

// Largest |a - b| / (contraction * eps * scale + tiny) over all elements, where
// scale is the magnitude of the reference; <= 1 passes. Exact zeros in the
// reference (rows past the groups, empty groups) must be exact zeros in `a`.
inline double max_scaled_error(const Tensor& a, const Tensor& ref, int64_t contraction,
                               double eps = 1.2e-7) {
  double worst = 0.0;
  const float* x = a.as<float>();
  const float* y = ref.as<float>();
  const double bound = std::max<int64_t>(contraction, 1) * eps * 4.0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double diff = std::fabs(static_cast<double>(x[i]) - y[i]);
    if (std::isnan(x[i]) != std::isnan(y[i])) return INFINITY;
    // Inputs are N(0,1): |ref| and sqrt(contraction) bound the magnitude.
    const double scale = std::max(std::fabs(static_cast<double>(y[i])),
                                  std::sqrt(static_cast<double>(std::max<int64_t>(contraction, 1))));
    worst = std::max(worst, diff / (bound * scale + 1e-30));
  }
  return worst;
}

}  // namespace raggemm::testing
