// The oracle: naive grouped matmuls with f64 accumulation, reading operands
// through the same decode (dtype, dequantization scales) as the kernels and
// applying the same output stage. Never used for speed.
//
// The loops are written once, over element accessors (reference_gmm_rows,
// reference_tgmm_groups): the kernel problems instantiate them with the
// kernels' decode, and the MoE layer's reference backend (plain float or
// double buffers, its f64 gradient checks) with plain loads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/gmm_kernel.h"

namespace raggemm::kernels {

void reference_gmm(const GmmProblem& problem);
void reference_tgmm(const TgmmProblem& problem);

// The row space of a grouped problem: rows starts[offset + g] ..
// starts[offset + g + 1] belong to local group g; other rows to none.
struct ReferenceGroups {
  const int64_t* starts = nullptr;  // size >= group_offset + local_groups + 1
  int64_t group_offset = 0;
  int64_t local_groups = 0;

  // The local group of row r, or -1 where no local group covers it.
  int64_t local_group_of(int64_t r) const {
    if (r < starts[group_offset] || r >= starts[group_offset + local_groups]) return -1;
    int64_t g = group_offset;
    while (starts[g + 1] <= r) ++g;
    return g - group_offset;
  }
};

// For every row r < m: acc[j] = sum_q lhs(r, q) * rhs(g, q, j) in f64 (q
// ascending) for j < n, then row(r, g, acc); g = -1 (acc all zero) for rows
// no local group covers. `parallel`: rows split across OpenMP threads (each
// row is computed by one thread, so results do not depend on the count).
template <class Lhs, class Rhs, class Row>
void reference_gmm_rows(const ReferenceGroups& groups, int64_t m, int64_t k, int64_t n,
                        const Lhs& lhs, const Rhs& rhs, const Row& row, bool parallel = false) {
#pragma omp parallel if (parallel)
  {
    std::vector<double> acc(static_cast<size_t>(n));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < m; ++r) {
      const int64_t g = groups.local_group_of(r);
      std::fill(acc.begin(), acc.end(), 0.0);
      if (g >= 0) {
        for (int64_t q = 0; q < k; ++q) {
          const double a = lhs(r, q);
          for (int64_t j = 0; j < n; ++j) acc[j] += a * rhs(g, q, j);
        }
      }
      row(r, g, acc.data());
    }
  }
}

// For every local group g and i < k: acc[j] = sum over the group's rows t
// (ascending) of lhs(t, i) * dout(t, j) in f64, then out(g, i, acc); an
// empty group gives zeros.
template <class Lhs, class Dout, class Out>
void reference_tgmm_groups(const ReferenceGroups& groups, int64_t k, int64_t n, const Lhs& lhs,
                           const Dout& dout, const Out& out, bool parallel = false) {
#pragma omp parallel if (parallel)
  {
    std::vector<double> acc(static_cast<size_t>(n));
#pragma omp for schedule(static) collapse(2)
    for (int64_t g = 0; g < groups.local_groups; ++g) {
      for (int64_t i = 0; i < k; ++i) {
        std::fill(acc.begin(), acc.end(), 0.0);
        const int64_t global = groups.group_offset + g;
        for (int64_t t = groups.starts[global]; t < groups.starts[global + 1]; ++t) {
          const double a = lhs(t, i);
          for (int64_t j = 0; j < n; ++j) acc[j] += a * dout(t, j);
        }
        out(g, i, acc.data());
      }
    }
  }
}

}  // namespace raggemm::kernels
