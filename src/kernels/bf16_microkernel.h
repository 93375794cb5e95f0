// The bf16 x bf16 register-tile microkernel (f32 accumulation), the
// dot-product sibling of kernels/microkernel.h for operands that are both
// bf16 (contract and numerics in docs/kernels.md, "bf16 dot products"):
//
//   C[0:rows, 0:cols] (=|+=) A_panel * B_panel
//
// Packed layouts, in pairs of consecutive k (K zero-padded to even):
//   A_panel: kp pairs of mr rows x 2 bf16: a[(p * mr + i) * 2 + t] = A(i, 2p + t);
//            rows past `rows` zero.
//   B_panel: kp pairs of nr columns x 2 bf16: b[(p * nr + j) * 2 + t] = B(2p + t, j);
//            columns past `cols` zero. 64-byte aligned.
//   C:       f32, row-major, leading dimension ldc.
// Each element is computed as acc = 0, then for p = 0..kp-1 in order
//   acc = ftz(fma(A(i,2p+1), B(2p+1,j), daz(acc)));   // odd k first
//   acc = ftz(fma(A(i,2p),   B(2p,j),   acc));
// with bf16 inputs whose f32 value is subnormal read as zero (daz) and
// subnormal results flushed to a zero of the same sign (ftz): the
// instruction vdpbf16ps (AVX512_BF16) as Intel's SDM defines it, which this
// CPU family matches bit for bit (tests/kernels/bf16_gmm_test.cc). The
// product of two bf16 is exact in f32, so each step is one rounding. Then
// C = acc or C = C + acc (an ordinary f32 add). As with the f32 kernel, the
// sequence does not depend on rows, cols or the neighbours in the panel, so
// results do not depend on the output tiling or the thread count.
#pragma once

#include <cstdint>

#include "kernels/dot_microkernel.h"
#include "kernels/microkernel.h"

namespace raggemm::kernels {

// store as in microkernel.h: kOverwrite, kAccumulate (C + acc), or kStream
// (overwrite with non-temporal stores where a row is whole and aligned; the
// caller fences with hwy::FlushStream() before publishing).
using Bf16MicrokernelFn = void (*)(int64_t kp, const uint16_t* a, const uint16_t* b, float* c,
                                   int64_t ldc, int rows, int cols, Store store);

// The packed layouts a kernel reads.
//   kPairs: as above.
//   kTileBlocks (AMX, 32 x 32 register tile): K zero-padded to a multiple
//     of kAmxBlockK; kp (a multiple of 16) pairs.
//     A_panel: blocks of 32 k, each mr rows of 32 bf16 (64 bytes, one tile
//              row): a[(blk * mr + i) * 32 + kk] = A(i, 32 blk + kk);
//     B_panel: as kPairs (pairs of nr columns), zero pairs past K.
//   Each element: acc = 0, then for each 32-k block in order one
//   TDPBF16PS adds the block's 32 products, with inputs whose f32
//   value is subnormal read as zero and subnormal results flushed, rounding
//   as Intel's hardware does it (the SDM gives no bit-exact order; on the
//   Xeon model 167 neither vdpbf16ps's sequence nor one rounding per block
//   reproduces every bit); then C = acc or C = C + acc, as above. The
//   result does not depend on rows, cols or the thread count, and stays
//   within the kPairs kernels' error bound (tests/kernels/bf16_gmm_test.cc),
//   but is not their bits.
enum class Bf16Layout { kPairs, kTileBlocks };
inline constexpr int kAmxBlockK = 32;

struct Bf16Microkernel : DotMicrokernel<Bf16MicrokernelFn> {  // "AMX_BF16", "AVX512_BF16", "SCALAR"
  Bf16Layout layout = Bf16Layout::kPairs;
};

// The kernels, registered with the CPU features they need in
// microkernel_registry.cc (which chooses, forces and lists them): the
// AMX_BF16 one (bf16_microkernel_amx.cc), the AVX512_BF16 one
// (bf16_microkernel_x86.cc; run is null when the compiler lacks the
// instructions) and the portable scalar twin of the AVX512_BF16 one (same
// bits).
Bf16Microkernel bf16_microkernel_amx();
Bf16Microkernel bf16_microkernel_avx512();
Bf16Microkernel bf16_microkernel_scalar();

// Whether this process may use the AMX tile registers: asks Linux once
// (the kernel grants the tile state only on request); false elsewhere.
bool amx_tile_data_permitted();

}  // namespace raggemm::kernels
