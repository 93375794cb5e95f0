#include "model/causal_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/block_gemm.h"
#include "raggemm/error.h"
#include "tune/cpu_info.h"

namespace raggemm::model {
namespace {

struct Matrix {
  const void* data;
  int64_t ld;
  bool transposed;
};

// The contraction chunk of a block matmul: BLIS's rule of thumb keeps an A
// and a B micro-panel (together under 64 floats wide) in half the L1.
int64_t contraction_chunk() {
  static const int64_t kc =
      std::clamp<int64_t>(tune::cache_sizes().l1d / static_cast<int64_t>(2 * 64 * sizeof(float)), 64, 512);
  return kc;
}

// C[m, n] (=|+=) op(A) op(B), see kernels/block_gemm.h.
void gemm(int64_t m, int64_t n, int64_t k, Matrix a, Matrix b, float* c, int64_t ldc,
          bool accumulate) {
  kernels::block_gemm(m, n, k, {static_cast<const float*>(a.data), a.ld, a.transposed},
                      {static_cast<const float*>(b.data), b.ld, b.transposed}, c, ldc, accumulate,
                      contraction_chunk());
}

void gemm(int64_t m, int64_t n, int64_t k, Matrix a, Matrix b, double* c, int64_t ldc,
          bool accumulate) {
  const double* ad = static_cast<const double*>(a.data);
  const double* bd = static_cast<const double*>(b.data);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double av = a.transposed ? ad[p * a.ld + i] : ad[i * a.ld + p];
        const double bv = b.transposed ? bd[j * b.ld + p] : bd[p * b.ld + j];
        sum += av * bv;
      }
      c[i * ldc + j] = accumulate ? c[i * ldc + j] + sum : sum;
    }
  }
}

// Pointers into the layouts for one (sequence, head) and a first position.
template <class T>
struct Views {
  const AttentionDims& d;
  int64_t group() const { return d.heads / d.kv_heads; }
  int64_t ldq() const { return d.heads * d.qk_dim; }
  int64_t ldk() const { return d.kv_heads * d.qk_dim; }
  int64_t ldv() const { return d.kv_heads * d.v_dim; }
  int64_t ldo() const { return d.heads * d.v_dim; }
  int64_t q_at(int64_t b, int64_t pos, int64_t h) const {
    return ((b * d.seq + pos) * d.heads + h) * d.qk_dim;
  }
  int64_t k_at(int64_t b, int64_t pos, int64_t kvh) const {
    return ((b * d.seq + pos) * d.kv_heads + kvh) * d.qk_dim;
  }
  int64_t v_at(int64_t b, int64_t pos, int64_t kvh) const {
    return ((b * d.seq + pos) * d.kv_heads + kvh) * d.v_dim;
  }
  int64_t o_at(int64_t b, int64_t pos, int64_t h) const {
    return ((b * d.seq + pos) * d.heads + h) * d.v_dim;
  }
  int64_t row_at(int64_t b, int64_t pos, int64_t h) const { return (b * d.seq + pos) * d.heads + h; }
};

void check(const AttentionDims& d) {
  require(d.batch >= 0 && d.seq >= 1, "attention seq", d.seq, "must be at least 1");
  require(d.heads >= 1 && d.kv_heads >= 1 && d.heads % d.kv_heads == 0,
          "base_num_query_heads,base_num_kv_heads",
          std::to_string(d.heads) + "," + std::to_string(d.kv_heads),
          "query heads must be a positive multiple of kv heads");
  require(d.qk_dim >= 1 && d.v_dim >= 1, "head_dim", d.qk_dim, "must be at least 1");
}

// Scores of query rows [i0, i0 + rows) against key rows [j0, j0 + cols) of
// one head turned into probabilities P = exp(scale * q.k - lse) (0 where the
// key is in the future), and with grad, dS = scale * P * (dP - D).
template <class T>
void probabilities(const AttentionDims& d, int64_t i0, int64_t rows, int64_t j0, int64_t cols,
                   const T* lse_rows, int64_t lse_stride, T* s, int64_t lds) {
  const T scale = static_cast<T>(d.scale);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = i0 + r;
    const T lse = lse_rows[r * lse_stride];
    T* row = s + r * lds;
    for (int64_t c = 0; c < cols; ++c) {
      row[c] = j0 + c <= i ? std::exp(row[c] * scale - lse) : T(0);
    }
  }
}

// Task `task` of sequences x heads x blocks: which sequence, head and block.
// latest_first: block numbers count down (later query blocks see more keys,
// so dynamic scheduling starts them first).
struct BlockTask {
  int64_t b, head, block;
};
BlockTask block_task(int64_t task, int64_t heads, int64_t blocks, bool latest_first) {
  const int64_t block = task % blocks;
  return {task / (blocks * heads), (task / blocks) % heads,
          latest_first ? blocks - 1 - block : block};
}

