// One thread's small dense matmul on f32 row-major blocks, through the same
// packing and register-tile microkernel as the GMM drivers:
//
//   C[m, n] (= or +=) op(A)[m, k] * op(B)[k, n]
//
// op(A) = A (A is m x k, leading dimension lda) or A^T (A is k x m);
// op(B) = B (k x n, ldb) or B^T (B is n x k). The contraction runs in chunks
// of at most kc (the caller derives kc from its cache budget). It never
// starts threads: attention calls it from inside its own OpenMP loops on
// blocks of tens to a few hundred rows, where the public op's validation,
// plan resolution and thread team would cost more than the block.
#pragma once

#include <cstdint>

namespace raggemm::kernels {

struct BlockOperand {
  const float* data = nullptr;
  int64_t ld = 0;
  bool transposed = false;
};

void block_gemm(int64_t m, int64_t n, int64_t k, BlockOperand a, BlockOperand b, float* c,
                int64_t ldc, bool accumulate, int64_t kc);

}  // namespace raggemm::kernels
