// The oracle: naive grouped matmuls with f64 accumulation, reading operands
// through the same decode (dtype, dequantization scales) as the kernels and
// applying the same output stage. Never used for speed.
#pragma once

#include "kernels/gmm_kernel.h"

namespace raggemm::kernels {

void reference_gmm(const GmmProblem& problem);
void reference_tgmm(const TgmmProblem& problem);

}  // namespace raggemm::kernels
