// The pieces of quantization that every walk over a tensor shares: f32
// views of f32/bf16/f16 spans, absolute maxima, and the fastest encoder of a
// storage type. quantize (ops/quant.cc) and quantize_scaled
// (ops/quantize_scaled.h) are both built from them, so the two give the
// same codes and scales bit for bit.
#pragma once

#include <cstdint>
#include <cstring>
#include <utility>

#include "core/dtype_traits.h"
#include "raggemm/tensor.h"

namespace raggemm::ops {

// Elements offset + j * stride (j < count) of input as f32. input: f32,
// bf16 or f16 (anything else reads as zeros; callers check the dtype).
void gather_input(const TensorView& input, int64_t offset, int64_t stride, int64_t count,
                  float* dst);

// |x| as its bit pattern: for non-negative floats the integer order is the
// float order, and NaN (above inf) stays largest instead of being skipped
// by a float compare. Integer max vectorizes.
inline uint32_t magnitude_bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits & 0x7fffffffu;
}

// Largest |x| of a span from `start`, as a max over magnitude_bits: a NaN
// anywhere gives a NaN, an infinity an infinity.
float absmax_bits(const float* src, int64_t count, float start);

// Span kernels of quantize_scaled, compiled for each x86 SIMD level (the
// library's baseline is SSE2, which has no unsigned 32-bit max). f may be
// null: a factor of 1, without the multiplication.
//   column_absmax_bits: largest[j] = max(largest[j], magnitude_bits(x[j] * f[j]))
//   multiply_span:      dst[j] = x[j] * f[j]
//   divide_scaled_span: dst[j] = (x[j] * f[j]) / divisors[j], the product
//                       rounded to f32 first, as a scaled copy would hold it
void column_absmax_bits(const float* x, const float* f, int64_t count, uint32_t* largest);
void multiply_span(const float* x, const float* f, int64_t count, float* dst);
void divide_scaled_span(const float* x, const float* f, const float* divisors, int64_t count,
                        float* dst);

// Whether a maximum from absmax_bits is finite (false for inf and NaN).
inline bool finite_absmax(float absmax) { return absmax <= 3.40282347e38f; }

// The scale of a cell whose largest |x| is absmax under dynamic calibration:
// absmax / type_max, and 1 for a zero cell (or one so small its scale
// underflows), whose codes are then zero.
inline float dynamic_scale(float absmax, float type_max) {
  const float scale = absmax / type_max;
  return scale > 0.0f ? scale : 1.0f;
}

// Scales of cells whose maxima are `count` magnitude bits (absmax_bits'
// order), into scales; false when a maximum is not finite.
bool scales_from_maxima(const uint32_t* largest, int64_t count, float type_max, float* scales);

// Threads that quantize `rows` outer rows of `numel` elements, of `threads`
// asked for (0: OpenMP's default): small tensors stay on one thread, since
// starting a team costs more than them.
int quantize_team(int threads, int64_t rows, int64_t numel);

// Outer rows [begin, end) of thread t of n: contiguous, equal shares.
inline std::pair<int64_t, int64_t> share_of(int64_t rows, int t, int n) {
  return {rows * t / n, rows * (t + 1) / n};
}

// The error of dynamic calibration on a non-finite input element (row-major
// index), naming it.
[[noreturn]] void fail_non_finite(int64_t element);

// The fastest encoder of a storage type: the hand-vectorized ones of
// ops/fp8_encode.h and ops/int8_encode.h, else the type's portable hook.
core::EncodeSpanFn encoder_of(const core::DTypeTraits& codes);

}  // namespace raggemm::ops
