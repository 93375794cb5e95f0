// A dense matmul with a weight [K, N], run as a one-group grouped matmul so
// that the same kernels (and the same profiler accounting) serve it:
// forward out = x @ w, grad_lhs dx = dy @ w^T, grad_rhs dw = x^T @ dy.
#pragma once

#include <cstdint>

#include "moe/grouped_matmul.h"
#include "moe/plans.h"

namespace raggemm::moe {

// Trace names of one dense weight's passes (string literals).
struct DenseNames {
  const char* fwd;
  const char* dlhs;
  const char* drhs;
};

template <class T>
class DenseMatmul {
 public:
  DenseMatmul(const MoeConfig& config, MatmulContext context, int64_t k, int64_t n,
              DenseNames names)
      : config_(config), context_(context), k_(k), n_(n), names_(names) {}

  void forward(const T* x, int64_t rows, WeightArg<T> w, T* out) {
    prepare(rows);
    grouped_forward<T>(context_, configs_[0], names_.fwd, problem(), x, w, out);
  }
  void grad_lhs(const T* dy, int64_t rows, WeightArg<T> w, T* dx) {
    prepare(rows);
    grouped_grad_lhs<T>(context_, configs_[1], names_.dlhs, problem(), dy, w, dx);
  }
  void grad_rhs(const T* x, const T* dy, int64_t rows, T* dw) {
    prepare(rows);
    grouped_grad_rhs<T>(context_, configs_[2], names_.drhs, problem(), x, dy, dw);
  }

 private:
  void prepare(int64_t rows) {
    if (rows == rows_) return;
    rows_ = rows;
    group_size_ = static_cast<int32_t>(rows);
    configs_ = resolve_dense_passes(config_, rows, k_, n_, context_.dtype);
  }
  GroupedProblem problem() const { return GroupedProblem{&group_size_, 1, rows_, k_, n_}; }

  MoeConfig config_;
  MatmulContext context_;
  int64_t k_, n_;
  DenseNames names_;
  int64_t rows_ = -1;
  int32_t group_size_ = 0;
  PassConfigs configs_{};
};

}  // namespace raggemm::moe