// Small problems (a few sequences of tens of tokens) run on one thread: a
// parallel region would cost more than the work.
bool worth_threads(const AttentionDims& d) {
  const double pairs = static_cast<double>(d.seq) * static_cast<double>(d.seq + 1) / 2;
  return pairs * static_cast<double>(d.batch * d.heads * (d.qk_dim + d.v_dim)) >= 4e6;
}

}  // namespace

int64_t attention_block_rows(const AttentionDims& d) {
  const int64_t budget = tune::cache_sizes().l2 / 2 / static_cast<int64_t>(sizeof(float));
  int64_t block = 16;
  for (int64_t candidate = 32; candidate <= 256; candidate *= 2) {
    const int64_t floats =
        candidate * (2 * d.qk_dim + 2 * d.v_dim) + 2 * candidate * candidate;
    if (floats > budget) break;
    block = candidate;
  }
  return block;
}

template <class T>
void causal_attention_forward(const AttentionDims& d, const T* q, const T* k, const T* v, T* out,
                              T* lse) {
  check(d);
  const Views<T> at{d};
  const int64_t block = attention_block_rows(d);
  const int64_t q_blocks = (d.seq + block - 1) / block;
  const int64_t tasks = d.batch * d.heads * q_blocks;
  const T scale = static_cast<T>(d.scale);
  const bool threads = worth_threads(d);
#pragma omp parallel if (threads)
  {
    std::vector<T> s(static_cast<size_t>(block * block));
    std::vector<T> acc(static_cast<size_t>(block * d.v_dim));
    std::vector<T> m(static_cast<size_t>(block)), l(static_cast<size_t>(block));
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; ++task) {
      const auto [b, h, qb] = block_task(task, d.heads, q_blocks, true);
      const int64_t kvh = h / at.group();
      const int64_t i0 = qb * block, rows = std::min(block, d.seq - i0);
      std::fill(m.begin(), m.end(), -std::numeric_limits<T>::infinity());
      std::fill(l.begin(), l.end(), T(0));
      std::fill(acc.begin(), acc.end(), T(0));
      for (int64_t j0 = 0; j0 < i0 + rows; j0 += block) {
        const int64_t cols = std::min(block, i0 + rows - j0);
        gemm(rows, cols, d.qk_dim, {q + at.q_at(b, i0, h), at.ldq(), false},
             {k + at.k_at(b, j0, kvh), at.ldk(), true}, s.data(), block, false);
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t i = i0 + r;
          T* row = s.data() + r * block;
          const int64_t valid = std::min(cols, i - j0 + 1);  // keys j <= i
          T peak = m[r];
          for (int64_t c = 0; c < valid; ++c) peak = std::max(peak, row[c] * scale);
          const T alpha = std::exp(m[r] - peak);  // 0 on the first block (m = -inf)
          T sum = 0;
          for (int64_t c = 0; c < cols; ++c) {
            row[c] = c < valid ? std::exp(row[c] * scale - peak) : T(0);
            sum += row[c];
          }
          l[r] = l[r] * alpha + sum;
          m[r] = peak;
          T* acc_row = acc.data() + r * d.v_dim;
          for (int64_t c = 0; c < d.v_dim; ++c) acc_row[c] *= alpha;
        }
        gemm(rows, d.v_dim, cols, {s.data(), block, false},
             {v + at.v_at(b, j0, kvh), at.ldv(), false}, acc.data(), d.v_dim, true);
      }
      for (int64_t r = 0; r < rows; ++r) {
        T* o = out + at.o_at(b, i0 + r, h);
        const T inv = T(1) / l[r];
        for (int64_t c = 0; c < d.v_dim; ++c) o[c] = acc[r * d.v_dim + c] * inv;
        lse[at.row_at(b, i0 + r, h)] = m[r] + std::log(l[r]);
      }
    }
  }
}

