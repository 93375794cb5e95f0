// Synthetic quantized operands for tuning a quantized pass: codes and scales
// laid out as the quantized ops hand them to a backend (include/raggemm/
// quant.h, "Per pass"), so the tuner times what training runs:
//   fwd:  lhs codes per row (operand type), weight codes per expert and
//         column (operand type), both scales applied by the backend;
//   dlhs: dout codes per row (gradient type), weight codes with its scales
//         folded into dout (the backend reads the codes alone);
//   drhs: lhs codes with their row scales folded into dout, dout codes per
//         column (gradient type).
// The codes are the given f32 values encoded at scale 1 (they lie in
// [-1, 1)); the scales are deterministic values in [0.5, 2).
#pragma once

#include <vector>

#include "backends/gmm_spec.h"
#include "raggemm/problem.h"
#include "raggemm/quant_types.h"
#include "raggemm/tensor.h"

namespace raggemm::tune {

struct QuantizedOperand {
  Tensor codes;
  Tensor scales;
  backends::OperandScales description;  // views into the two tensors above
  // What the operand computes as: decode(code) * scale where the backend
  // applies the scale, else decode(code); the equivalence check's input.
  std::vector<float> values;
  backends::GmmOperand operand() const { return backends::GmmOperand(codes.view(), description); }
};

// Operand `which` (0: lhs, 1: rhs) of `shape`'s pass from `values` (its
// f32 inputs, in the layout of tune/equivalence.h).
QuantizedOperand quantized_operand(const GmmShape& shape, QuantRecipe recipe, int which,
                                   const std::vector<float>& values);

}  // namespace raggemm::tune
