// x86 int8 microkernels (contract in int8_microkernel.h), each compiled for
// its instruction set with a target attribute and registered (with the CPU
// features it needs) in microkernel_registry.cc, so the library itself
// keeps the baseline ISA:
//  - AVX512-VNNI: 12 x 32, vpdpbusd (u8 x s8, 4 products per i32 lane, 64
//    MACs an instruction) on biased A; 24 of 32 zmm hold accumulators.
//  - AVX-VNNI: 6 x 16, the same on ymm; 12 of 16 ymm hold accumulators.
//  - AVX2: 6 x 8, vpmaddwd on codes sign-extended to int16 (A packed as
//    int16, B widened on load): exact for every code in -128..127.
#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "kernels/int8_microkernel.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include "kernels/avx512_tile_store.h"
#define RAGGEMM_INT8_X86 1
#endif

namespace raggemm::kernels {

#ifdef RAGGEMM_INT8_X86
namespace {

inline int32_t load_quad(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// ---- AVX512-VNNI ----------------------------------------------------------
#define RAGGEMM_VNNI512 __attribute__((target("avx512f,avx512bw,avx512vnni")))
constexpr int kVnni512MR = 12;
constexpr int kVnni512NR = 32;

template <int R>
RAGGEMM_VNNI512 void vnni512_tile(int64_t kq, const uint8_t* a, const int8_t* b, int32_t* c,
                                  int64_t ldc, int cols, bool accumulate) {
  __m512i acc0[R], acc1[R];
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
    acc0[i] = _mm512_setzero_si512();
    acc1[i] = _mm512_setzero_si512();
  }
  for (int64_t p = 0; p < kq; ++p) {
    const __m512i b0 = _mm512_loadu_si512(b + p * kVnni512NR * 4);
    const __m512i b1 = _mm512_loadu_si512(b + p * kVnni512NR * 4 + 64);
    const uint8_t* ap = a + p * kVnni512MR * 4;
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      const __m512i ai = _mm512_set1_epi32(load_quad(ap + 4 * i));
      acc0[i] = _mm512_dpbusd_epi32(acc0[i], ai, b0);
      acc1[i] = _mm512_dpbusd_epi32(acc1[i], ai, b1);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
    avx512_tile::store_row(c + i * ldc, acc0[i], acc1[i], cols, accumulate);
  }
}

void vnni512_run(int64_t kq, const uint8_t* a, const int8_t* b, int32_t* c, int64_t ldc, int rows,
                 int cols, bool accumulate) {
  static constexpr auto kByRows = avx512_tile::by_rows<kVnni512MR>(
      [](auto rows) { return &vnni512_tile<decltype(rows)::value>; });
  kByRows[rows - 1](kq, a, b, c, ldc, cols, accumulate);
}

// ---- AVX-VNNI (256-bit) ----------------------------------------------------
#define RAGGEMM_AVXVNNI __attribute__((target("avx2,avxvnni")))
constexpr int kAvxVnniMR = 6;
constexpr int kAvxVnniNR = 16;

// Stores 8 int32 lanes of v to row[0..count) (adding when accumulate).
RAGGEMM_AVXVNNI inline void store_lanes_vnni(int32_t* row, __m256i v, int count, bool accumulate) {
  alignas(32) int32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), v);
  for (int j = 0; j < count; ++j) row[j] = accumulate ? row[j] + lanes[j] : lanes[j];
}

