// Span helpers shared by quantize and quantize_scaled (ops/quant_spans.h).
#include "ops/quant_spans.h"

#include <algorithm>
#include <array>
#include <string>

#include <omp.h>

#include "ops/fp8_encode.h"
#include "ops/int8_encode.h"
#include "raggemm/error.h"

namespace raggemm::ops {
namespace {

// Elements offset + j * stride (j < count) of input as f32, with the dtype
// switch outside the loop: load_input's switch per element made strided
// spans (a weight's columns under per-channel scales) cost about 35
// instructions an element more than the encoder itself (callgrind).
template <class Code, class Convert>
void gather_as(const TensorView& input, int64_t offset, int64_t stride, int64_t count, float* dst,
               Convert convert) {
  const Code* src = input.as<const Code>() + offset;
  for (int64_t j = 0; j < count; ++j) dst[j] = convert(src[j * stride]);
}

}  // namespace

void gather_input(const TensorView& input, int64_t offset, int64_t stride, int64_t count,
                  float* dst) {
  switch (input.dtype) {
    case DType::kF32:
      return gather_as<float>(input, offset, stride, count, dst, [](float x) { return x; });
    case DType::kBF16:
      return gather_as<uint16_t>(input, offset, stride, count, dst, bf16_to_f32);
    case DType::kF16:
      return gather_as<uint16_t>(input, offset, stride, count, dst, f16_to_f32);
    default:  // callers admit only the three above
      std::fill(dst, dst + count, 0.0f);
  }
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_ADDRESS__)
#define RAGGEMM_QUANT_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define RAGGEMM_QUANT_CLONES
#endif

RAGGEMM_QUANT_CLONES float absmax_bits(const float* src, int64_t count, float start) {
  uint32_t largest;
  std::memcpy(&largest, &start, sizeof(largest));
  for (int64_t j = 0; j < count; ++j) {
    const uint32_t bits = magnitude_bits(src[j]);
    largest = bits > largest ? bits : largest;
  }
  float result;
  std::memcpy(&result, &largest, sizeof(result));
  return result;
}

RAGGEMM_QUANT_CLONES void column_absmax_bits(const float* x, const float* f, int64_t count,
                                             uint32_t* largest) {
  if (!f) {
    for (int64_t j = 0; j < count; ++j) largest[j] = std::max(largest[j], magnitude_bits(x[j]));
    return;
  }
  for (int64_t j = 0; j < count; ++j) {
    largest[j] = std::max(largest[j], magnitude_bits(x[j] * f[j]));
  }
}

RAGGEMM_QUANT_CLONES void multiply_span(const float* x, const float* f, int64_t count,
                                        float* dst) {
  for (int64_t j = 0; j < count; ++j) dst[j] = x[j] * f[j];
}

RAGGEMM_QUANT_CLONES void divide_scaled_span(const float* x, const float* f,
                                             const float* divisors, int64_t count, float* dst) {
  if (!f) {
    for (int64_t j = 0; j < count; ++j) dst[j] = x[j] / divisors[j];
    return;
  }
  for (int64_t j = 0; j < count; ++j) {
    const float product = x[j] * f[j];
    dst[j] = product / divisors[j];
  }
}

namespace {

// The encoders ops vectorized by hand (ops/fp8_encode.h, ops/int8_encode.h),
// by DType; a type without one encodes through its portable hook
// (core/dtype_traits.h).
void fast_int8(const float* src, int64_t count, float divisor, void* data, int64_t first) {
  encode_int8_span(src, count, divisor, static_cast<int8_t*>(data) + first);
}

template <DType kDType>
void fast_fp8(const float* src, int64_t count, float divisor, void* data, int64_t first) {
  encode_fp8_span(kDType, src, count, divisor, static_cast<uint8_t*>(data) + first);
}

constexpr std::array<core::EncodeSpanFn, kDTypeCount> kFastEncoders = [] {
  std::array<core::EncodeSpanFn, kDTypeCount> encoders{};
  encoders[static_cast<int>(DType::kI8)] = &fast_int8;
  encoders[static_cast<int>(DType::kF8E4M3)] = &fast_fp8<DType::kF8E4M3>;
  encoders[static_cast<int>(DType::kF8E5M2)] = &fast_fp8<DType::kF8E5M2>;
  return encoders;
}();

}  // namespace

bool scales_from_maxima(const uint32_t* largest, int64_t count, float type_max, float* scales) {
  bool finite = true;
  for (int64_t i = 0; i < count; ++i) {
    float absmax;
    std::memcpy(&absmax, &largest[i], sizeof(absmax));
    finite &= finite_absmax(absmax);
    scales[i] = dynamic_scale(absmax, type_max);
  }
  return finite;
}

int quantize_team(int threads, int64_t rows, int64_t numel) {
  constexpr int64_t kElementsPerThread = int64_t{1} << 15;
  const int wanted = threads > 0 ? threads : omp_get_max_threads();
  return static_cast<int>(
      std::max<int64_t>(1, std::min<int64_t>({wanted, rows, numel / kElementsPerThread})));
}

void fail_non_finite(int64_t element) {
  fail("input", "non-finite value at element " + std::to_string(element),
       "dynamic calibration needs finite inputs (use a static range to saturate)");
}

core::EncodeSpanFn encoder_of(const core::DTypeTraits& codes) {
  const core::EncodeSpanFn fast = kFastEncoders[static_cast<int>(codes.dtype)];
  return fast ? fast : codes.encode_span;
}

}  // namespace raggemm::ops
