#include "ops/fp8_encode.h"

#include <string>

#include "kernels/cpu_features.h"
#include "kernels/simd_family.h"
#include "raggemm/fp8.h"

#if defined(__x86_64__) && defined(__GNUC__)
// GCC 12's AVX-512 headers start some intrinsics from _mm512_undefined_*,
// which -Wmaybe-uninitialized reports inside them once inlined here.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#define RAGGEMM_FP8_ENCODE_X86 1
#endif

namespace raggemm::ops {
namespace {

#ifdef RAGGEMM_FP8_ENCODE_X86
// The branch-free scheme of core/fp8.cc, lane by lane: normal magnitudes
// rebias and round the f32 bits (nearest even), subnormal ones round
// magnitude * 2^(bias - 1 + m) to an integer (cvtps rounds nearest even, as
// the 1.5 * 2^23 sum there does), then masks pick one, clamp to the largest
// finite code and put NaN back.
template <int kBias, int kMantissa, uint32_t kMaxCode, uint32_t kNanCode>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void encode_avx512(const float* src,
                                                                          int64_t count,
                                                                          float divisor,
                                                                          uint8_t* out) {
  constexpr int kShift = 23 - kMantissa;
  constexpr float kSubnormalScale = static_cast<float>(1u << (kBias - 1 + kMantissa));
  constexpr uint32_t kMinNormalBits = static_cast<uint32_t>(127 + 1 - kBias) << 23;
  const __m512 d = _mm512_set1_ps(divisor);
  const __m512i rebias = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(127 - kBias) << 23));
  const __m512i half_minus_one = _mm512_set1_epi32((1 << (kShift - 1)) - 1);
  const __m512i one = _mm512_set1_epi32(1);
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  for (int64_t j = 0; j < count; j += 16) {
    const int64_t left = count - j;
    const __mmask16 lanes = left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1u);
    const __m512 x = _mm512_div_ps(_mm512_maskz_loadu_ps(lanes, src + j), d);
    const __m512i bits = _mm512_castps_si512(x);
    const __m512i sign = _mm512_and_si512(_mm512_srli_epi32(bits, 24), _mm512_set1_epi32(0x80));
    const __m512i magnitude = _mm512_and_si512(bits, abs_mask);
    const __m512i rebased = _mm512_sub_epi32(magnitude, rebias);
    const __m512i round = _mm512_add_epi32(
        half_minus_one, _mm512_and_si512(_mm512_srli_epi32(rebased, kShift), one));
    const __m512i normal = _mm512_srli_epi32(_mm512_add_epi32(rebased, round), kShift);
    const __mmask16 subnormal =
        _mm512_cmplt_epu32_mask(magnitude, _mm512_set1_epi32(static_cast<int>(kMinNormalBits)));
    const __m512 scaled = _mm512_mul_ps(
        _mm512_castsi512_ps(_mm512_maskz_mov_epi32(subnormal, magnitude)),
        _mm512_set1_ps(kSubnormalScale));
    __m512i code = _mm512_mask_mov_epi32(normal, subnormal, _mm512_cvtps_epi32(scaled));
    const __mmask16 too_big =
        _mm512_cmpge_epu32_mask(magnitude, _mm512_set1_epi32(0x7f800000)) |
        _mm512_cmpgt_epu32_mask(code, _mm512_set1_epi32(static_cast<int>(kMaxCode)));
    code = _mm512_mask_mov_epi32(code, too_big, _mm512_set1_epi32(static_cast<int>(kMaxCode)));
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(magnitude, _mm512_set1_epi32(0x7f800000));
    code = _mm512_mask_mov_epi32(code, nan, _mm512_set1_epi32(static_cast<int>(kNanCode)));
    _mm_mask_storeu_epi8(out + j, lanes, _mm512_cvtepi32_epi8(_mm512_or_si512(code, sign)));
  }
}

