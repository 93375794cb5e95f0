#include "kernels/bf16_pack.h"

#include <algorithm>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace raggemm::kernels {

namespace {

// Pairs [p0, p0 + 4) of rows i0..i0+3 (each pair one 32-bit word of `rows[t]`)
// to out[p * width + i0 + t]: a 4 x 4 transpose of words with SSE2.
void transpose_words_4x4(const uint16_t* const rows[4], int64_t p0, int width, uint32_t* out,
                         int i0) {
#if defined(__SSE2__)
  auto load = [&](int t) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[t] + 2 * p0));
  };
  const __m128i r0 = load(0), r1 = load(1), r2 = load(2), r3 = load(3);
  const __m128i lo01 = _mm_unpacklo_epi32(r0, r1), hi01 = _mm_unpackhi_epi32(r0, r1);
  const __m128i lo23 = _mm_unpacklo_epi32(r2, r3), hi23 = _mm_unpackhi_epi32(r2, r3);
  auto store = [&](int64_t p, __m128i v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + p * width + i0), v);
  };
  store(p0 + 0, _mm_unpacklo_epi64(lo01, lo23));
  store(p0 + 1, _mm_unpackhi_epi64(lo01, lo23));
  store(p0 + 2, _mm_unpacklo_epi64(hi01, hi23));
  store(p0 + 3, _mm_unpackhi_epi64(hi01, hi23));
#else
  for (int t = 0; t < 4; ++t) {
    for (int64_t p = p0; p < p0 + 4; ++p) std::memcpy(out + p * width + i0 + t, rows[t] + 2 * p, 4);
  }
#endif
}

}  // namespace

void pack_pairs_along_rows(const uint16_t* src, int64_t ld, int64_t r0, int64_t count, int64_t k0,
                           int64_t kc, int width, uint16_t* dst) {
  const int64_t kp = pairs_of(kc);
  const int64_t whole = kc / 2;  // pairs with both k inside the block
  const int64_t panels = (count + width - 1) / width;
  for (int64_t panel = 0; panel < panels; ++panel) {
    uint32_t* out = reinterpret_cast<uint32_t*>(dst + panel * width * kp * 2);
    const int64_t valid = std::min<int64_t>(width, count - panel * width);
    int i = 0;
    // Four rows at a time: 4 x 4 word transposes (a pair along a row is one
    // 32-bit word, copied as is).
    for (; i + 4 <= valid && width % 4 == 0; i += 4) {
      const uint16_t* rows[4];
      for (int t = 0; t < 4; ++t) rows[t] = src + (r0 + panel * width + i + t) * ld + k0;
      int64_t p = 0;
      for (; p + 4 <= whole; p += 4) transpose_words_4x4(rows, p, width, out, i);
      for (; p < whole; ++p) {
        for (int t = 0; t < 4; ++t) std::memcpy(out + p * width + i + t, rows[t] + 2 * p, 4);
      }
      if (whole < kp) {  // odd kc: high half zero
        for (int t = 0; t < 4; ++t) out[whole * width + i + t] = rows[t][2 * whole];
      }
    }
    for (; i < width; ++i) {
      if (i >= valid) {
        for (int64_t p = 0; p < kp; ++p) out[p * width + i] = 0;
        continue;
      }
      const uint16_t* row = src + (r0 + panel * width + i) * ld + k0;
      for (int64_t p = 0; p < whole; ++p) {
        uint32_t word;
        std::memcpy(&word, row + 2 * p, sizeof(word));
        out[p * width + i] = word;
      }
      if (whole < kp) out[whole * width + i] = row[2 * whole];  // odd kc: high half zero
    }
  }
}

namespace {

// out[2j + t] = rows[t][j] for j < cols, zero for cols <= j < width.
void interleave_two_rows(const uint16_t* row0, const uint16_t* row1, int64_t cols, int width,
                         uint16_t* out) {
  int64_t j = 0;
#if defined(__SSE2__)
  for (; j + 8 <= cols; j += 8) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row0 + j));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row1 + j));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * j), _mm_unpacklo_epi16(a, b));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * j + 8), _mm_unpackhi_epi16(a, b));
  }
#endif
  for (; j < cols; ++j) {
    out[2 * j] = row0[j];
    out[2 * j + 1] = row1[j];
  }
  if (cols < width) std::memset(out + 2 * cols, 0, sizeof(uint16_t) * 2 * (width - cols));
}

}  // namespace

void pack_pairs_down_columns(const uint16_t* src, int64_t ld, int64_t k0, int64_t kc,
                             int64_t k_end, int64_t c0, int64_t count, int width, uint16_t* dst) {
  static const uint16_t kZeros[64] = {};  // >= any width
  const int64_t kp = pairs_of(kc);
  const int64_t panels = (count + width - 1) / width;
  const int64_t last = std::min(k0 + kc, k_end);  // rows at or past it read as zero
  for (int64_t panel = 0; panel < panels; ++panel) {
    const int64_t col = panel * width;
    const int64_t cols = std::min<int64_t>(width, count - col);
    uint16_t* out = dst + panel * width * kp * 2;
    for (int64_t p = 0; p < kp; ++p) {
      const int64_t k = k0 + 2 * p;
      const uint16_t* row0 = k < last ? src + k * ld + c0 + col : kZeros;
      const uint16_t* row1 = k + 1 < last ? src + (k + 1) * ld + c0 + col : kZeros;
      interleave_two_rows(row0, row1, cols, width, out + p * width * 2);
    }
  }
}

}  // namespace raggemm::kernels
