// Counting-sort permutation of (token, slot) pairs by expert, and the
// gather / weighted-combine ops around the expert matmuls. These are
// memory-bound and small (a few MB); serial loops beat a parallel region's
// fork and barrier, which on a busy 2-core machine can cost milliseconds.
#include "moe/permute.h"

#include <algorithm>

#include "moe/ordered_sums.h"
#include "raggemm/error.h"

namespace raggemm::moe {

void build_permutation(const int32_t* experts, int64_t tokens, int64_t top_k, int64_t num_experts,
                       Permutation& out) {
  const int64_t pairs = tokens * top_k;
  out.tokens = tokens;
  out.top_k = top_k;
  out.group_sizes.assign(static_cast<size_t>(num_experts), 0);
  for (int64_t a = 0; a < pairs; ++a) {
    const int32_t e = experts[a];
    require(e >= 0 && e < num_experts, "experts", e, "expert index out of range");
    ++out.group_sizes[e];
  }
  std::vector<int64_t> next(static_cast<size_t>(num_experts), 0);
  for (int64_t e = 1; e < num_experts; ++e) next[e] = next[e - 1] + out.group_sizes[e - 1];
  out.row_of.resize(static_cast<size_t>(pairs));
  out.token_of_row.resize(static_cast<size_t>(pairs));
  // Visiting pairs in (token, slot) order keeps the sort stable.
  for (int64_t a = 0; a < pairs; ++a) {
    const int64_t row = next[experts[a]]++;
    out.row_of[a] = row;
    out.token_of_row[row] = static_cast<int32_t>(a / top_k);
  }
}

template <class T>
void gather_rows(const Permutation& perm, const T* x, int64_t dim, T* rows) {
  const int64_t count = perm.rows();
  for (int64_t r = 0; r < count; ++r) {
    std::copy_n(x + perm.token_of_row[r] * dim, dim, rows + r * dim);
  }
}

template <class T>
void combine_rows(const Permutation& perm, const T* rows, const T* weights, int64_t dim, T* out) {
  const int64_t k = perm.top_k;
  for (int64_t t = 0; t < perm.tokens; ++t) {
    T* out_row = out + t * dim;
    std::fill_n(out_row, dim, T(0));
    for (int64_t j = 0; j < k; ++j) {
      const T w = weights[t * k + j];
      const T* row = rows + perm.row_of[t * k + j] * dim;
      for (int64_t d = 0; d < dim; ++d) out_row[d] += w * row[d];
    }
  }
}

template <class T>
void combine_rows_backward(const Permutation& perm, const T* rows, const T* weights, const T* dout,
                           int64_t dim, T* drows, T* dweights) {
  const int64_t k = perm.top_k, pairs = perm.rows();
  for (int64_t t = 0; t < perm.tokens; ++t) {
    const T* dout_row = dout + t * dim;
    for (int64_t j = 0; j < k; ++j) {
      const T w = weights[t * k + j];
      T* drow = drows + perm.row_of[t * k + j] * dim;
      for (int64_t d = 0; d < dim; ++d) drow[d] = w * dout_row[d];
    }
  }
  // dweights: a dot product per pair, several pairs at a time, each in its
  // serial order (ordered_sums.h).
  const int64_t* row_of = perm.row_of.data();
  ordered_row_sums(
      pairs, dim,
      [=](int64_t a, int64_t d) { return dout[(a / k) * dim + d] * rows[row_of[a] * dim + d]; },
      dweights);
}

template <class T>
void scatter_add_rows(const Permutation& perm, const T* drows, int64_t dim, T* dx) {
  const int64_t k = perm.top_k;
  for (int64_t t = 0; t < perm.tokens; ++t) {
    T* dx_row = dx + t * dim;
    for (int64_t j = 0; j < k; ++j) {
      const T* drow = drows + perm.row_of[t * k + j] * dim;
      for (int64_t d = 0; d < dim; ++d) dx_row[d] += drow[d];
    }
  }
}

#define RAGGEMM_INSTANTIATE(T)                                                             \
  template void gather_rows<T>(const Permutation&, const T*, int64_t, T*);                 \
  template void combine_rows<T>(const Permutation&, const T*, const T*, int64_t, T*);      \
  template void combine_rows_backward<T>(const Permutation&, const T*, const T*, const T*, \
                                         int64_t, T*, T*);                                 \
  template void scatter_add_rows<T>(const Permutation&, const T*, int64_t, T*);
RAGGEMM_INSTANTIATE(float)
RAGGEMM_INSTANTIATE(double)
#undef RAGGEMM_INSTANTIATE

}  // namespace raggemm::moe
