// The loops around the microkernel over one packed A block and one packed B
// block (BLIS's jr/ir loops), shared by every driver.
#pragma once

#include <cstdint>

#include "kernels/microkernel.h"

namespace raggemm::kernels {

// C[0:rows, 0:cols] (= or +=) A_packed (rows x kc) * B_packed (kc x cols).
// prefetch_depth = input_buffer_count - 1: how many A micro-panels ahead of
// the one being multiplied are prefetched (0: none).
void macro_kernel(const Microkernel& uk, int64_t kc, const float* a_packed, int64_t rows,
                  const float* b_packed, int64_t cols, float* c, int64_t ldc, bool accumulate,
                  int prefetch_depth);

}  // namespace raggemm::kernels
