// Quantization of a matrix whose rows are scaled first, with no scaled copy.
//
// A quantized backward pass folds one operand's scales into the other
// before quantizing it: tgmm multiplies row r of dout by lhs's row scale,
// dlhs multiplies dout's columns by the weight's column scales of the row's
// group. Written as a scaled f32 copy and then quantize(), that is a fresh
// [M, C] buffer each call (its page faults, a copy and a fold pass), which
// cost more than the quantization itself: 17-25 ms of a 50-100 ms fp8 tgmm
// at M = 4096, K = N = 1024 on a Zen 3. Here the product is formed in
// registers and cache-sized pieces instead.
#pragma once

#include <cstdint>
#include <functional>

#include "raggemm/quant.h"

namespace raggemm::ops {

// The factors of row r: a pointer to the C factors of its columns, or null
// for a row that is not scaled. `scratch` holds C floats the callback may
// fill and return (a row-constant factor).
using RowFactors = std::function<const float*(int64_t row, float* scratch)>;

// Exactly quantize(scaled, type, Granularity::channel({kept_axis}),
// std::nullopt, threads), codes, scales and errors bit for bit, where
// scaled is the f32 [M, C] matrix scaled[r][j] = f32(input[r][j]) *
// factors(r)[j] (input[r][j] itself where factors(r) is null). input: a
// 2-D f32, bf16 or f16 matrix whose last axis is contiguous; kept_axis: 0
// (a scale per row) or 1 (a scale per column).
QuantizedTensor quantize_scaled(const TensorView& input, QuantType type, int kept_axis,
                                const RowFactors& factors, int threads);

}  // namespace raggemm::ops
