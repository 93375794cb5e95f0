// Packing of operand blocks into the micro-panel layouts the microkernel reads
// (docs/kernels.md). Every packer converts to f32 (widening bf16/f16, decoding
// fp8/int8, applying dequantization scales) and zero-pads partial panels.
#pragma once

#include <cstdint>

#include "kernels/operand.h"

namespace raggemm::kernels {

// Floats a packed block of `rows` x `kc` takes with panels of height `mr`.
inline int64_t packed_size(int64_t rows, int64_t kc, int mr) {
  return (rows + mr - 1) / mr * mr * kc;
}

// A(i, p) = src(r0 + i, k0 + p), i < rows, p < kc  (gmm lhs).
void pack_a(const Operand& src, int64_t r0, int64_t rows, int64_t k0, int64_t kc, int mr,
            float* dst);

// A(i, p) = src(t0 + p, c0 + i): the transposed lhs of tgmm, i < rows (the K
// dim), p < kc (tokens). Tokens outside [valid_begin, valid_end) read as zero:
// that is the v1 row mask, and lets a token tile straddle groups.
void pack_a_transposed(const Operand& src, int64_t t0, int64_t kc, int64_t c0, int64_t rows,
                       int64_t valid_begin, int64_t valid_end, int mr, float* dst);

// B(p, j) = src(k0 + p, n0 + j) or, transposed, src(n0 + j, k0 + p);
// p < kc, j < cols, panels of width nr.
void pack_b(const Operand& src, bool transposed, int64_t k0, int64_t kc, int64_t n0,
            int64_t cols, int nr, float* dst);

}  // namespace raggemm::kernels
