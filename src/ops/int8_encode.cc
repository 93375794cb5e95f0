#include "ops/int8_encode.h"

#include <string>

#include "core/int8_code.h"
#include "kernels/cpu_features.h"
#include "kernels/simd_family.h"

#if defined(__x86_64__) && defined(__GNUC__)
// GCC 12's AVX-512 headers start some intrinsics from _mm512_undefined_*,
// which -Wmaybe-uninitialized reports inside them once inlined here.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#define RAGGEMM_INT8_ENCODE_X86 1
#endif

namespace raggemm::ops {
namespace {

// The scalar formula, core's one definition (core/int8_code.h).
inline int8_t encode_one(float value, float scale) { return core::int8_code(value / scale); }

void encode_scalar(const float* src, int64_t count, float scale, int8_t* out) {
  for (int64_t j = 0; j < count; ++j) out[j] = encode_one(src[j], scale);
}

#ifdef RAGGEMM_INT8_ENCODE_X86
// cvtps_epi32 rounds with the current mode (nearest even by default), as
// the magic-number sum does; the clamp keeps every value in int8's range.
__attribute__((target("avx512f"))) void encode_avx512(const float* src, int64_t count,
                                                      float scale, int8_t* out) {
  const __m512 divisor = _mm512_set1_ps(scale);
  const __m512 low = _mm512_set1_ps(-127.0f), high = _mm512_set1_ps(127.0f);
  int64_t j = 0;
  for (; j + 16 <= count; j += 16) {
    __m512 q = _mm512_div_ps(_mm512_loadu_ps(src + j), divisor);
    q = _mm512_min_ps(_mm512_max_ps(q, low), high);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + j),
                     _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(q)));
  }
  for (; j < count; ++j) out[j] = encode_one(src[j], scale);
}

__attribute__((target("avx2"))) void encode_avx2(const float* src, int64_t count, float scale,
                                                 int8_t* out) {
  const __m256 divisor = _mm256_set1_ps(scale);
  const __m256 low = _mm256_set1_ps(-127.0f), high = _mm256_set1_ps(127.0f);
  int64_t j = 0;
  for (; j + 16 <= count; j += 16) {
    __m256 q0 = _mm256_div_ps(_mm256_loadu_ps(src + j), divisor);
    __m256 q1 = _mm256_div_ps(_mm256_loadu_ps(src + j + 8), divisor);
    q0 = _mm256_min_ps(_mm256_max_ps(q0, low), high);
    q1 = _mm256_min_ps(_mm256_max_ps(q1, low), high);
    // i32 -> i16 -> i8 with saturating packs (values are in range); the
    // packs work per 128-bit lane, so a permute puts the 16 bytes in order.
    const __m256i words = _mm256_packs_epi32(_mm256_cvtps_epi32(q0), _mm256_cvtps_epi32(q1));
    const __m256i bytes = _mm256_packs_epi16(words, words);
    const __m256i ordered = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 0, 0, 0, 0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + j), _mm256_castsi256_si128(ordered));
  }
  for (; j < count; ++j) out[j] = encode_one(src[j], scale);
}

bool cpu_avx512() { return kernels::cpu_features().avx512f; }
bool cpu_avx2() { return kernels::cpu_features().avx2; }
#endif

}  // namespace

void encode_int8_span(const float* src, int64_t count, float scale, int8_t* out) {
#ifdef RAGGEMM_INT8_ENCODE_X86
  // The CPU's best, lowered to what the f32 dispatch may use now.
  static const bool avx512 = cpu_avx512(), avx2 = cpu_avx2();
  if (avx512 && kernels::avx512_family_allowed()) {
    encode_avx512(src, count, scale, out);
  } else if (avx2 && kernels::avx2_family_allowed()) {
    encode_avx2(src, count, scale, out);
  } else {
    encode_scalar(src, count, scale, out);
  }
#else
  encode_scalar(src, count, scale, out);
#endif
}

bool encode_int8_span_on(const char* isa, const float* src, int64_t count, float scale,
                         int8_t* out) {
  const std::string name = isa;
  if (name == "SCALAR") {
    encode_scalar(src, count, scale, out);
    return true;
  }
#ifdef RAGGEMM_INT8_ENCODE_X86
  if (name == "AVX512" && cpu_avx512()) {
    encode_avx512(src, count, scale, out);
    return true;
  }
  if (name == "AVX2" && cpu_avx2()) {
    encode_avx2(src, count, scale, out);
    return true;
  }
#endif
  return false;
}

}  // namespace raggemm::ops
