// A spec in the CPU kernels' terms (kernels/gmm_kernel.h, int8_gmm.h): the
// one place that turns operands, scales, groups, the output stage and the
// output into a kernel problem, for every pass, plain or quantized. Shared by
// the CPU backend and the reference backend (which runs the same problem
// through the f64 oracle).
#pragma once

#include <optional>

#include "backends/gmm_spec.h"
#include "kernels/gmm_kernel.h"
#include "kernels/int8_gmm.h"

namespace raggemm::backends {

kernels::GmmProblem gmm_problem(const GmmSpec& spec);    // fwd, dlhs
kernels::TgmmProblem tgmm_problem(const GmmSpec& spec);  // drhs

// The integer-dot-product form of a spec, where one exists: int8 fwd with
// lhs scales per row and weight scales per expert and column, no output
// stage. (Other int8 specs decode the codes to f32 while packing.)
std::optional<kernels::Int8GmmProblem> int8_problem(const GmmSpec& spec);

}  // namespace raggemm::backends
