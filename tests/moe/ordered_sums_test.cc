// ordered_row_sums (several rows' sums interleaved) and the glue built on it
// (unpermute's backward) give the serial loop's bits.
#include "moe/ordered_sums.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "moe/permute.h"

namespace raggemm::moe {
namespace {

template <class T>
std::vector<T> normal_values(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<T> v(n);
  // Wide magnitudes, so that a different summation order changes the bits.
  for (auto& x : v) x = static_cast<T>(normal(rng) * std::exp(3 * normal(rng)));
  return v;
}

template <class T>
bool same_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <class T>
void check_sums(int64_t rows, int64_t dim) {
  const std::vector<T> x = normal_values<T>(static_cast<size_t>(rows * dim), 11);
  std::vector<T> out(static_cast<size_t>(rows), T(-1));
  ordered_row_sums(
      rows, dim, [&](int64_t r, int64_t i) { return x[r * dim + i] * x[r * dim + i]; },
      out.data());
  for (int64_t r = 0; r < rows; ++r) {
    T sum = 0;
    for (int64_t i = 0; i < dim; ++i) sum += x[r * dim + i] * x[r * dim + i];
    ASSERT_TRUE(same_bits(sum, out[r])) << "rows " << rows << " dim " << dim << " row " << r;
  }
}

TEST(OrderedRowSums, SerialBitsForEveryRowCountAndWidth) {
  // Row counts below, at and past the chains (8), widths 0, 1, odd.
  for (int64_t rows : {0, 1, 7, 8, 9, 17, 64}) {
    for (int64_t dim : {0, 1, 5, 256, 257}) {
      check_sums<float>(rows, dim);
      check_sums<double>(rows, dim);
    }
  }
}

// Unpermute's backward: dweights as the serial dot products, drows scaled.
TEST(OrderedRowSums, CombineRowsBackwardMatchesSerialLoop) {
  const int64_t tokens = 37, k = 3, experts = 5, dim = 67;
  std::mt19937 rng(2);
  std::vector<int32_t> chosen(static_cast<size_t>(tokens * k));
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t j = 0; j < k; ++j) chosen[t * k + j] = static_cast<int32_t>((t + 2 * j) % experts);
  }
  Permutation perm;
  build_permutation(chosen.data(), tokens, k, experts, perm);
  const auto rows = normal_values<float>(static_cast<size_t>(tokens * k * dim), 3);
  const auto weights = normal_values<float>(static_cast<size_t>(tokens * k), 4);
  const auto dout = normal_values<float>(static_cast<size_t>(tokens * dim), 5);
  std::vector<float> drows(rows.size()), dweights(weights.size());
  combine_rows_backward(perm, rows.data(), weights.data(), dout.data(), dim, drows.data(),
                        dweights.data());
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t j = 0; j < k; ++j) {
      const int64_t r = perm.row_of[t * k + j];
      float dot = 0;
      for (int64_t d = 0; d < dim; ++d) {
        ASSERT_TRUE(same_bits(weights[t * k + j] * dout[t * dim + d], drows[r * dim + d]));
        dot += dout[t * dim + d] * rows[r * dim + d];
      }
      ASSERT_TRUE(same_bits(dot, dweights[t * k + j])) << "token " << t << " slot " << j;
    }
  }
}

}  // namespace
}  // namespace raggemm::moe
