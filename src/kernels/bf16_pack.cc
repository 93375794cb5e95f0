#include "kernels/bf16_pack.h"

#include "kernels/bf16_microkernel.h"

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
                           int64_t kc, int width, uint16_t* dst, int64_t padded_kc) {
  const int64_t kp = pairs_of(std::max(kc, padded_kc));
  const int64_t filled = pairs_of(kc);  // pairs past it are zero
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
      if (whole < filled) {  // odd kc: high half zero
        for (int t = 0; t < 4; ++t) out[whole * width + i + t] = rows[t][2 * whole];
      }
      for (int64_t q = filled; q < kp; ++q) {
        for (int t = 0; t < 4; ++t) out[q * width + i + t] = 0;
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
      if (whole < filled) out[whole * width + i] = row[2 * whole];  // odd kc: high half zero
      for (int64_t q = filled; q < kp; ++q) out[q * width + i] = 0;
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

// Pairs of rows below the one being packed that pack_pairs_down_columns asks
// the memory for.
constexpr int64_t kPrefetchPairs = 8;

void pack_pairs_down_columns(const uint16_t* src, int64_t ld, int64_t k0, int64_t kc,
                             int64_t k_end, int64_t c0, int64_t count, int width, uint16_t* dst) {
  static const uint16_t kZeros[64] = {};  // >= any width
  const int64_t kp = pairs_of(kc);
  const int64_t panels = (count + width - 1) / width;
  const int64_t last = std::min(k0 + kc, k_end);  // rows at or past it read as zero
  // Pairs of rows outer: each source row is read once, left to right along
  // its `count` columns, while the rows kPrefetchPairs pairs below are asked
  // for (panels outer walked every row once per panel, one line at a time
  // down a stride of ld: a weight read from DRAM that way kept the AMX gmm
  // at 128 groups bound by this packing).
  const int64_t row_lines = (count * static_cast<int64_t>(sizeof(uint16_t)) + 63) / 64;
  for (int64_t p = 0; p < kp; ++p) {
    const int64_t k = k0 + 2 * p;
    const int64_t ahead = k + 2 * kPrefetchPairs;
    for (int64_t r = ahead; r < std::min(ahead + 2, last); ++r) {
      const char* line = reinterpret_cast<const char*>(src + r * ld + c0);
      for (int64_t l = 0; l < row_lines; ++l) __builtin_prefetch(line + 64 * l);
    }
    const uint16_t* row0 = k < last ? src + k * ld + c0 : nullptr;
    const uint16_t* row1 = k + 1 < last ? src + (k + 1) * ld + c0 : nullptr;
    for (int64_t panel = 0; panel < panels; ++panel) {
      const int64_t col = panel * width;
      const int64_t cols = std::min<int64_t>(width, count - col);
      interleave_two_rows(row0 ? row0 + col : kZeros, row1 ? row1 + col : kZeros, cols, width,
                          dst + panel * width * kp * 2 + p * width * 2);
    }
  }
}

void pack_blocks_along_rows(const uint16_t* src, int64_t ld, int64_t r0, int64_t count,
                            int64_t k0, int64_t kc, int width, uint16_t* dst) {
  constexpr int64_t kB = kAmxBlockK;
  const int64_t blocks = (kc + kB - 1) / kB;
  const int64_t panels = (count + width - 1) / width;
  for (int64_t panel = 0; panel < panels; ++panel) {
    const int64_t valid = std::min<int64_t>(width, count - panel * width);
    for (int64_t blk = 0; blk < blocks; ++blk) {
      uint16_t* out = dst + (panel * blocks + blk) * width * kB;
      const int64_t depth = std::min(kB, kc - blk * kB);
      for (int64_t i = 0; i < valid; ++i) {
        const uint16_t* row = src + (r0 + panel * width + i) * ld + k0 + blk * kB;
        std::memcpy(out + i * kB, row, sizeof(uint16_t) * static_cast<size_t>(depth));
        if (depth < kB) std::memset(out + i * kB + depth, 0, sizeof(uint16_t) * (kB - depth));
      }
      if (valid < width) std::memset(out + valid * kB, 0, sizeof(uint16_t) * (width - valid) * kB);
    }
  }
}

namespace {

// out[c * ld_out + r] = in[r * ld_in + c] for an 8 x 8 block of uint16.
void transpose_8x8(const uint16_t* in, int64_t ld_in, uint16_t* out, int64_t ld_out) {
#if defined(__SSE2__)
  __m128i r[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i * ld_in));
  __m128i s[8], t[8];
  for (int i = 0; i < 4; ++i) {
    s[2 * i] = _mm_unpacklo_epi16(r[2 * i], r[2 * i + 1]);
    s[2 * i + 1] = _mm_unpackhi_epi16(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    t[4 * i + 0] = _mm_unpacklo_epi32(s[4 * i + 0], s[4 * i + 2]);
    t[4 * i + 1] = _mm_unpackhi_epi32(s[4 * i + 0], s[4 * i + 2]);
    t[4 * i + 2] = _mm_unpacklo_epi32(s[4 * i + 1], s[4 * i + 3]);
    t[4 * i + 3] = _mm_unpackhi_epi32(s[4 * i + 1], s[4 * i + 3]);
  }
  for (int i = 0; i < 4; ++i) {
    // t[i] holds columns 2i and 2i + 1 of rows 0-3, t[4 + i] of rows 4-7.
    const __m128i lo = _mm_unpacklo_epi64(t[i], t[4 + i]);
    const __m128i hi = _mm_unpackhi_epi64(t[i], t[4 + i]);
    const int col = 2 * i;
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + col * ld_out), lo);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (col + 1) * ld_out), hi);
  }
#else
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 8; ++j) out[j * ld_out + i] = in[i * ld_in + j];
  }
#endif
}

}  // namespace

void pack_blocks_down_columns(const uint16_t* src, int64_t ld, int64_t k0, int64_t kc,
                              int64_t k_end, int64_t c0, int64_t count, int width,
                              uint16_t* dst) {
  constexpr int64_t kB = kAmxBlockK;
  const int64_t blocks = (kc + kB - 1) / kB;
  const int64_t panels = (count + width - 1) / width;
  const int64_t last = std::min(k0 + kc, k_end);  // rows at or past it read as zero
  for (int64_t panel = 0; panel < panels; ++panel) {
    const int64_t col = c0 + panel * width;
    const int64_t valid = std::min<int64_t>(width, count - panel * width);
    for (int64_t blk = 0; blk < blocks; ++blk) {
      uint16_t* out = dst + (panel * blocks + blk) * width * kB;
      const int64_t kb0 = k0 + blk * kB;
      const int64_t depth = std::clamp<int64_t>(last - kb0, 0, kB);  // source rows in the block
      if (depth < kB || valid < width) std::memset(out, 0, sizeof(uint16_t) * width * kB);
      int64_t kk = 0;
      for (; kk + 8 <= depth; kk += 8) {
        int64_t i = 0;
        for (; i + 8 <= valid; i += 8) {
          transpose_8x8(src + (kb0 + kk) * ld + col + i, ld, out + i * kB + kk, kB);
        }
        for (; i < valid; ++i) {
          for (int64_t t = kk; t < kk + 8; ++t) out[i * kB + t] = src[(kb0 + t) * ld + col + i];
        }
      }
      for (; kk < depth; ++kk) {
        const uint16_t* row = src + (kb0 + kk) * ld + col;
        for (int64_t i = 0; i < valid; ++i) out[i * kB + kk] = row[i];
      }
    }
  }
}

}  // namespace raggemm::kernels
