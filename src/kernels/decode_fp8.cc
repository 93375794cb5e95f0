#include "kernels/decode_fp8.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/cpu_features.h"
#include "kernels/microkernel_registry.h"
#include "raggemm/error.h"
#include "raggemm/fp8.h"

#if defined(__x86_64__) && defined(__GNUC__)
// GCC 12's AVX-512 headers start some intrinsics from _mm512_undefined_*,
// which -Wmaybe-uninitialized reports inside them once inlined here.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#define RAGGEMM_FP8_X86 1
#endif

namespace raggemm::kernels {
namespace {

using SpanFn = void (*)(const uint8_t*, int64_t, float, const float*, float*);

// Per format: mantissa bits and the f32 exponent bias minus the format's.
//   e4m3: normal bits (mag << 20) + (120 << 23); NaN at magnitude 0x7f.
//   e5m2: normal bits (mag << 21) + (112 << 23); inf at 0x7c, NaN above.
// Subnormal magnitudes (exponent field 0) get exponent field 1 instead,
// which adds the smallest normal 2^(1 - bias); subtracting it leaves
// mantissa * 2^(1 - bias - mantissa_bits), exactly.
template <bool kE5M2>
struct Format {
  static constexpr int kShift = kE5M2 ? 21 : 20;
  static constexpr uint32_t kRebias = kE5M2 ? (112u << 23) : (120u << 23);
  static constexpr uint32_t kFirstNormal = kE5M2 ? 4u : 8u;  // smallest normal magnitude
  static constexpr float kMinNormal = kE5M2 ? 0x1p-14f : 0x1p-6f;
};

void scalar_span(DType dtype, const uint8_t* src, int64_t count, float scale,
                 const float* col_scales, float* out) {
  const float* table = fp8_decode_table(dtype);
  if (col_scales) {
    for (int64_t j = 0; j < count; ++j) out[j] = table[src[j]] * scale * col_scales[j];
  } else {
    for (int64_t j = 0; j < count; ++j) out[j] = table[src[j]] * scale;
  }
}

template <bool kE5M2>
void scalar_span_of(const uint8_t* src, int64_t count, float scale, const float* col_scales,
                    float* out) {
  scalar_span(kE5M2 ? DType::kF8E5M2 : DType::kF8E4M3, src, count, scale, col_scales, out);
}

// A block's rows are a few lines each, then a jump of a whole weight row,
// which the hardware prefetcher does not follow: from DRAM, packing fp8
// ran at 2.4x f32's time for a quarter of its bytes until rows kAheadRows
// ahead were prefetched.
constexpr int64_t kAheadRows = 16;

inline void prefetch_row(const uint8_t* row, int64_t cols) {
  for (int64_t b = 0; b < cols; b += 64) __builtin_prefetch(row + b);
  __builtin_prefetch(row + cols - 1);
}

inline void prefetch_first_rows(const uint8_t* src, int64_t ld, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < std::min(kAheadRows, rows); ++r) prefetch_row(src + r * ld, cols);
}

inline void prefetch_row_ahead(const uint8_t* src, int64_t ld, int64_t r, int64_t rows,
                               int64_t cols) {
  if (r + kAheadRows < rows) prefetch_row(src + (r + kAheadRows) * ld, cols);
}

#ifdef RAGGEMM_FP8_X86
#define RAGGEMM_FP8_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))
#define RAGGEMM_FP8_AVX2 __attribute__((target("avx2,f16c")))

template <bool kE5M2>
RAGGEMM_FP8_AVX512 inline __m512 decode16(__m512i codes) {
  using F = Format<kE5M2>;
  const __m512i magnitude = _mm512_and_si512(codes, _mm512_set1_epi32(0x7f));
  const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(codes, _mm512_set1_epi32(0x80)), 24);
  __m512i bits =
      _mm512_add_epi32(_mm512_slli_epi32(magnitude, F::kShift), _mm512_set1_epi32(F::kRebias));
  const __mmask16 subnormal = _mm512_cmplt_epu32_mask(magnitude, _mm512_set1_epi32(F::kFirstNormal));
  bits = _mm512_mask_add_epi32(bits, subnormal, bits, _mm512_set1_epi32(1 << 23));
  __m512 value = _mm512_castsi512_ps(bits);
  value = _mm512_mask_sub_ps(value, subnormal, value, _mm512_set1_ps(F::kMinNormal));
  __m512i out = _mm512_castps_si512(value);
  if constexpr (kE5M2) {
    const __mmask16 inf = _mm512_cmpeq_epu32_mask(magnitude, _mm512_set1_epi32(0x7c));
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(magnitude, _mm512_set1_epi32(0x7c));
    out = _mm512_mask_mov_epi32(out, inf, _mm512_set1_epi32(0x7f800000));
    out = _mm512_mask_mov_epi32(out, nan, _mm512_set1_epi32(0x7fc00000));
  } else {
    const __mmask16 nan = _mm512_cmpeq_epu32_mask(magnitude, _mm512_set1_epi32(0x7f));
    out = _mm512_mask_mov_epi32(out, nan, _mm512_set1_epi32(0x7fc00000));
  }
  return _mm512_castsi512_ps(_mm512_or_si512(out, sign));
}

