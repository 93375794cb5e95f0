// The masks of the dense MoE path (sparse_matmul=false), as MaxText's
// dense_matmul builds them: each expert has `capacity` slots, filled by the
// (token, slot) assignments in token order, then slot order; what does not
// fit is dropped. dispatch[t, e*C + c] = 1 and combine[t, e*C + c] = the
// routing weight when assignment (t, j) took slot c of expert e.
#pragma once

#include <cstdint>
#include <vector>

namespace raggemm::moe {

struct DenseSlots {
  int64_t capacity = 0;       // C, slots per expert (>= 1)
  std::vector<int32_t> slot;  // [tokens * k]: e * C + c, or -1 when dropped
  int64_t dropped = 0;        // assignments past capacity
};

// experts [tokens, k]; capacity_factor -1: C = the largest expert load.
DenseSlots assign_slots(const int32_t* experts, int64_t tokens, int64_t k, int64_t num_experts,
                        double capacity_factor);

// dispatch and combine [tokens, experts * C], overwritten.
template <class T>
void build_dense_masks(const DenseSlots& slots, const T* weights, int64_t tokens, int64_t k,
                       int64_t num_experts, std::vector<T>& dispatch, std::vector<T>& combine);

}  // namespace raggemm::moe
