// The AVX512_BF16 microkernel (contract in bf16_microkernel.h), compiled for
// its instruction set with a target attribute and registered (with the CPU
// features it needs) in microkernel_registry.cc, so the library itself keeps
// the baseline ISA. 12 x 32 register tile: each
// vdpbf16ps does 16 lanes x 2 products (twice the MACs of an f32 FMA of the
// same width); 24 of 32 zmm hold accumulators, two hold the B pair-vectors.
#include "kernels/bf16_microkernel.h"

#include <array>
#include <cstdint>
#include <cstring>
#include <utility>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include "kernels/avx512_tile_store.h"
#define RAGGEMM_BF16_X86 1
#endif

namespace raggemm::kernels {

#ifdef RAGGEMM_BF16_X86
namespace {

#define RAGGEMM_AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512bf16")))
constexpr int kMR = 12;
constexpr int kNR = 32;

inline int32_t load_pair(const uint16_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

template <int R>
RAGGEMM_AVX512BF16 void tile(int64_t kp, const uint16_t* a, const uint16_t* b, float* c,
                             int64_t ldc, int cols, Store store) {
  __m512 acc0[R], acc1[R];
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
    acc0[i] = _mm512_setzero_ps();
    acc1[i] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < kp; ++p) {
    const __m512bh b0 = (__m512bh)_mm512_load_si512(b + p * kNR * 2);
    const __m512bh b1 = (__m512bh)_mm512_load_si512(b + p * kNR * 2 + 32);
    const uint16_t* ap = a + p * kMR * 2;
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      const __m512bh ai = (__m512bh)_mm512_set1_epi32(load_pair(ap + 2 * i));
      acc0[i] = _mm512_dpbf16_ps(acc0[i], ai, b0);
      acc1[i] = _mm512_dpbf16_ps(acc1[i], ai, b1);
    }
  }
  if (store == Store::kStream && cols == kNR) {
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) avx512_tile::stream_row(c + i * ldc, acc0[i], acc1[i]);
    return;
  }
  const bool accumulate = store == Store::kAccumulate;
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
    avx512_tile::store_row(c + i * ldc, acc0[i], acc1[i], cols, accumulate);
  }
}

void run(int64_t kp, const uint16_t* a, const uint16_t* b, float* c, int64_t ldc, int rows,
         int cols, Store store) {
  static constexpr auto kByRows =
      avx512_tile::by_rows<kMR>([](auto rows) { return &tile<decltype(rows)::value>; });
  kByRows[rows - 1](kp, a, b, c, ldc, cols, store);
}

}  // namespace

Bf16Microkernel bf16_microkernel_avx512() { return Bf16Microkernel{{kMR, kNR, "AVX512_BF16", &run}}; }

#else  // not x86 with GCC/Clang: only the scalar twin

Bf16Microkernel bf16_microkernel_avx512() { return Bf16Microkernel{{0, 0, "AVX512_BF16", nullptr}}; }

#endif

}  // namespace raggemm::kernels
