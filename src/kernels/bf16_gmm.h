// Drivers of the bf16 x bf16 passes on dot products (kernels/bf16_microkernel.h):
// gmm (forward, and dlhs with transpose_rhs) and tgmm when both operands are
// plain bf16 (no dequantization scales) and no fused output stage is asked
// for. gmm_v2 and tgmm_v2 hand such problems here when a bf16 microkernel is
// selected; otherwise bf16 widens to f32 as before. Same contract as the
// other kernels (DESIGN.md s.1): rows no local group covers and empty groups
// come out zero; each output element is computed by one item in a fixed
// order, so results do not depend on the thread count.
#pragma once

#include "kernels/gmm_kernel.h"
#include "kernels/microkernel_registry.h"

namespace raggemm::kernels {

// Whether the problem's operands and output stage fit the bf16 drivers.
bool bf16_dot_fits(const GmmProblem& problem);
bool bf16_dot_fits(const TgmmProblem& problem);

void bf16_gmm(const GmmProblem& problem, const Schedule& schedule, const Bf16Microkernel& kernel);
void bf16_tgmm(const TgmmProblem& problem, const Schedule& schedule,
               const Bf16Microkernel& kernel);

}  // namespace raggemm::kernels
