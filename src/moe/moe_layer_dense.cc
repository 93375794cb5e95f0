// The dense MoE path (sparse_matmul=false), the way MaxText's dense_matmul
// runs it, with every matmul through the grouped kernels:
//
//   dispatch, combine  [T, E*C] masks (dense_dispatch.h)
//   xe [E*C, D] = dispatch^T @ x          tgmm, one group of T rows
//   ye = experts(xe)                      the routed experts' gmm/tgmm with E
//                                         groups of C rows: a batched matmul
//                                         over experts (empty slots are zero
//                                         rows and stay zero)
//   out [T, D]  = combine @ ye            gmm, one group
//
// and backward: dye = combine^T @ dout (tgmm), dcombine = dout @ ye^T (gmm
// with transposed rhs) gathered into the routing weights' gradient, the
// experts' backward, dx += dispatch @ dxe (gmm). The einsums share one
// problem shape (m = T, k = E*C, n = D), so one resolved plan serves all.
#include <algorithm>

#include "moe/moe_layer_impl.h"
#include "raggemm/error.h"
#include "raggemm/profiler.h"

namespace raggemm::moe {

template <class T>
const PassConfigs& MoeLayer<T>::Impl::einsum_passes(int64_t width) {
  if (tokens != einsum_tokens || width != einsum_width) {
    einsum_tokens = tokens;
    einsum_width = width;
    einsum_configs = resolve_dense_passes(config, tokens, width, config.embed_dim, einsums.dtype);
  }
  return einsum_configs;
}

template <class T>
void MoeLayer<T>::Impl::forward_dense(T* out) {
  const int64_t e = config.router.num_experts, k = config.router.top_k, d = config.embed_dim;
  {
    auto scope = profile(profiler, "moe/route", OpKind::kGlue);
    route(config.router, logits.data(), tokens,
          config.router.selection_bias ? bias.value.data() : nullptr, routing);
    slots = assign_slots(routing.experts.data(), tokens, k, e, config.capacity_factor);
    build_dense_masks(slots, routing.weights.data(), tokens, k, e, dispatch, combine);
  }
  stats.group_sizes.assign(routing.counts.begin(), routing.counts.end());
  stats.load_balance_loss = routing.load_balance_loss;
  stats.dropped = slots.dropped;
  const int64_t width = e * slots.capacity;
  dense_sizes.assign(static_cast<size_t>(e), static_cast<int32_t>(slots.capacity));
  prepare(width);
  const PassConfigs& plan = einsum_passes(width);
  const int32_t all_tokens = static_cast<int32_t>(tokens);
  const GroupedProblem einsum{&all_tokens, 1, tokens, width, d};

  xs.resize(static_cast<size_t>(width * d));
  grouped_grad_rhs<T>(einsums, plan[2], "moe/dispatch", einsum, dispatch.data(), x, xs.data());
  rows = ExpertRows{dense_sizes.data(), e, width, 0, -1, 0, width};
  y.resize(static_cast<size_t>(width * d));
  experts_forward(xs.data(), y.data());
  grouped_forward<T>(einsums, plan[0], "moe/combine", einsum, combine.data(), y.data(), out);
}

template <class T>
void MoeLayer<T>::Impl::backward_dense(const T* dout, T* dx) {
  const int64_t e = config.router.num_experts, k = config.router.top_k, d = config.embed_dim;
  const int64_t width = e * slots.capacity;
  const PassConfigs& plan = einsum_passes(width);
  const int32_t all_tokens = static_cast<int32_t>(tokens);
  const GroupedProblem einsum{&all_tokens, 1, tokens, width, d};

  dy.resize(static_cast<size_t>(width * d));
  grouped_grad_rhs<T>(einsums, plan[2], "moe/combine_drhs", einsum, combine.data(), dout,
                      dy.data());
  dcombine.resize(static_cast<size_t>(tokens * width));
  grouped_grad_lhs<T>(einsums, plan[1], "moe/combine_dlhs", einsum, dout, y.data(),
                      dcombine.data());
  dweights.assign(static_cast<size_t>(tokens * k), T(0));
  for (int64_t i = 0; i < tokens * k; ++i) {
    const int32_t slot = slots.slot[i];
    if (slot >= 0) dweights[i] = dcombine[(i / k) * width + slot];
  }
  dxs.resize(static_cast<size_t>(width * d));
  experts_backward(dy.data(), dxs.data());
  dx_part.resize(static_cast<size_t>(tokens * d));
  grouped_forward<T>(einsums, plan[0], "moe/dispatch_bwd", einsum, dispatch.data(), dxs.data(),
                     dx_part.data());
  auto scope = profile(profiler, "moe/add_dx", OpKind::kGlue);
  for (int64_t i = 0; i < tokens * d; ++i) dx[i] += dx_part[i];
}

#define RAGGEMM_INSTANTIATE(T)                                   \
  template void MoeLayer<T>::Impl::forward_dense(T*);            \
  template void MoeLayer<T>::Impl::backward_dense(const T*, T*); \
  template const PassConfigs& MoeLayer<T>::Impl::einsum_passes(int64_t);
RAGGEMM_INSTANTIATE(float)
RAGGEMM_INSTANTIATE(double)
#undef RAGGEMM_INSTANTIATE

}  // namespace raggemm::moe