template <int R>
RAGGEMM_AVXVNNI void avx_vnni_tile(int64_t kq, const uint8_t* a, const int8_t* b, int32_t* c,
                                   int64_t ldc, int cols, bool accumulate) {
  __m256i acc0[R], acc1[R];
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
    acc0[i] = _mm256_setzero_si256();
    acc1[i] = _mm256_setzero_si256();
  }
  for (int64_t p = 0; p < kq; ++p) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + p * kAvxVnniNR * 4));
    const __m256i b1 =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + p * kAvxVnniNR * 4 + 32));
    const uint8_t* ap = a + p * kAvxVnniMR * 4;
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      const __m256i ai = _mm256_set1_epi32(load_quad(ap + 4 * i));
      acc0[i] = _mm256_dpbusd_avx_epi32(acc0[i], ai, b0);
      acc1[i] = _mm256_dpbusd_avx_epi32(acc1[i], ai, b1);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
    int32_t* row = c + i * ldc;
    if (cols == kAvxVnniNR) {
      __m256i v0 = acc0[i], v1 = acc1[i];
      if (accumulate) {
        v0 = _mm256_add_epi32(v0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row)));
        v1 = _mm256_add_epi32(v1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 8)));
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(row), v0);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(row + 8), v1);
    } else {
      store_lanes_vnni(row, acc0[i], cols < 8 ? cols : 8, accumulate);
      if (cols > 8) store_lanes_vnni(row + 8, acc1[i], cols - 8, accumulate);
    }
  }
}

void avx_vnni_run(int64_t kq, const uint8_t* a, const int8_t* b, int32_t* c, int64_t ldc, int rows,
                  int cols, bool accumulate) {
  static constexpr auto kByRows = avx512_tile::by_rows<kAvxVnniMR>(
      [](auto rows) { return &avx_vnni_tile<decltype(rows)::value>; });
  kByRows[rows - 1](kq, a, b, c, ldc, cols, accumulate);
}

// ---- AVX2 -------------------------------------------------------------------
// vpmaddwd on codes sign-extended to int16: each product of two codes in
// -128..127 is at most 2^14 and a pair sums to at most 2^15 in an int32
// lane, so nothing saturates and -128 needs no special case (vpmaddubsw
// would need one unsigned operand and saturates its i16 pair sums). A comes
// packed as int16 (a_int16), so a row's quad is one 8-byte broadcast; B's
// bytes are widened as they are loaded. An accumulator lane holds one
// column's k-pair (t0,t1) or (t2,t3) sum; the two are added at the store.
//
// Its ceiling: every vpmaddwd (16 MACs) needs a vpaddd. On a Zen 3 a loop of
// independent vpmaddwd runs 2 a cycle, like FMAs, but vpmaddwd + vpaddd
// pairs only 1.53 a cycle (the adds take multiply pipes), so the pair
// caps int8 at 1.53x the f32 FMA rate there (docs/quantization.md). The
// 6 x 8 tile reaches it; the 4 x 8 one (8 accumulators) did 1.45x.
// vpmaddubsw + vpmaddwd(ones) would do 32 MACs for two multiplies and an
// add, but is exact only with one operand below 128 in magnitude.
#define RAGGEMM_AVX2 __attribute__((target("avx2")))
constexpr int kAvx2MR = 6;
constexpr int kAvx2NR = 8;

RAGGEMM_AVX2 inline void store_lanes_avx2(int32_t* row, __m256i v, int count, bool accumulate) {
  if (count == 8) {
    if (accumulate) v = _mm256_add_epi32(v, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(row), v);
    return;
  }
  alignas(32) int32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), v);
  for (int j = 0; j < count; ++j) row[j] = accumulate ? row[j] + lanes[j] : lanes[j];
}

// A row's quad of int16 codes in every 64-bit lane.
RAGGEMM_AVX2 inline __m256i broadcast_quad(const int16_t* quad) {
  int64_t bits;
  std::memcpy(&bits, quad, sizeof(bits));
  return _mm256_set1_epi64x(bits);
}

// One row's two accumulators: columns 0..3 (k-pair sums) and 4..7.
struct Avx2RowAcc {
  __m256i lo, hi;
};

