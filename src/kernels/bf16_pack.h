// Packing of bf16 operand blocks into the pair layouts of the bf16
// microkernel (kernels/bf16_microkernel.h): two consecutive k of one row or
// column side by side, panels of `width` rows or columns, zero-padded (k past
// the block, rows or columns past the panel's valid ones). The bf16 bits are
// copied, never converted.
#pragma once

#include <cstdint>

namespace raggemm::kernels {

// Pairs a depth of kc takes (K is padded to even).
inline int64_t pairs_of(int64_t kc) { return (kc + 1) / 2; }

// uint16 elements a packed block of `count` rows or columns x kc takes.
inline int64_t bf16_packed_size(int64_t count, int64_t kc, int width) {
  return (count + width - 1) / width * width * pairs_of(kc) * 2;
}

// The contraction runs along the source's rows (a row-major [.., K] matrix:
// gmm's lhs, dlhs's rhs read as [N, K]): element (i, k) of the packed block
// is src[(r0 + i) * ld + k0 + k], i < count, k < kc.
void pack_pairs_along_rows(const uint16_t* src, int64_t ld, int64_t r0, int64_t count, int64_t k0,
                           int64_t kc, int width, uint16_t* dst);

// The contraction runs down the source's columns (gmm's rhs [K, N]; tgmm's
// lhs and dout, contracted over tokens): element (j, k) of the packed block
// is src[(k0 + k) * ld + c0 + j], j < count, k < kc; rows k0 + k at or past
// k_end read as zero (a token slice that ends inside a pair).
void pack_pairs_down_columns(const uint16_t* src, int64_t ld, int64_t k0, int64_t kc,
                             int64_t k_end, int64_t c0, int64_t count, int width, uint16_t* dst);

}  // namespace raggemm::kernels
