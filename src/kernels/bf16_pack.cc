#include "kernels/bf16_pack.h"

#include <algorithm>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace raggemm::kernels {

void pack_pairs_along_rows(const uint16_t* src, int64_t ld, int64_t r0, int64_t count, int64_t k0,
                           int64_t kc, int width, uint16_t* dst) {
  const int64_t kp = pairs_of(kc);
  const int64_t whole = kc / 2;  // pairs with both k inside the block
  const int64_t panels = (count + width - 1) / width;
  for (int64_t panel = 0; panel < panels; ++panel) {
    uint32_t* out = reinterpret_cast<uint32_t*>(dst + panel * width * kp * 2);
    for (int i = 0; i < width; ++i) {
      const int64_t r = panel * width + i;
      if (r >= count) {
        for (int64_t p = 0; p < kp; ++p) out[p * width + i] = 0;
        continue;
      }
      // A pair of bf16 along a row is one 32-bit word, copied as is.
      const uint16_t* row = src + (r0 + r) * ld + k0;
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
