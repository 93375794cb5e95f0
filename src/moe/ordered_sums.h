// Per-row sums in index order, several rows at a time.
//
// A serial loop `sum += term(i)` waits on each add's latency (3-4 cycles),
// so the glue's row reductions (RMSNorm's sum of squares and dot product,
// the loss's softmax total, unpermute's gradient dot) ran at ~0.3 adds a
// cycle. Summing kOrderedSumChains rows together keeps every row's order,
// hence its bits (no reassociation, no FMA: each term is rounded, then
// added), while the independent chains overlap.
#pragma once

#include <cstdint>

namespace raggemm::moe {

inline constexpr int64_t kOrderedSumChains = 8;

// out[r] = (...((0 + term(r, 0)) + term(r, 1)) + ...) + term(r, dim - 1),
// r < rows: exactly the serial loop's result for each row.
template <class T, class Term>
void ordered_row_sums(int64_t rows, int64_t dim, Term&& term, T* out) {
  int64_t r = 0;
  for (; r + kOrderedSumChains <= rows; r += kOrderedSumChains) {
    T sum[kOrderedSumChains] = {};
    for (int64_t i = 0; i < dim; ++i) {
      for (int64_t j = 0; j < kOrderedSumChains; ++j) sum[j] += term(r + j, i);
    }
    for (int64_t j = 0; j < kOrderedSumChains; ++j) out[r + j] = sum[j];
  }
  for (; r < rows; ++r) {
    T sum = 0;
    for (int64_t i = 0; i < dim; ++i) sum += term(r, i);
    out[r] = sum;
  }
}

}  // namespace raggemm::moe