template <bool kE5M2>
RAGGEMM_FP8_AVX512 void avx512_span(const uint8_t* src, int64_t count, float scale,
                                    const float* col_scales, float* out) {
  const __m512 s = _mm512_set1_ps(scale);
  for (int64_t j = 0; j < count; j += 16) {
    const int64_t left = count - j;
    const __mmask16 mask = left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1u);
    const __m512i codes = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(mask, src + j));
    __m512 v = _mm512_mul_ps(decode16<kE5M2>(codes), s);
    if (col_scales) v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(mask, col_scales + j));
    _mm512_mask_storeu_ps(out + j, mask, v);
  }
}

// One source row into the panels.
template <bool kE5M2>
RAGGEMM_FP8_AVX512 inline void avx512_panel_row(const uint8_t* src, int64_t cols, int nr,
                                                int64_t panel_stride, __m512 s,
                                                const float* col_scales, float* dst) {
  for (int64_t j0 = 0; j0 < cols; j0 += nr) {
    float* panel = dst + (j0 / nr) * panel_stride;
    for (int64_t j = 0; j < nr; j += 16) {
      const int64_t left = cols - j0 - j;
      const __mmask16 mask = left >= 16 ? __mmask16(0xffff)
                             : left <= 0 ? __mmask16(0)
                                         : __mmask16((1u << left) - 1u);
      const __m512i codes = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(mask, src + j0 + j));
      __m512 v = _mm512_mul_ps(decode16<kE5M2>(codes), s);
      if (col_scales) v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(mask, col_scales + j0 + j));
      // Columns past `cols` are zero (the masked lanes).
      const int64_t lanes = std::min<int64_t>(16, nr - j);
      _mm512_mask_storeu_ps(panel + j, __mmask16((1u << lanes) - 1u),
                            _mm512_maskz_mov_ps(mask, v));
    }
  }
}

template <bool kE5M2>
RAGGEMM_FP8_AVX512 void avx512_panels(const uint8_t* src, int64_t ld, int64_t rows, int64_t cols,
                                      int nr, int64_t panel_stride, float scale,
                                      const float* col_scales, float* dst) {
  const __m512 s = _mm512_set1_ps(scale);
  prefetch_first_rows(src, ld, rows, cols);
  for (int64_t r = 0; r < rows; ++r) {
    prefetch_row_ahead(src, ld, r, rows, cols);
    avx512_panel_row<kE5M2>(src + r * ld, cols, nr, panel_stride, s, col_scales, dst + r * nr);
  }
}

