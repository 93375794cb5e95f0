// What a benchmark times for one problem: ours (raggemm's op, writing into a
// preallocated output) and two OpenBLAS peers, a loop of one sgemm per group
// (what a framework without a grouped matmul does) and one dense sgemm of
// the same total M, K, N (the speed a grouped matmul should reach).
//
// Header-only, shared by `raggemm bench` and bench/gmm_bench.cc; needs BLAS
// at link time.
#pragma once

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "cli/bench_problem.h"
#include "cli/common.h"
#include "raggemm/gmm.h"
#include "raggemm/tensor.h"

// OpenBLAS's thread control; declared here too in case the cblas.h found is
// not OpenBLAS's own (the build links OpenBLAS).
extern "C" void openblas_set_num_threads(int num_threads);

namespace raggemm::bench {

// One problem as the runners see it; a, b and out are laid out as
// bench_shapes() says, in f32 for the peers.
struct PeerOperands {
  BenchOp op = BenchOp::kGmm;
  int64_t m = 0, k = 0, n = 0;
  const std::vector<int32_t>* group_sizes = nullptr;
  const float* a = nullptr;
  const float* b = nullptr;
  float* out = nullptr;
};

inline void set_blas_threads(int threads) { openblas_set_num_threads(threads); }

// Ours: raggemm::gmm_into / tgmm_into into `out`.
inline void run_ours(BenchOp op, const TensorView& a, const TensorView& b,
                     const TensorView& group_sizes, const TensorView& out, const Tiles& tiles,
                     KernelVersion kernel, int threads, int buffers) {
  if (op == BenchOp::kTgmm) {
    tgmm_into(a, b, group_sizes, out,
              cli::kernel_options<TgmmOptions>(tiles, kernel, threads, buffers));
    return;
  }
  GmmOptions options = cli::kernel_options<GmmOptions>(tiles, kernel, threads, buffers);
  options.transpose_rhs = op == BenchOp::kDlhs;
  gmm_into(a, b, group_sizes, out, options);
}

// The per-group loop: one sgemm per non-empty group (tgmm zero-fills the
// slices of empty groups, as ours does).
inline void run_openblas_loop(const PeerOperands& p) {
  const int k = static_cast<int>(p.k), n = static_cast<int>(p.n);
  int64_t row = 0;
  for (size_t g = 0; g < p.group_sizes->size(); ++g) {
    const int rows = (*p.group_sizes)[g];
    switch (p.op) {
      case BenchOp::kGmm:
        if (rows > 0) {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, n, k, 1.0f, p.a + row * k, k,
                      p.b + int64_t(g) * k * n, n, 0.0f, p.out + row * n, n);
        }
        break;
      case BenchOp::kDlhs:
        if (rows > 0) {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, k, n, 1.0f, p.a + row * n, n,
                      p.b + int64_t(g) * k * n, n, 0.0f, p.out + row * k, k);
        }
        break;
      case BenchOp::kTgmm: {
        float* slice = p.out + int64_t(g) * k * n;
        if (rows > 0) {
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k, n, rows, 1.0f, p.a + row * k, k,
                      p.b + row * n, n, 0.0f, slice, n);
        } else {
          std::memset(slice, 0, sizeof(float) * size_t(k) * size_t(n));
        }
        break;
      }
    }
    row += rows;
  }
}

// Elements of the dense peer's output: [M,N], [M,K] or one [K,N] slice.
inline int64_t dense_out_elements(BenchOp op, int64_t m, int64_t k, int64_t n) {
  return op == BenchOp::kDlhs ? m * k : op == BenchOp::kGmm ? m * n : k * n;
}

// One dense sgemm of the same total size: gmm and dlhs against group 0's
// weights, tgmm over all M rows into one [K,N] slice.
inline void run_openblas_dense(const PeerOperands& p) {
  const int m = static_cast<int>(p.m), k = static_cast<int>(p.k), n = static_cast<int>(p.n);
  switch (p.op) {
    case BenchOp::kGmm:
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, p.a, k, p.b, n, 0.0f,
                  p.out, n);
      break;
    case BenchOp::kDlhs:
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, k, n, 1.0f, p.a, n, p.b, n, 0.0f,
                  p.out, k);
      break;
    case BenchOp::kTgmm:
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k, n, m, 1.0f, p.a, k, p.b, n, 0.0f,
                  p.out, n);
      break;
  }
}

// Runs `fn` `warmup` times untimed, then `reps` times; returns the median
// wall time in seconds.
template <class Fn>
double median_seconds(Fn&& fn, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> times;
  times.reserve(static_cast<size_t>(reps));
  for (int i = 0; i < reps; ++i) {
    auto start = std::chrono::steady_clock::now();
    fn();
    auto stop = std::chrono::steady_clock::now();
    times.push_back(std::chrono::duration<double>(stop - start).count());
  }
  std::sort(times.begin(), times.end());
  const size_t mid = times.size() / 2;
  return times.size() % 2 ? times[mid] : 0.5 * (times[mid - 1] + times[mid]);
}

inline double gflops(int64_t m, int64_t k, int64_t n, double seconds) {
  return 2.0 * double(m) * double(k) * double(n) / seconds * 1e-9;
}

}  // namespace raggemm::bench