template <class T>
void causal_attention_backward(const AttentionDims& d, const T* q, const T* k, const T* v,
                               const T* out, const T* lse, const T* dout, T* dq, T* dk, T* dv) {
  check(d);
  const Views<T> at{d};
  const int64_t block = attention_block_rows(d);
  const int64_t blocks = (d.seq + block - 1) / block;
  const int64_t rows_total = d.batch * d.seq * d.heads;
  const T scale = static_cast<T>(d.scale);
  // D = rowsum(dout * out): the softmax backward's per-row term.
  std::vector<T> delta(static_cast<size_t>(rows_total));
  const bool threads = worth_threads(d);
#pragma omp parallel for schedule(static) if (threads)
  for (int64_t r = 0; r < rows_total; ++r) {
    T sum = 0;
    for (int64_t c = 0; c < d.v_dim; ++c) sum += dout[r * d.v_dim + c] * out[r * d.v_dim + c];
    delta[r] = sum;
  }
  // dS = scale * P * (dP - D) for rows i0.. of head h, in place over dp.
  auto scores_grad = [&](int64_t b, int64_t h, int64_t i0, int64_t rows, int64_t j0, int64_t cols,
                         T* p, T* dp) {
    const int64_t kvh = h / at.group();
    gemm(rows, cols, d.qk_dim, {q + at.q_at(b, i0, h), at.ldq(), false},
         {k + at.k_at(b, j0, kvh), at.ldk(), true}, p, block, false);
    probabilities(d, i0, rows, j0, cols, lse + at.row_at(b, i0, h), d.heads, p, block);
    gemm(rows, cols, d.v_dim, {dout + at.o_at(b, i0, h), at.ldo(), false},
         {v + at.v_at(b, j0, kvh), at.ldv(), true}, dp, block, false);
    for (int64_t r = 0; r < rows; ++r) {
      const T dr = delta[at.row_at(b, i0 + r, h)];
      for (int64_t c = 0; c < cols; ++c) {
        dp[r * block + c] = scale * p[r * block + c] * (dp[r * block + c] - dr);
      }
    }
  };
  // Pass 1: dK and dV, one task per (sequence, kv head, key block); the task
  // owns those rows and visits every query head of its group.
  const int64_t kv_tasks = d.batch * d.kv_heads * blocks;
#pragma omp parallel if (threads)
  {
    std::vector<T> p(static_cast<size_t>(block * block)), dp(p.size());
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < kv_tasks; ++task) {
      // Early key blocks see the most queries.
      const auto [b, kvh, kb] = block_task(task, d.kv_heads, blocks, false);
      const int64_t j0 = kb * block, cols = std::min(block, d.seq - j0);
      T* dk_block = dk + at.k_at(b, j0, kvh);
      T* dv_block = dv + at.v_at(b, j0, kvh);
      for (int64_t c = 0; c < cols; ++c) {
        std::fill_n(dk_block + c * at.ldk(), d.qk_dim, T(0));
        std::fill_n(dv_block + c * at.ldv(), d.v_dim, T(0));
      }
      for (int64_t h = kvh * at.group(); h < (kvh + 1) * at.group(); ++h) {
        for (int64_t i0 = j0; i0 < d.seq; i0 += block) {
          const int64_t rows = std::min(block, d.seq - i0);
          scores_grad(b, h, i0, rows, j0, cols, p.data(), dp.data());
          gemm(cols, d.v_dim, rows, {p.data(), block, true},
               {dout + at.o_at(b, i0, h), at.ldo(), false}, dv_block, at.ldv(), true);
          gemm(cols, d.qk_dim, rows, {dp.data(), block, true},
               {q + at.q_at(b, i0, h), at.ldq(), false}, dk_block, at.ldk(), true);
        }
      }
    }
  }
  // Pass 2: dQ, one task per (sequence, head, query block).
  const int64_t q_tasks = d.batch * d.heads * blocks;
#pragma omp parallel if (threads)
  {
    std::vector<T> p(static_cast<size_t>(block * block)), dp(p.size());
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < q_tasks; ++task) {
      const auto [b, h, qb] = block_task(task, d.heads, blocks, true);
      const int64_t kvh = h / at.group();
      const int64_t i0 = qb * block, rows = std::min(block, d.seq - i0);
      T* dq_block = dq + at.q_at(b, i0, h);
      for (int64_t r = 0; r < rows; ++r) std::fill_n(dq_block + r * at.ldq(), d.qk_dim, T(0));
      for (int64_t j0 = 0; j0 < i0 + rows; j0 += block) {
        const int64_t cols = std::min(block, i0 + rows - j0);
        scores_grad(b, h, i0, rows, j0, cols, p.data(), dp.data());
        gemm(rows, d.qk_dim, cols, {dp.data(), block, false},
             {k + at.k_at(b, j0, kvh), at.ldk(), false}, dq_block, at.ldq(), true);
      }
    }
  }
}

template void causal_attention_forward<float>(const AttentionDims&, const float*, const float*,
                                              const float*, float*, float*);
template void causal_attention_forward<double>(const AttentionDims&, const double*, const double*,
                                               const double*, double*, double*);
template void causal_attention_backward<float>(const AttentionDims&, const float*, const float*,
                                               const float*, const float*, const float*,
                                               const float*, float*, float*, float*);
template void causal_attention_backward<double>(const AttentionDims&, const double*,
                                                const double*, const double*, const double*,
                                                const double*, const double*, double*, double*,
                                                double*);

}  // namespace raggemm::model
