// Resolving the pass configs the layer's matmuls run with: routed experts
// through their weight's plan (explicit > tuned cache > heuristic), dense
// matmuls (router, shared experts, dense layers, output) through the
// heuristic with the kernel the wi plan sets for that pass.
#pragma once

#include <array>
#include <cstdint>

#include "moe/grouped_matmul.h"
#include "raggemm/moe.h"
#include "raggemm/moe_plan.h"

namespace raggemm::moe {

using PassConfigs = std::array<ResolvedPassConfig, 3>;  // indexed by Pass

// An expert weight [E, K, N] of `weight`'s role, for `rows` routed rows.
PassConfigs resolve_expert_passes(const MoeConfig& config, Weight weight, const ModelDims& dims);

// A dense weight [K, N] for `rows` tokens.
PassConfigs resolve_dense_passes(const MoeConfig& config, int64_t rows, int64_t k, int64_t n,
                                 DType dtype);

// The contexts a layer's matmuls run with.
// `calls`: the layer's call log, or null.
MatmulContext expert_context(const MoeConfig& config, Profiler* profiler,
                             std::vector<GmmCall>* calls = nullptr);
MatmulContext dense_context(const MoeConfig& config, Profiler* profiler, DType dtype,
                            std::vector<GmmCall>* calls = nullptr);

}  // namespace raggemm::moe