// AVX2 (with F16C): 16 codes at a time through fp16, whose conversion
// to f32 is one instruction.
//  - e5m2 is fp16's top byte: code << 8 is the fp16 of the same value,
//    infinities and NaNs included. NaNs are rewritten to the quiet NaN with
//    no payload (fp16 0x7e00, f32 0x7fc00000) that the scalar decoder gives.
//  - e4m3's exponent and mantissa, shifted into fp16's (magnitude << 7),
//    give its value times 2^-8 (fp16's bias is 8 more than e4m3's), normal
//    and subnormal alike; the sign goes to bit 15. The f32 is then scaled
//    by 256, exactly. Magnitude 0x7f, which is e4m3's NaN, would read as
//    1.875, so it is rewritten to fp16's quiet NaN first.
// The results are the scalar decoder's bits times the scales in the same
// order (DecodeFp8.AllCodesBothFormatsEveryImplementation).
template <bool kE5M2>
RAGGEMM_FP8_AVX2 inline __m256i fp16_of_codes(__m128i codes16) {
  const __m256i quiet_nan = _mm256_set1_epi16(0x7e00);
  if constexpr (kE5M2) {
    const __m256i h = _mm256_slli_epi16(_mm256_cvtepu8_epi16(codes16), 8);
    const __m256i magnitude = _mm256_and_si256(h, _mm256_set1_epi16(0x7fff));
    const __m256i nan = _mm256_cmpgt_epi16(magnitude, _mm256_set1_epi16(0x7c00));
    const __m256i sign = _mm256_andnot_si256(magnitude, h);
    return _mm256_blendv_epi8(h, _mm256_or_si256(sign, quiet_nan), nan);
  } else {
    // Sign-extended codes shifted by 7: magnitude in bits 7..13, the sign
    // in bits 14 and 15; bit 14 (fp16's top exponent bit) is cleared.
    const __m256i shifted = _mm256_slli_epi16(_mm256_cvtepi8_epi16(codes16), 7);
    const __m256i h = _mm256_and_si256(shifted, _mm256_set1_epi16(static_cast<int16_t>(0xbf80)));
    const __m256i read_as_nan = _mm256_set1_epi16(0x3f80);  // magnitude 0x7f, shifted
    const __m256i nan =
        _mm256_cmpeq_epi16(_mm256_and_si256(h, _mm256_set1_epi16(0x7fff)), read_as_nan);
    // 0x3f80 ^ (0x3f80 ^ 0x7e00) = 0x7e00, the sign bit untouched.
    const __m256i to_quiet_nan = _mm256_xor_si256(quiet_nan, read_as_nan);
    return _mm256_xor_si256(h, _mm256_and_si256(nan, to_quiet_nan));
  }
}

// Values of 16 codes (before the scales): lanes 0..7 in lo, 8..15 in hi.
template <bool kE5M2>
RAGGEMM_FP8_AVX2 inline void decode16_avx2(const uint8_t* src, __m256& lo, __m256& hi) {
  const __m256i h =
      fp16_of_codes<kE5M2>(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
  lo = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
  hi = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
  if constexpr (!kE5M2) {
    const __m256 two_to_8 = _mm256_set1_ps(256.0f);
    lo = _mm256_mul_ps(lo, two_to_8);
    hi = _mm256_mul_ps(hi, two_to_8);
  }
}

// out[0..count) = decode(src) * scale (* col_scales); whole blocks of 16,
// the rest through the scalar decoder.
template <bool kE5M2>
RAGGEMM_FP8_AVX2 inline void avx2_row(const uint8_t* src, int64_t count, __m256 s, float scale,
                                      const float* col_scales, float* out) {
  int64_t j = 0;
  for (; j + 16 <= count; j += 16) {
    __m256 lo, hi;
    decode16_avx2<kE5M2>(src + j, lo, hi);
    lo = _mm256_mul_ps(lo, s);
    hi = _mm256_mul_ps(hi, s);
    if (col_scales) {
      lo = _mm256_mul_ps(lo, _mm256_loadu_ps(col_scales + j));
      hi = _mm256_mul_ps(hi, _mm256_loadu_ps(col_scales + j + 8));
    }
    _mm256_storeu_ps(out + j, lo);
    _mm256_storeu_ps(out + j + 8, hi);
  }
  if (j < count) {
    scalar_span_of<kE5M2>(src + j, count - j, scale, col_scales ? col_scales + j : nullptr,
                          out + j);
  }
}

template <bool kE5M2>
RAGGEMM_FP8_AVX2 void avx2_span(const uint8_t* src, int64_t count, float scale,
                                const float* col_scales, float* out) {
  avx2_row<kE5M2>(src, count, _mm256_set1_ps(scale), scale, col_scales, out);
}

template <bool kE5M2>
RAGGEMM_FP8_AVX2 void avx2_panels(const uint8_t* src, int64_t ld, int64_t rows, int64_t cols,
                                  int nr, int64_t panel_stride, float scale,
                                  const float* col_scales, float* dst) {
  const __m256 s = _mm256_set1_ps(scale);
  prefetch_first_rows(src, ld, rows, cols);
  for (int64_t r = 0; r < rows; ++r) {
    prefetch_row_ahead(src, ld, r, rows, cols);
    const uint8_t* row = src + r * ld;
    float* row_dst = dst + r * nr;
    for (int64_t j = 0; j < cols; j += nr) {
      const int64_t width = std::min<int64_t>(nr, cols - j);
      float* panel = row_dst + (j / nr) * panel_stride;
      avx2_row<kE5M2>(row + j, width, s, scale, col_scales ? col_scales + j : nullptr, panel);
      if (width < nr) std::fill(panel + width, panel + nr, 0.0f);
    }
  }
}
#endif

using PanelsFn = void (*)(const uint8_t*, int64_t, int64_t, int64_t, int, int64_t, float,
                          const float*, float*);

// Panels through the scalar span decoder, a call per panel.
template <bool kE5M2>
void scalar_panels(const uint8_t* src, int64_t ld, int64_t rows, int64_t cols, int nr,
                   int64_t panel_stride, float scale, const float* col_scales, float* dst) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < cols; j += nr) {
      const int64_t width = std::min<int64_t>(nr, cols - j);
      float* panel = dst + r * nr + (j / nr) * panel_stride;
      scalar_span_of<kE5M2>(src + r * ld + j, width, scale, col_scales ? col_scales + j : nullptr,
                            panel);
      if (width < nr) std::fill(panel + width, panel + nr, 0.0f);
    }
  }
}

