// Permute: every (token, slot) pair becomes one row, rows stably counting-
// sorted by expert (O(tokens * k + E)); unpermute sums each token's k rows
// with its combine weights. Both run in parallel over rows or tokens.
#pragma once

#include <cstdint>
#include <vector>

namespace raggemm::moe {

struct Permutation {
  int64_t tokens = 0;
  int64_t top_k = 0;
  std::vector<int32_t> group_sizes;   // [E]
  std::vector<int64_t> row_of;        // [tokens * k]: row of pair (t, j)
  std::vector<int32_t> token_of_row;  // [tokens * k]
  int64_t rows() const { return tokens * top_k; }
};

// experts [tokens, k], each in [0, E).
void build_permutation(const int32_t* experts, int64_t tokens, int64_t top_k, int64_t num_experts,
                       Permutation& out);

// rows[r] = x[token_of_row[r]]; x [tokens, dim], rows [tokens*k, dim].
template <class T>
void gather_rows(const Permutation& perm, const T* x, int64_t dim, T* rows);

// out[t] = sum_j weights[t,j] * rows[row_of(t,j)] (overwrites out).
template <class T>
void combine_rows(const Permutation& perm, const T* rows, const T* weights, int64_t dim, T* out);

// Backward of combine_rows: drows[row_of(t,j)] = weights[t,j] * dout[t];
// dweights[t,j] = <dout[t], rows[row_of(t,j)]>.
template <class T>
void combine_rows_backward(const Permutation& perm, const T* rows, const T* weights, const T* dout,
                           int64_t dim, T* drows, T* dweights);

// Backward of gather_rows: dx[t] += sum_j drows[row_of(t,j)].
template <class T>
void scatter_add_rows(const Permutation& perm, const T* drows, int64_t dim, T* dx);

}  // namespace raggemm::moe
