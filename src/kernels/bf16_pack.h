// Packing of bf16 operand blocks into the layouts of the bf16 microkernels
// (kernels/bf16_microkernel.h): kPairs, two consecutive k of one row or
// column side by side, and the AMX kernel's A blocks, 32 consecutive k of
// one row; panels of `width` rows or columns, zero-padded (k past the block,
// rows or columns past the panel's valid ones). The bf16 bits are copied,
// never converted.
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
// is src[(r0 + i) * ld + k0 + k], i < count, k < kc; the block is packed
// padded_kc deep (at least kc: the AMX kernel's B panels, K padded to a
// multiple of 32), k past kc zero.
void pack_pairs_along_rows(const uint16_t* src, int64_t ld, int64_t r0, int64_t count, int64_t k0,
                           int64_t kc, int width, uint16_t* dst, int64_t padded_kc = 0);

// The contraction runs down the source's columns (gmm's rhs [K, N]; tgmm's
// lhs and dout, contracted over tokens): element (j, k) of the packed block
// is src[(k0 + k) * ld + c0 + j], j < count, k < kc; rows k0 + k at or past
// k_end read as zero (a token slice that ends inside a pair).
void pack_pairs_down_columns(const uint16_t* src, int64_t ld, int64_t k0, int64_t kc,
                             int64_t k_end, int64_t c0, int64_t count, int width, uint16_t* dst);

// ---- The AMX kernel's A panels (Bf16Layout::kTileBlocks): blocks of
// kAmxBlockK = 32 k, each `width` rows of 32 consecutive k:
// dst[((panel * blocks + blk) * width + i) * 32 + kk] = element (i, 32 blk + kk)
// of the panel, blocks = ceil(kc / 32); k past kc and rows past count zero.
// The same size as bf16_packed_size(count, 32 * blocks, width).

// Element (i, k) is src[(r0 + i) * ld + k0 + k] (gmm's lhs, dlhs's dout).
void pack_blocks_along_rows(const uint16_t* src, int64_t ld, int64_t r0, int64_t count,
                            int64_t k0, int64_t kc, int width, uint16_t* dst);

// Element (i, k) is src[(k0 + k) * ld + c0 + i], zero at or past k_end
// (tgmm's lhs^T, contracted over tokens: a transpose).
void pack_blocks_down_columns(const uint16_t* src, int64_t ld, int64_t k0, int64_t kc,
                              int64_t k_end, int64_t c0, int64_t count, int width, uint16_t* dst);

}  // namespace raggemm::kernels