struct Chosen {
  SpanFn span[2];      // e4m3, e5m2
  PanelsFn panels[2];  // e4m3, e5m2
};

// Level 2: AVX-512, 1: AVX2, 0: portable; each only where the CPU has it.
constexpr Chosen implementations(int level) {
#ifdef RAGGEMM_FP8_X86
  if (level == 2) {
    return {{&avx512_span<false>, &avx512_span<true>},
            {&avx512_panels<false>, &avx512_panels<true>}};
  }
  if (level == 1) {
    return {{&avx2_span<false>, &avx2_span<true>}, {&avx2_panels<false>, &avx2_panels<true>}};
  }
#endif
  (void)level;
  return {{&scalar_span_of<false>, &scalar_span_of<true>},
          {&scalar_panels<false>, &scalar_panels<true>}};
}

int cpu_level() {
  const CpuFeatures& cpu = cpu_features();
  if (cpu.avx512()) return 2;
  if (cpu.avx2 && cpu.f16c) return 1;
  return 0;
}

int format_index(DType dtype) {
  if (dtype == DType::kF8E4M3) return 0;
  if (dtype == DType::kF8E5M2) return 1;
  fail("dtype", dtype_name(dtype), "not an fp8 type (expected fp8_e4m3 or fp8_e5m2)");
}

// The CPU's best, lowered to what the f32 dispatch may use now: asked on
// every call (the three sets are built once), so a Highway target forced
// after the first decode is followed.
// (Tables and the CPU's level are set before main, so a call costs no
// guard.)
constexpr Chosen kByLevel[3] = {implementations(0), implementations(1), implementations(2)};
const int kCpuLevel = cpu_level();

int level_now() { return std::min(kCpuLevel, static_cast<int>(highway_family())); }

const Chosen& chosen() { return kByLevel[level_now()]; }

}  // namespace

void decode_fp8_span(DType dtype, const uint8_t* src, int64_t count, float scale,
                     const float* col_scales, float* out) {
  chosen().span[format_index(dtype)](src, count, scale, col_scales, out);
}

void decode_fp8_panels(DType dtype, const uint8_t* src, int64_t ld, int64_t rows, int64_t cols,
                       int nr, int64_t panel_stride, float scale, const float* col_scales,
                       float* dst) {
  chosen().panels[format_index(dtype)](src, ld, rows, cols, nr, panel_stride, scale, col_scales,
                                       dst);
}

const char* decode_fp8_implementation() {
  static const char* const kNames[3] = {"SCALAR", "AVX2", "AVX512"};
  return kNames[level_now()];
}

bool decode_fp8_span_on(const char* isa, DType dtype, const uint8_t* src, int64_t count,
                        float scale, const float* col_scales, float* out) {
  const std::string name = isa;
  const bool e5m2 = dtype == DType::kF8E5M2;
  if (name == "SCALAR") {
    scalar_span(dtype, src, count, scale, col_scales, out);
    return true;
  }
#ifdef RAGGEMM_FP8_X86
  if (name == "AVX512" && cpu_features().avx512()) {
    (e5m2 ? &avx512_span<true> : &avx512_span<false>)(src, count, scale, col_scales, out);
    return true;
  }
  if (name == "AVX2" && cpu_features().avx2 && cpu_features().f16c) {
    (e5m2 ? &avx2_span<true> : &avx2_span<false>)(src, count, scale, col_scales, out);
    return true;
  }
#endif
  (void)e5m2;
  return false;
}

}  // namespace raggemm::kernels