// The same on AVX2, 16 values a step (two vectors of 8), the unsigned
// compares as signed ones: magnitudes and codes are below 2^31.
template <int kBias, int kMantissa, uint32_t kMaxCode, uint32_t kNanCode>
__attribute__((target("avx2"))) __m256i encode8_avx2(__m256 x) {
  constexpr int kShift = 23 - kMantissa;
  constexpr float kSubnormalScale = static_cast<float>(1u << (kBias - 1 + kMantissa));
  constexpr uint32_t kMinNormalBits = static_cast<uint32_t>(127 + 1 - kBias) << 23;
  const __m256i bits = _mm256_castps_si256(x);
  const __m256i sign = _mm256_and_si256(_mm256_srli_epi32(bits, 24), _mm256_set1_epi32(0x80));
  const __m256i magnitude = _mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff));
  const __m256i rebased = _mm256_sub_epi32(
      magnitude, _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(127 - kBias) << 23)));
  const __m256i round =
      _mm256_add_epi32(_mm256_set1_epi32((1 << (kShift - 1)) - 1),
                       _mm256_and_si256(_mm256_srli_epi32(rebased, kShift), _mm256_set1_epi32(1)));
  const __m256i normal = _mm256_srli_epi32(_mm256_add_epi32(rebased, round), kShift);
  const __m256i subnormal =
      _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(kMinNormalBits)), magnitude);
  const __m256 scaled = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_and_si256(subnormal, magnitude)),
                                      _mm256_set1_ps(kSubnormalScale));
  __m256i code = _mm256_blendv_epi8(normal, _mm256_cvtps_epi32(scaled), subnormal);
  const __m256i infinity = _mm256_set1_epi32(0x7f800000);
  const __m256i largest_finite = _mm256_set1_epi32(0x7f7fffff);
  const __m256i too_big =
      _mm256_or_si256(_mm256_cmpgt_epi32(magnitude, largest_finite),
                      _mm256_cmpgt_epi32(code, _mm256_set1_epi32(static_cast<int>(kMaxCode))));
  code = _mm256_blendv_epi8(code, _mm256_set1_epi32(static_cast<int>(kMaxCode)), too_big);
  const __m256i nan = _mm256_cmpgt_epi32(magnitude, infinity);
  code = _mm256_blendv_epi8(code, _mm256_set1_epi32(static_cast<int>(kNanCode)), nan);
  return _mm256_or_si256(code, sign);
}

template <int kBias, int kMantissa, uint32_t kMaxCode, uint32_t kNanCode>
__attribute__((target("avx2"))) void encode_avx2(const float* src, int64_t count, float divisor,
                                                 uint8_t* out) {
  const __m256 d = _mm256_set1_ps(divisor);
  int64_t j = 0;
  for (; j + 16 <= count; j += 16) {
    const __m256i c0 = encode8_avx2<kBias, kMantissa, kMaxCode, kNanCode>(
        _mm256_div_ps(_mm256_loadu_ps(src + j), d));
    const __m256i c1 = encode8_avx2<kBias, kMantissa, kMaxCode, kNanCode>(
        _mm256_div_ps(_mm256_loadu_ps(src + j + 8), d));
    // Words c0[0..3] c1[0..3] | c0[4..7] c1[4..7], put in order, then bytes.
    const __m256i words = _mm256_permute4x64_epi64(_mm256_packus_epi32(c0, c1), 0xd8);
    const __m128i bytes =
        _mm_packus_epi16(_mm256_castsi256_si128(words), _mm256_extracti128_si256(words, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + j), bytes);
  }
  if (j < count) {
    fp8_encode_span(kMantissa == 3 ? DType::kF8E4M3 : DType::kF8E5M2, src + j, count - j, divisor,
                    out + j);
  }
}

void encode_avx2_of(DType dtype, const float* src, int64_t count, float divisor, uint8_t* out) {
  if (dtype == DType::kF8E4M3) {
    encode_avx2<7, 3, 0x7eu, 0x7fu>(src, count, divisor, out);
  } else {
    encode_avx2<15, 2, 0x7bu, 0x7eu>(src, count, divisor, out);
  }
}

void encode_avx512_of(DType dtype, const float* src, int64_t count, float divisor, uint8_t* out) {
  if (dtype == DType::kF8E4M3) {
    encode_avx512<7, 3, 0x7eu, 0x7fu>(src, count, divisor, out);
  } else {
    encode_avx512<15, 2, 0x7bu, 0x7eu>(src, count, divisor, out);
  }
}
#endif

}  // namespace

void encode_fp8_span(DType dtype, const float* src, int64_t count, float divisor, uint8_t* out) {
#ifdef RAGGEMM_FP8_ENCODE_X86
  const kernels::CpuFeatures& cpu = kernels::cpu_features();
  const bool fp8 = dtype == DType::kF8E4M3 || dtype == DType::kF8E5M2;
  if (fp8 && cpu.avx512() && kernels::avx512_family_allowed()) {
    encode_avx512_of(dtype, src, count, divisor, out);
    return;
  }
  if (fp8 && cpu.avx2 && kernels::avx2_family_allowed()) {
    encode_avx2_of(dtype, src, count, divisor, out);
    return;
  }
#endif
  fp8_encode_span(dtype, src, count, divisor, out);  // refuses other dtypes
}

bool encode_fp8_span_on(const char* isa, DType dtype, const float* src, int64_t count,
                        float divisor, uint8_t* out) {
  const std::string name = isa;
  if (name == "PORTABLE") {
    fp8_encode_span(dtype, src, count, divisor, out);
    return true;
  }
#ifdef RAGGEMM_FP8_ENCODE_X86
  if (name == "AVX512" && kernels::cpu_features().avx512()) {
    encode_avx512_of(dtype, src, count, divisor, out);
    return true;
  }
  if (name == "AVX2" && kernels::cpu_features().avx2) {
    encode_avx2_of(dtype, src, count, divisor, out);
    return true;
  }
#endif
  return false;
}

}  // namespace raggemm::ops
