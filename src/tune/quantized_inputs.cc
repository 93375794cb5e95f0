#include "tune/quantized_inputs.h"

#include <cmath>

#include "raggemm/error.h"
#include "raggemm/fp8.h"

namespace raggemm::tune {
namespace {

// Code of v (|v| < 1) at scale 1 and its decoded value.
uint8_t encode(QuantType type, float v, float* decoded) {
  switch (type) {
    case QuantType::kInt8: {
      const auto code = static_cast<int8_t>(std::nearbyint(v * 127.0f));
      *decoded = static_cast<float>(code);
      return static_cast<uint8_t>(code);
    }
    case QuantType::kFp8E4M3: {
      const uint8_t code = f32_to_fp8_e4m3(v);
      *decoded = fp8_e4m3_to_f32(code);
      return code;
    }
    case QuantType::kFp8E5M2: {
      const uint8_t code = f32_to_fp8_e5m2(v, true);
      *decoded = fp8_e5m2_to_f32(code);
      return code;
    }
  }
  return 0;
}

float scale_at(int64_t i) { return 0.5f + 1.5f * static_cast<float>((i * 37) % 101) / 101.0f; }

}  // namespace

QuantizedOperand quantized_operand(const GmmShape& shape, QuantRecipe recipe, int which,
                                   const std::vector<float>& values) {
  const bool lhs = which == 0;
  const int64_t g = shape.groups, m = shape.m, k = shape.k, n = shape.n;
  QuantizedOperand q;
  Shape shape_of;
  Granularity granularity;
  QuantType type = recipe_operand_type(recipe);
  bool in_kernel = true;
  switch (shape.pass) {
    case Pass::kForward:
      shape_of = lhs ? Shape{m, k} : Shape{g, k, n};
      granularity = lhs ? Granularity::channel({0}) : Granularity::channel({0, 2});
      break;
    case Pass::kGradLhs:  // lhs is dout [m, k]; the weight [G, n, k] as stored
      shape_of = lhs ? Shape{m, k} : Shape{g, n, k};
      granularity = lhs ? Granularity::channel({0}) : Granularity::channel({0, 2});
      if (lhs) type = recipe_gradient_type(recipe);
      in_kernel = lhs;
      break;
    case Pass::kGradRhs:  // lhs [m, k] (scales folded into dout), dout [m, n] per column
      shape_of = lhs ? Shape{m, k} : Shape{m, n};
      granularity = lhs ? Granularity::channel({0}) : Granularity::channel({1});
      if (!lhs) type = recipe_gradient_type(recipe);
      in_kernel = !lhs;
      break;
  }
  q.codes = Tensor(quant_storage_dtype(type), shape_of);
  q.scales = Tensor(DType::kF32, granularity.scale_shape(shape_of, "tuning input"));
  for (int64_t i = 0; i < q.scales.numel(); ++i) q.scales.as<float>()[i] = scale_at(i);
  q.description = backends::OperandScales{q.scales.view(), type, granularity, in_kernel};
  // Each element's scale: the scale tensor broadcast over the reduced axes.
  const Shape strides = row_major_strides(q.scales.shape());
  const Shape element_strides = row_major_strides(shape_of);
  auto* codes = static_cast<uint8_t*>(q.codes.data());
  q.values.resize(static_cast<size_t>(q.codes.numel()));
  for (int64_t i = 0; i < q.codes.numel(); ++i) {
    float decoded = 0;
    codes[i] = encode(type, values[static_cast<size_t>(i)], &decoded);
    int64_t cell = 0, rest = i;
    for (size_t axis = 0; axis < shape_of.size(); ++axis) {
      const int64_t index = rest / element_strides[axis];
      rest %= element_strides[axis];
      if (q.scales.shape()[axis] != 1) cell += index * strides[axis];
    }
    q.values[static_cast<size_t>(i)] = in_kernel ? decoded * q.scales.as<float>()[cell] : decoded;
  }
  return q;
}

}  // namespace raggemm::tune