// Adds row i's products for one quad (the partial tiles' loop). Written
// out per row, not as a loop over an `acc[R]` array, which GCC kept on the
// stack.
#define RAGGEMM_AVX2_ROW(i)                                                      \
  if constexpr (R > (i)) {                                                       \
    const __m256i ai = broadcast_quad(ap + 4 * (i));                             \
    r##i.lo = _mm256_add_epi32(r##i.lo, _mm256_madd_epi16(ai, b_lo));             \
    r##i.hi = _mm256_add_epi32(r##i.hi, _mm256_madd_epi16(ai, b_hi));             \
  }

// The full tile's assembly, a row at a time: broadcast the row's quad
// (ymm2) from A byte offset `off`, multiply it with both widened B vectors
// (ymm0, ymm1; product in ymm3 / ymm2) and add into accumulators ymm`lo`
// (columns 0..3) and ymm`hi` (4..7).
#define RAGGEMM_AVX2_ASM_ROW(off, lo, hi)                \
  "vpbroadcastq " #off "(%[ap]), %%ymm2\n\t"             \
  "vpmaddwd %%ymm0, %%ymm2, %%ymm3\n\t"                  \
  "vpaddd %%ymm3, %%ymm" #lo ", %%ymm" #lo "\n\t"        \
  "vpmaddwd %%ymm1, %%ymm2, %%ymm2\n\t"                  \
  "vpaddd %%ymm2, %%ymm" #hi ", %%ymm" #hi "\n\t"
#define RAGGEMM_AVX2_ZERO(r) "vpxor %%ymm" #r ", %%ymm" #r ", %%ymm" #r "\n\t"
#define RAGGEMM_AVX2_SAVE(r, off) "vmovdqa %%ymm" #r ", " #off "(%[sums])\n\t"

template <int R>
RAGGEMM_AVX2 void avx2_tile(int64_t kq, const uint8_t* a, const int8_t* b, int32_t* c, int64_t ldc,
                            int cols, bool accumulate) {
  static_assert(R >= 1 && R <= kAvx2MR);
  alignas(32) Avx2RowAcc sums[kAvx2MR];
  const int16_t* ap = reinterpret_cast<const int16_t*>(a);
  const int8_t* bp = b;
  if constexpr (R == kAvx2MR) {
    // The full tile's loop in assembly. Its 12 accumulators (ymm4-15), 2 B
    // vectors, a broadcast and a product take all 16 ymm; GCC 12, from
    // intrinsics, copied an accumulator pair to the stack on every k step.
    asm volatile(
        RAGGEMM_AVX2_ZERO(4) RAGGEMM_AVX2_ZERO(5) RAGGEMM_AVX2_ZERO(6) RAGGEMM_AVX2_ZERO(7)
        RAGGEMM_AVX2_ZERO(8) RAGGEMM_AVX2_ZERO(9) RAGGEMM_AVX2_ZERO(10) RAGGEMM_AVX2_ZERO(11)
        RAGGEMM_AVX2_ZERO(12) RAGGEMM_AVX2_ZERO(13) RAGGEMM_AVX2_ZERO(14) RAGGEMM_AVX2_ZERO(15)
        "test %[kq], %[kq]\n\t"
        "jle 2f\n\t"
        "1:\n\t"
        "vpmovsxbw (%[bp]), %%ymm0\n\t"
        "vpmovsxbw 16(%[bp]), %%ymm1\n\t"
        RAGGEMM_AVX2_ASM_ROW(0, 4, 5) RAGGEMM_AVX2_ASM_ROW(8, 6, 7)
        RAGGEMM_AVX2_ASM_ROW(16, 8, 9) RAGGEMM_AVX2_ASM_ROW(24, 10, 11)
        RAGGEMM_AVX2_ASM_ROW(32, 12, 13) RAGGEMM_AVX2_ASM_ROW(40, 14, 15)
        "add $48, %[ap]\n\t"
        "add $32, %[bp]\n\t"
        "dec %[kq]\n\t"
        "jnz 1b\n\t"
        "2:\n\t"
        RAGGEMM_AVX2_SAVE(4, 0) RAGGEMM_AVX2_SAVE(5, 32) RAGGEMM_AVX2_SAVE(6, 64)
        RAGGEMM_AVX2_SAVE(7, 96) RAGGEMM_AVX2_SAVE(8, 128) RAGGEMM_AVX2_SAVE(9, 160)
        RAGGEMM_AVX2_SAVE(10, 192) RAGGEMM_AVX2_SAVE(11, 224) RAGGEMM_AVX2_SAVE(12, 256)
        RAGGEMM_AVX2_SAVE(13, 288) RAGGEMM_AVX2_SAVE(14, 320) RAGGEMM_AVX2_SAVE(15, 352)
        : [ap] "+r"(ap), [bp] "+r"(bp), [kq] "+r"(kq)
        : [sums] "r"(sums)
        : "cc", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",
          "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
  } else {
    const __m256i zero = _mm256_setzero_si256();
    Avx2RowAcc r0{zero, zero}, r1{zero, zero}, r2{zero, zero}, r3{zero, zero}, r4{zero, zero};
    for (int64_t p = 0; p < kq; ++p, ap += kAvx2MR * 4, bp += kAvx2NR * 4) {
      const __m256i b_lo =
          _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bp)));
      const __m256i b_hi =
          _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bp + 16)));
      RAGGEMM_AVX2_ROW(0)
      RAGGEMM_AVX2_ROW(1)
      RAGGEMM_AVX2_ROW(2)
      RAGGEMM_AVX2_ROW(3)
      RAGGEMM_AVX2_ROW(4)
    }
    const Avx2RowAcc rows[kAvx2MR - 1] = {r0, r1, r2, r3, r4};
    std::copy(rows, rows + R, sums);
  }
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
    // hadd gives columns (0,1,4,5 | 2,3,6,7); the permute puts them in order.
    const __m256i row = _mm256_permute4x64_epi64(_mm256_hadd_epi32(sums[i].lo, sums[i].hi), 0xd8);
    store_lanes_avx2(c + i * ldc, row, cols, accumulate);
  }
}
#undef RAGGEMM_AVX2_ROW
#undef RAGGEMM_AVX2_ASM_ROW
#undef RAGGEMM_AVX2_ZERO
#undef RAGGEMM_AVX2_SAVE

