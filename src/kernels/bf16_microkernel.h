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
#include <string>
#include <vector>

#include "kernels/microkernel.h"

namespace raggemm::kernels {

// store as in microkernel.h: kOverwrite, kAccumulate (C + acc), or kStream
// (overwrite with non-temporal stores where a row is whole and aligned; the
// caller fences with hwy::FlushStream() before publishing).
using Bf16MicrokernelFn = void (*)(int64_t kp, const uint16_t* a, const uint16_t* b, float* c,
                                   int64_t ldc, int rows, int cols, Store store);

struct Bf16Microkernel {
  int mr = 0;
  int nr = 0;
  const char* target = "";  // "AVX512_BF16", "SCALAR"
  Bf16MicrokernelFn run = nullptr;
};

// Every bf16 microkernel this CPU can run, fastest first (the portable
// scalar twin, same bits, always last). Chosen by CPUID.
const std::vector<Bf16Microkernel>& bf16_microkernels();

// The kernel bf16 x bf16 passes run on, or null: they then widen bf16 to f32
// and run the f32 microkernel (the path every other dtype takes). Null when
// forced ("WIDEN"), or when no SIMD bf16 kernel may run: the CPU lacks
// AVX512_BF16, or the Highway targets are forced below AVX3
// (hwy::SetSupportedTargetsForTest, `--target AVX2`), which rules out every
// AVX-512 family at once. The scalar twin runs only when forced.
const Bf16Microkernel* select_bf16_microkernel();

// Forces the bf16 microkernel named `target` ("AVX512_BF16", "SCALAR"), or
// the widening path ("WIDEN"), for tests and benchmarks; "" or "auto" lifts
// it. Returns false (and changes nothing) when this CPU cannot run it.
bool force_bf16_microkernel(const std::string& target);

// The AVX512_BF16 kernel (bf16_microkernel_x86.cc): false when the CPU or the
// compiler lacks the instructions.
bool bf16_microkernel_avx512(Bf16Microkernel* kernel);
Bf16Microkernel bf16_microkernel_scalar();

}  // namespace raggemm::kernels
