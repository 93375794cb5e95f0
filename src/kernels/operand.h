// A 2-D matrix operand as the kernels read it: storage of any input dtype,
// with optional dequantization scales applied while packing. Packing widens
// bf16/f16 and decodes fp8/int8 codes to f32 and multiplies by the scale, so
// the microkernel always sees f32 and a quantized operand computes exactly
// the reference of its dequantized values.
#pragma once

#include <cstdint>

#include "raggemm/dtype.h"

namespace raggemm::kernels {

// Scale of element (r, c) is data[(r / row_block) * row_stride +
// (c / col_block) * col_stride]. Per-tensor: both strides 0. Per row: row
// stride 1, col stride 0. Block-wise along columns: col_block = block size.
struct OperandScale {
  const float* data = nullptr;  // nullptr: no scaling
  int64_t row_stride = 0;
  int64_t col_stride = 0;
  int64_t row_block = 1;
  int64_t col_block = 1;

  float at(int64_t r, int64_t c) const {
    return data[(r / row_block) * row_stride + (c / col_block) * col_stride];
  }
};

// A row-major matrix: element (r, c) at data + r * ld + c (in elements).
struct Operand {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  int64_t ld = 0;
  OperandScale scale{};
};

}  // namespace raggemm::kernels
