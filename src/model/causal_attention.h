// Causal scaled-dot-product attention over whole sequences, computed in
// blocks with an online softmax (FlashAttention, arXiv:2205.14135 and
// 2307.08691): memory stays linear in the sequence length (the scores of
// one query block against one key block at a time, per thread), and the
// backward recomputes the scores from the saved log-sum-exp per row.
//
// Layouts (row-major, token t = b * seq + position):
//   q   [tokens, heads, qk_dim]      k [tokens, kv_heads, qk_dim]
//   v   [tokens, kv_heads, v_dim]    out [tokens, heads, v_dim]
//   lse [tokens, heads]
// Query head h reads key/value head h / (heads / kv_heads) (GQA sharing).
// float runs its block matmuls through the microkernel (kernels/block_gemm);
// double runs plain loops. Each output element is written by one thread in
// a fixed order: results do not depend on the thread count.
#pragma once

#include <cstdint>

namespace raggemm::model {

struct AttentionDims {
  int64_t batch = 0;
  int64_t seq = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t qk_dim = 0;
  int64_t v_dim = 0;
  double scale = 0;  // multiplies q.k before the softmax
};

// Rows per query block and per key block: the largest power of two in
// [16, 256] whose working set (q, k, v, scores, accumulator) fits half the
// L2 cache of this machine.
int64_t attention_block_rows(const AttentionDims& dims);

template <class T>
void causal_attention_forward(const AttentionDims& dims, const T* q, const T* k, const T* v,
                              T* out, T* lse);

// Gradients (overwritten) from dout; out and lse are forward's.
template <class T>
void causal_attention_backward(const AttentionDims& dims, const T* q, const T* k, const T* v,
                               const T* out, const T* lse, const T* dout, T* dq, T* dk, T* dv);

}  // namespace raggemm::model
