// Slot assignment and the dense dispatch/combine masks.
#include "moe/dense_dispatch.h"

#include <algorithm>
#include <cmath>

namespace raggemm::moe {

DenseSlots assign_slots(const int32_t* experts, int64_t tokens, int64_t k, int64_t num_experts,
                        double capacity_factor) {
  DenseSlots out;
  std::vector<int64_t> load(static_cast<size_t>(num_experts), 0);
  for (int64_t i = 0; i < tokens * k; ++i) ++load[experts[i]];
  if (capacity_factor < 0) {
    out.capacity = *std::max_element(load.begin(), load.end());
  } else {
    out.capacity = static_cast<int64_t>(std::ceil(
        static_cast<double>(tokens * k) / static_cast<double>(num_experts) * capacity_factor));
  }
  out.capacity = std::max<int64_t>(out.capacity, 1);
  out.slot.assign(static_cast<size_t>(tokens * k), -1);
  std::fill(load.begin(), load.end(), 0);
  // Row-major [tokens, k]: token order first, then slot order (MaxText's
  // cumsum over the flattened token * k axis).
  for (int64_t i = 0; i < tokens * k; ++i) {
    const int64_t e = experts[i];
    if (load[e] < out.capacity) {
      out.slot[i] = static_cast<int32_t>(e * out.capacity + load[e]++);
    } else {
      ++out.dropped;
    }
  }
  return out;
}

template <class T>
void build_dense_masks(const DenseSlots& slots, const T* weights, int64_t tokens, int64_t k,
                       int64_t num_experts, std::vector<T>& dispatch, std::vector<T>& combine) {
  const int64_t width = num_experts * slots.capacity;
  dispatch.assign(static_cast<size_t>(tokens * width), T(0));
  combine.assign(static_cast<size_t>(tokens * width), T(0));
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t j = 0; j < k; ++j) {
      const int32_t slot = slots.slot[t * k + j];
      if (slot < 0) continue;
      dispatch[t * width + slot] = T(1);
      combine[t * width + slot] = weights[t * k + j];
    }
  }
}

template void build_dense_masks<float>(const DenseSlots&, const float*, int64_t, int64_t, int64_t,
                                       std::vector<float>&, std::vector<float>&);
template void build_dense_masks<double>(const DenseSlots&, const double*, int64_t, int64_t, int64_t,
                                        std::vector<double>&, std::vector<double>&);

}  // namespace raggemm::moe
