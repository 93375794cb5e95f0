// gmm and tgmm with options.quantize set (raggemm/gmm.h): the operands are
// quantized as the recipe's pass prescribes (ops/quant_gmm.cc), then run.
#pragma once

#include <optional>

#include "raggemm/gmm.h"

namespace raggemm::ops {

// Into `out` when given (returns an empty tensor), else into a new tensor.
Tensor recipe_gmm(const GmmOperand& lhs, const GmmOperand& rhs, const TensorView& group_sizes,
                  const std::optional<TensorView>& out, const GmmOptions& options);
Tensor recipe_tgmm(const GmmOperand& lhs, const GmmOperand& dout, const TensorView& group_sizes,
                   const std::optional<TensorView>& out, const TgmmOptions& options);

}  // namespace raggemm::ops
