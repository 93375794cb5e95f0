// Shared pieces of the hand-written AVX-512 dot-product microkernels
// (bf16_microkernel_x86.cc, int8_microkernel_x86.cc; bf16_microkernel_amx.cc
// stores its staged rows with them), whose register tile is R rows of two
// 16-lane vectors (NR = 32): the masked store of a row's valid columns
// (adding to C when accumulating), the streamed store of a whole row, and
// the table of tile functions by row count. Include only where __x86_64__ and GCC/Clang.
#pragma once

#include <immintrin.h>

#include <array>
#include <cstdint>
#include <utility>

namespace raggemm::kernels::avx512_tile {

#define RAGGEMM_AVX512_STORE inline __attribute__((target("avx512f"), always_inline))

RAGGEMM_AVX512_STORE __m512 add(__m512 x, __m512 y) { return _mm512_add_ps(x, y); }
RAGGEMM_AVX512_STORE __m512i add(__m512i x, __m512i y) { return _mm512_add_epi32(x, y); }
RAGGEMM_AVX512_STORE __m512 load(__mmask16 m, const float* p) {
  return _mm512_maskz_loadu_ps(m, p);
}
RAGGEMM_AVX512_STORE __m512i load(__mmask16 m, const int32_t* p) {
  return _mm512_maskz_loadu_epi32(m, p);
}
RAGGEMM_AVX512_STORE void store(float* p, __mmask16 m, __m512 v) { _mm512_mask_storeu_ps(p, m, v); }
RAGGEMM_AVX512_STORE void store(int32_t* p, __mmask16 m, __m512i v) {
  _mm512_mask_storeu_epi32(p, m, v);
}

// Columns [0, cols) of one C row (cols <= 32) = (or +=) the row's two vectors.
template <class T, class V>
RAGGEMM_AVX512_STORE void store_row(T* row, V v0, V v1, int cols, bool accumulate) {
  const int cols0 = cols < 16 ? cols : 16;
  const auto mask0 = static_cast<__mmask16>((1u << cols0) - 1u);
  const auto mask1 = static_cast<__mmask16>((1u << (cols - cols0)) - 1u);
  if (accumulate) {
    v0 = add(v0, load(mask0, row));
    v1 = add(v1, load(mask1, row + 16));
  }
  store(row, mask0, v0);
  store(row + 16, mask1, v1);
}

// One whole C row (32 floats) written for the last time: non-temporal where
// the row is 64-byte aligned (the caller fences with hwy::FlushStream()),
// else plain stores.
RAGGEMM_AVX512_STORE void stream_row(float* row, __m512 v0, __m512 v1) {
  if (reinterpret_cast<uintptr_t>(row) % 64 == 0) {
    _mm512_stream_ps(row, v0);
    _mm512_stream_ps(row + 16, v1);
  } else {
    _mm512_storeu_ps(row, v0);
    _mm512_storeu_ps(row + 16, v1);
  }
}

#undef RAGGEMM_AVX512_STORE

// {make(1), ..., make(MR)}: the tile functions by row count (a ragged last
// panel runs its own narrower tile), make(r) giving the one for r rows.
template <int MR, class Make>
constexpr auto by_rows(Make make) {
  return [&]<int... R>(std::integer_sequence<int, R...>) {
    return std::array{make(std::integral_constant<int, R + 1>{})...};
  }
  (std::make_integer_sequence<int, MR>{});
}

}  // namespace raggemm::kernels::avx512_tile
