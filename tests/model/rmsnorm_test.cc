// RMSNorm forward and backward give the bits of the plain serial loops (the
// rows' sums run 8 rows at a time: moe/ordered_sums.h), for f32 and f64, at
// row counts that do and do not fill the interleaved chains.
#include "model/rmsnorm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace raggemm::model {
namespace {

template <class T>
std::vector<T> values(size_t n, unsigned seed, double spread) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(normal(rng) * std::exp(spread * normal(rng)));
  return v;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// The loops RMSNorm had before its sums were interleaved: the oracle.
template <class T>
void serial_forward(const T* x, const T* scale, int64_t rows, int64_t dim, T* y, T* inv_rms) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * dim;
    T sum = 0;
    for (int64_t i = 0; i < dim; ++i) sum += xr[i] * xr[i];
    const T inv = T(1) / std::sqrt(sum / static_cast<T>(dim) + static_cast<T>(kNormEps));
    inv_rms[r] = inv;
    for (int64_t i = 0; i < dim; ++i) y[r * dim + i] = xr[i] * inv * scale[i];
  }
}

template <class T>
void serial_backward(const T* x, const T* scale, const T* inv_rms, const T* dy, int64_t rows,
                     int64_t dim, T* dx, T* dscale) {
  for (int64_t i = 0; i < dim; ++i) dscale[i] = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < dim; ++i) dscale[i] += dy[r * dim + i] * x[r * dim + i] * inv_rms[r];
  }
  for (int64_t r = 0; r < rows; ++r) {
    const T inv = inv_rms[r];
    T dot = 0;
    for (int64_t i = 0; i < dim; ++i) dot += x[r * dim + i] * scale[i] * dy[r * dim + i];
    const T coeff = dot * inv * inv * inv / static_cast<T>(dim);
    for (int64_t i = 0; i < dim; ++i) {
      dx[r * dim + i] += inv * scale[i] * dy[r * dim + i] - x[r * dim + i] * coeff;
    }
  }
}

template <class T>
void check(int64_t rows, int64_t dim) {
  SCOPED_TRACE(::testing::Message() << "rows " << rows << " dim " << dim << " bytes " << sizeof(T));
  const auto n = static_cast<size_t>(rows * dim);
  const auto x = values<T>(n, 1, 2.0), dy = values<T>(n, 2, 2.0);
  const auto scale = values<T>(static_cast<size_t>(dim), 3, 0.5);
  std::vector<T> y(n), inv(static_cast<size_t>(rows)), y_ref(n), inv_ref(inv.size());
  rmsnorm_forward(x.data(), scale.data(), rows, dim, y.data(), inv.data());
  serial_forward(x.data(), scale.data(), rows, dim, y_ref.data(), inv_ref.data());
  EXPECT_TRUE(same_bits(y, y_ref));
  EXPECT_TRUE(same_bits(inv, inv_ref));
  // dx accumulates: start both from the same nonzero values.
  auto dx = values<T>(n, 4, 0.0), dx_ref = dx;
  std::vector<T> dscale(static_cast<size_t>(dim), T(7)), dscale_ref(dscale.size());
  rmsnorm_backward(x.data(), scale.data(), inv.data(), dy.data(), rows, dim, dx.data(),
                   dscale.data());
  serial_backward(x.data(), scale.data(), inv.data(), dy.data(), rows, dim, dx_ref.data(),
                  dscale_ref.data());
  EXPECT_TRUE(same_bits(dx, dx_ref));
  EXPECT_TRUE(same_bits(dscale, dscale_ref));
}

TEST(RmsNorm, SerialLoopsBitsF32AndF64) {
  for (int64_t rows : {1, 7, 8, 13, 64}) {
    for (int64_t dim : {1, 3, 64, 257}) {
      check<float>(rows, dim);
      check<double>(rows, dim);
    }
  }
}

}  // namespace
}  // namespace raggemm::model
