#include "kernels/decode.h"

#include "kernels/decode_fp8.h"
#include "kernels/widen.h"
#include "raggemm/dtype.h"
#include "raggemm/error.h"
#include "raggemm/fp8.h"

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

}  // namespace

void decode_span(const Operand& op, int64_t r, int64_t c0, int64_t count, float* out,
                 int64_t out_stride) {
  const int64_t offset = r * op.ld + c0;
  switch (op.dtype) {
    case DType::kF32: {
      const float* src = static_cast<const float*>(op.data) + offset;
      decode_loop(op, r, c0, count, out, out_stride, [src](int64_t j) { return src[j]; });
      return;
    }
    case DType::kBF16: {
      const uint16_t* src = static_cast<const uint16_t*>(op.data) + offset;
      if (out_stride == 1 && !op.scale.data) {
        widen_bf16(src, count, out);
        return;
      }
      decode_loop(op, r, c0, count, out, out_stride,
                  [src](int64_t j) { return bf16_to_f32(src[j]); });
      return;
    }
    case DType::kF16: {
      const uint16_t* src = static_cast<const uint16_t*>(op.data) + offset;
      decode_loop(op, r, c0, count, out, out_stride,
                  [src](int64_t j) { return f16_to_f32(src[j]); });
      return;
    }
    case DType::kI8: {
      const int8_t* src = static_cast<const int8_t*>(op.data) + offset;
      decode_loop(op, r, c0, count, out, out_stride,
                  [src](int64_t j) { return static_cast<float>(src[j]); });
      return;
    }
    case DType::kF8E4M3:
    case DType::kF8E5M2: {
      const uint8_t* src = static_cast<const uint8_t*>(op.data) + offset;
      const OperandScale& s = op.scale;
      if (out_stride == 1 && (!s.data || s.col_stride == 0 || s.col_block == 1)) {
        // Contiguous output: the hand-vectorized decoder (kernels/decode_fp8.h).
        const float* row_scales = s.data ? s.data + (r / s.row_block) * s.row_stride : nullptr;
        const bool per_column = row_scales && s.col_stride != 0;
        if (!per_column || s.col_stride == 1) {
          decode_fp8_span(op.dtype, src, count, row_scales && !per_column ? row_scales[0] : 1.0f,
                          per_column ? row_scales + c0 : nullptr, out);
          return;
        }
      }
      const float* table = fp8_decode_table(op.dtype);
      decode_loop(op, r, c0, count, out, out_stride,
                  [src, table](int64_t j) { return table[src[j]]; });
      return;
    }
    default:
      fail("dtype", dtype_name(op.dtype), "not a matmul operand type");
  }
}

float decode_element(const Operand& op, int64_t r, int64_t c) {
  float value;
  decode_span(op, r, c, 1, &value, 1);
  return value;
}

}  // namespace raggemm::kernels
