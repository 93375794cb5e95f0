#include "kernels/decode.h"

#include <array>
#include <string>
#include <utility>

#include "core/dtype_codec.h"
#include "kernels/decode_fp8.h"
#include "kernels/widen.h"
#include "raggemm/dtype.h"
#include "raggemm/error.h"

namespace raggemm::kernels {
namespace {

template <class Load>
void decode_loop(const Operand& op, int64_t r, int64_t c0, int64_t count, float* out,
                 int64_t out_stride, Load load) {
  if (!op.scale.data) {
    // The contiguous case gets its own loop so the compiler vectorizes it
    // (with a run-time stride it did not: bf16 widening took 31% of a
    // bf16 gmm's samples at 128 groups).
    if (out_stride == 1) {
      for (int64_t j = 0; j < count; ++j) out[j] = load(j);
    } else {
      for (int64_t j = 0; j < count; ++j) out[j * out_stride] = load(j);
    }
    return;
  }
  const OperandScale& s = op.scale;
  const float* row_scales = s.data + (r / s.row_block) * s.row_stride;
  if (s.col_stride == 0) {
    const float scale = row_scales[0];
    for (int64_t j = 0; j < count; ++j) out[j * out_stride] = load(j) * scale;
    return;
  }
  if (s.col_block == 1) {  // per-column scales: no division per element
    const float* col_scales = row_scales + c0 * s.col_stride;
    for (int64_t j = 0; j < count; ++j) out[j * out_stride] = load(j) * col_scales[j * s.col_stride];
    return;
  }
  for (int64_t j = 0; j < count; ++j) {
    out[j * out_stride] = load(j) * row_scales[((c0 + j) / s.col_block) * s.col_stride];
  }
}

// Hand-vectorized decoders a type may have, optional fast paths: true when
// they wrote the span (the generic loop below does the rest).
template <DType D>
bool fast_span(const Operand&, int64_t, int64_t, int64_t, float*, int64_t) {
  return false;
}

template <>
bool fast_span<DType::kBF16>(const Operand& op, int64_t r, int64_t c0, int64_t count, float* out,
                             int64_t out_stride) {
  if (out_stride != 1 || op.scale.data) return false;
  widen_bf16(static_cast<const uint16_t*>(op.data) + r * op.ld + c0, count, out);
  return true;
}

// Contiguous output with one scale or per-column scales one apart: the
// hand-vectorized decoder (kernels/decode_fp8.h).
bool fp8_fast_span(const Operand& op, int64_t r, int64_t c0, int64_t count, float* out,
                   int64_t out_stride) {
  const OperandScale& s = op.scale;
  if (out_stride != 1 || !(!s.data || s.col_stride == 0 || s.col_block == 1)) return false;
  const float* row_scales = s.data ? s.data + (r / s.row_block) * s.row_stride : nullptr;
  const bool per_column = row_scales && s.col_stride != 0;
  if (per_column && s.col_stride != 1) return false;
  decode_fp8_span(op.dtype, static_cast<const uint8_t*>(op.data) + r * op.ld + c0, count,
                  row_scales && !per_column ? row_scales[0] : 1.0f,
                  per_column ? row_scales + c0 : nullptr, out);
  return true;
}

template <>
bool fast_span<DType::kF8E4M3>(const Operand& op, int64_t r, int64_t c0, int64_t count,
                               float* out, int64_t out_stride) {
  return fp8_fast_span(op, r, c0, count, out, out_stride);
}

template <>
bool fast_span<DType::kF8E5M2>(const Operand& op, int64_t r, int64_t c0, int64_t count,
                               float* out, int64_t out_stride) {
  return fp8_fast_span(op, r, c0, count, out, out_stride);
}

// One span decoder per storage type, from its Codec (core/dtype_codec.h).
template <DType D>
void decode_span_of(const Operand& op, int64_t r, int64_t c0, int64_t count, float* out,
                    int64_t out_stride) {
  if constexpr (!core::Codec<D>::kDecodable) {
    fail("dtype", dtype_name(op.dtype), "not a matmul operand type");
  } else {
    if (fast_span<D>(op, r, c0, count, out, out_stride)) return;
    decode_loop(op, r, c0, count, out, out_stride,
                core::Codec<D>::loader(op.data, r * op.ld + c0));
  }
}

using SpanFn = void (*)(const Operand&, int64_t, int64_t, int64_t, float*, int64_t);

template <int... kIndex>
constexpr std::array<SpanFn, kDTypeCount> span_decoders(std::integer_sequence<int, kIndex...>) {
  return {&decode_span_of<static_cast<DType>(kIndex)>...};
}

// Indexed by DType: the type is resolved once per span, by one load.
constexpr std::array<SpanFn, kDTypeCount> kSpanDecoders =
    span_decoders(std::make_integer_sequence<int, kDTypeCount>{});

}  // namespace

void decode_span(const Operand& op, int64_t r, int64_t c0, int64_t count, float* out,
                 int64_t out_stride) {
  const auto index = static_cast<size_t>(op.dtype);
  if (index >= kSpanDecoders.size()) {
    fail("dtype", std::to_string(index), "not a matmul operand type");
  }
  kSpanDecoders[index](op, r, c0, count, out, out_stride);
}

float decode_element(const Operand& op, int64_t r, int64_t c) {
  float value;
  decode_span(op, r, c, 1, &value, 1);
  return value;
}

}  // namespace raggemm::kernels
