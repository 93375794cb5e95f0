// The int8 register-tile microkernel (i32 accumulation), the integer sibling
// of kernels/microkernel.h:
//
//   C[0:rows, 0:cols] (=|+=) A_panel * B_panel        (int32, exact)
//
// Packed layouts, in "quads" of 4 consecutive k (K is zero-padded to a
// multiple of 4):
//   A_panel: kq quads of mr rows x 4 bytes: a[(p * mr + i) * 4 + t] = A(i, 4p + t);
//            rows past `rows` zero. When `biased_a` the bytes are A + 128
//            (uint8), and the caller subtracts 128 * column_sum(B) afterwards:
//            that is how u8 x s8 dot products (vpdpbusd) take signed codes.
//            When `a_int16` each code is an int16 (the same layout, 2 bytes
//            a code): kernels that multiply 16-bit words get them widened once.
//   B_panel: kq quads of nr columns x 4 bytes: b[(p * nr + j) * 4 + t] = B(4p + t, j);
//            columns past `cols` zero. 64-byte aligned.
//   C:       int32, row-major, leading dimension ldc.
// Codes lie in -128..127 on both operands, and every kernel is exact over the
// whole range (no intermediate saturates). Sums are exact for K up to 2^16
// (a biased lane holds at most 255 * 128 * K < 2^31).
#pragma once

#include <cstdint>

#include "kernels/dot_microkernel.h"

namespace raggemm::kernels {

using Int8MicrokernelFn = void (*)(int64_t kq, const uint8_t* a, const int8_t* b, int32_t* c,
                                   int64_t ldc, int rows, int cols, bool accumulate);

// target: "AVX512_VNNI", "AVX_VNNI", "AVX2", "SCALAR".
struct Int8Microkernel : DotMicrokernel<Int8MicrokernelFn> {
  bool biased_a = false;  // A panel holds codes + 128, see above
  bool a_int16 = false;   // A panel holds int16 codes (2 bytes each), see above
};

// The kernels, registered with the CPU features they need in
// microkernel_registry.cc (which chooses, forces and lists them). The x86
// ones (int8_microkernel_x86.cc) have a null run when the compiler lacks the
// instructions.
Int8Microkernel int8_microkernel_avx512_vnni();
Int8Microkernel int8_microkernel_avx_vnni();
Int8Microkernel int8_microkernel_avx2();
Int8Microkernel int8_microkernel_scalar();

}  // namespace raggemm::kernels