void avx2_run(int64_t kq, const uint8_t* a, const int8_t* b, int32_t* c, int64_t ldc, int rows,
              int cols, bool accumulate) {
  static constexpr auto kByRows =
      avx512_tile::by_rows<kAvx2MR>([](auto rows) { return &avx2_tile<decltype(rows)::value>; });
  kByRows[rows - 1](kq, a, b, c, ldc, cols, accumulate);
}

}  // namespace

Int8Microkernel int8_microkernel_avx512_vnni() {
  return Int8Microkernel{{kVnni512MR, kVnni512NR, "AVX512_VNNI", &vnni512_run}, /*biased_a=*/true};
}

Int8Microkernel int8_microkernel_avx_vnni() {
  return Int8Microkernel{{kAvxVnniMR, kAvxVnniNR, "AVX_VNNI", &avx_vnni_run}, /*biased_a=*/true};
}

Int8Microkernel int8_microkernel_avx2() {
  return Int8Microkernel{{kAvx2MR, kAvx2NR, "AVX2", &avx2_run},
                         /*biased_a=*/false,
                         /*a_int16=*/true};
}

#else  // not x86 with GCC/Clang: only the scalar kernel

Int8Microkernel int8_microkernel_avx512_vnni() { return {{0, 0, "AVX512_VNNI", nullptr}}; }
Int8Microkernel int8_microkernel_avx_vnni() { return {{0, 0, "AVX_VNNI", nullptr}}; }
Int8Microkernel int8_microkernel_avx2() { return {{0, 0, "AVX2", nullptr}}; }

#endif

}  // namespace raggemm::kernels
