// The MoE layer under expert parallelism: all-to-all dispatch and ring of
// experts, forward and backward (docs/parallelism.md).
//
// Gradient rule: every backward yields this rank's share of the gradient of
// the global batch's loss. Expert weights only ever see rows on the rank
// that owns them, so their gradient is complete there; every other
// parameter's share is summed over the ranks by the trainer.
#include <algorithm>

#include "moe/moe_layer_impl.h"
#include "raggemm/profiler.h"

namespace raggemm::moe {

// ---------------------------------------------------------------------------
// All-to-all: route here, send rows to the experts' ranks, compute, send back.

template <class T>
void MoeLayer<T>::Impl::forward_all_to_all(T* out) {
  const int64_t d = config.embed_dim, rows_here = tokens * config.router.top_k;
  route_local();
  sum_routing_stats(*comm, config.router, routing);
  sum_over_batch(routing);
  stats.group_sizes = routing.counts;  // global loads
  stats.load_balance_loss = routing.load_balance_loss;
  {
    auto scope = profile(profiler, "moe/permute", OpKind::kGlue);
    xs.resize(static_cast<size_t>(rows_here * d));
    gather_rows(perm, x, d, xs.data());
  }
  plan = plan_all_to_all(*comm, shard, perm.group_sizes);
  const int64_t grouped = plan.rows();
  grouped_xs.resize(static_cast<size_t>(grouped * d));
  dispatch_rows(*comm, plan, xs.data(), d, scratch, grouped_xs.data());
  rows = ExpertRows{plan.group_sizes.data(), local_experts(), grouped, 0, -1, 0, grouped};
  grouped_ys.resize(static_cast<size_t>(grouped * d));
  experts_forward(grouped_xs.data(), grouped_ys.data());
  y.resize(static_cast<size_t>(rows_here * d));
  return_rows(*comm, plan, grouped_ys.data(), d, scratch, y.data());
  auto scope = profile(profiler, "moe/unpermute", OpKind::kGlue);
  combine_rows(perm, y.data(), routing.weights.data(), d, out);
}

template <class T>
void MoeLayer<T>::Impl::backward_all_to_all(const T* dout, T* dx) {
  const int64_t d = config.embed_dim, rows_here = tokens * config.router.top_k;
  dy.resize(static_cast<size_t>(rows_here * d));
  dweights.resize(static_cast<size_t>(rows_here));
  {
    auto scope = profile(profiler, "moe/unpermute_bwd", OpKind::kGlue);
    combine_rows_backward(perm, y.data(), routing.weights.data(), dout, d, dy.data(),
                          dweights.data());
  }
  const int64_t grouped = plan.rows();
  grouped_dys.resize(static_cast<size_t>(grouped * d));
  dispatch_rows(*comm, plan, dy.data(), d, scratch, grouped_dys.data());
  grouped_dxs.resize(static_cast<size_t>(grouped * d));
  experts_backward(grouped_dys.data(), grouped_dxs.data());
  dxs.resize(static_cast<size_t>(rows_here * d));
  return_rows(*comm, plan, grouped_dxs.data(), d, scratch, dxs.data());
  auto scope = profile(profiler, "moe/permute_bwd", OpKind::kGlue);
  scatter_add_rows(perm, dxs.data(), d, dx);
}

// ---------------------------------------------------------------------------
// Ring: every rank sees every token, computes its experts' rows, and the
// partial outputs are summed back onto the tokens' ranks.

template <class T>
void MoeLayer<T>::Impl::forward_ring(T* out) {
  const int64_t e = config.router.num_experts, d = config.embed_dim, k = config.router.top_k;
  ring = ring_tokens(*comm, tokens);
  const int64_t all = ring.total;
  x_all.resize(static_cast<size_t>(all * d));
  logits_all.resize(static_cast<size_t>(all * e));
  allgather_tokens(*comm, ring, x, d, x_all.data());
  allgather_tokens(*comm, ring, logits.data(), e, logits_all.data());
  {
    auto scope = profile(profiler, "moe/route", OpKind::kGlue);
    // Every rank routes every token alike (same logits, same bias), so the
    // load-balancing statistics are the global batch's without a reduction.
    route(config.router, logits_all.data(), all,
          config.router.selection_bias ? bias.value.data() : nullptr, ring_routing);
    build_permutation(ring_routing.experts.data(), all, k, e, perm);
  }
  // The expert group routed its own tokens; other groups (data, fsdp axes)
  // routed theirs.
  sum_over_batch(ring_routing);
  slice_routing(ring_routing, e, k, ring.first, tokens, routing);
  stats.group_sizes = batch_comms.empty() ? perm.group_sizes : ring_routing.counts;
  stats.load_balance_loss = ring_routing.load_balance_loss;
  // This rank's experts own the contiguous rows [begin, end) of the
  // permutation; the GMMs run with group_offset over all rows.
  const int64_t first = shard.first_expert(), local = local_experts();
  int64_t begin = 0, end = 0;
  for (int64_t g = 0; g < first + local; ++g) {
    (g < first ? begin : end) += perm.group_sizes[g];
  }
  end += begin;
  const int64_t all_rows = all * k;
  {
    auto scope = profile(profiler, "moe/permute", OpKind::kGlue);
    // Other ranks' rows stay zero: the GMMs skip them, but a quantized
    // tgmm's per-column scales span every row, and stale rows would make
    // them depend on the buffer's history.
    xs.assign(static_cast<size_t>(all_rows * d), T(0));
    gather_row_range(perm, x_all.data(), d, begin, end, xs.data());
  }
  rows = ExpertRows{perm.group_sizes.data(), e, all_rows, first, local, begin, end};
  y.resize(static_cast<size_t>(all_rows * d));
  experts_forward(xs.data(), y.data());  // rows of other ranks' experts come out zero
  out_all.resize(static_cast<size_t>(all * d));
  {
    auto scope = profile(profiler, "moe/unpermute", OpKind::kGlue);
    combine_rows(perm, y.data(), ring_routing.weights.data(), d, out_all.data());
  }
  reduce_scatter_tokens(*comm, ring, out_all.data(), d, out);
}

template <class T>
void MoeLayer<T>::Impl::backward_ring(const T* dout, T* dx) {
  const int64_t d = config.embed_dim, k = config.router.top_k;
  const int64_t all = ring.total, all_rows = all * k;
  dout_all.resize(static_cast<size_t>(all * d));
  allgather_tokens(*comm, ring, dout, d, dout_all.data());
  dy.resize(static_cast<size_t>(all_rows * d));
  dweights_all.resize(static_cast<size_t>(all_rows));
  {
    // y is zero on other ranks' rows, so their combine-weight gradients are
    // zero here and the reduce-scatter below sums exactly one term each.
    auto scope = profile(profiler, "moe/unpermute_bwd", OpKind::kGlue);
    combine_rows_backward(perm, y.data(), ring_routing.weights.data(), dout_all.data(), d,
                          dy.data(), dweights_all.data());
    // Only this rank's rows go to its experts (zeros elsewhere, as for xs).
    std::fill(dy.begin(), dy.begin() + rows.begin * d, T(0));
    std::fill(dy.begin() + rows.end * d, dy.end(), T(0));
  }
  dxs.resize(static_cast<size_t>(all_rows * d));
  experts_backward(dy.data(), dxs.data());  // zero on other ranks' rows
  dx_all.assign(static_cast<size_t>(all * d), T(0));
  {
    auto scope = profile(profiler, "moe/permute_bwd", OpKind::kGlue);
    scatter_add_rows(perm, dxs.data(), d, dx_all.data());
  }
  dx_part.resize(static_cast<size_t>(tokens * d));
  reduce_scatter_tokens(*comm, ring, dx_all.data(), d, dx_part.data());
  for (int64_t i = 0; i < tokens * d; ++i) dx[i] += dx_part[i];
  dweights.resize(static_cast<size_t>(tokens * k));
  reduce_scatter_tokens(*comm, ring, dweights_all.data(), k, dweights.data());
}

#define RAGGEMM_INSTANTIATE(T)                                        \
  template void MoeLayer<T>::Impl::forward_all_to_all(T*);            \
  template void MoeLayer<T>::Impl::backward_all_to_all(const T*, T*); \
  template void MoeLayer<T>::Impl::forward_ring(T*);                  \
  template void MoeLayer<T>::Impl::backward_ring(const T*, T*);
RAGGEMM_INSTANTIATE(float)
RAGGEMM_INSTANTIATE(double)
#undef RAGGEMM_INSTANTIATE

}  // namespace raggemm::moe
