// The MoE layer's state, shared by moe_layer.cc (construction, the routed
// experts, one process) and moe_layer_parallel.cc (the two exchanges of
// expert parallelism).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "moe/dense.h"
#include "moe/dense_dispatch.h"
#include "moe/expert_parallel.h"
#include "moe/grouped_matmul.h"
#include "moe/permute.h"
#include "moe/plans.h"
#include "moe/router.h"
#include "raggemm/comm.h"
#include "raggemm/moe.h"

namespace raggemm::moe {

enum class Exchange : uint8_t { kNone, kAllToAll, kRing };

// The rows the expert GMMs see: `m` rows laid out by the groups of
// group_sizes; the weights hold groups [group_offset, group_offset +
// local_groups) (-1: all), whose rows are [begin, end).
struct ExpertRows {
  const int32_t* group_sizes = nullptr;
  int64_t groups = 0;
  int64_t m = 0;
  int64_t group_offset = 0;
  int64_t local_groups = -1;
  int64_t begin = 0, end = 0;
};

template <class T>
struct MoeLayer<T>::Impl {
  Impl(std::string prefix, const MoeConfig& config, Profiler* profiler, Communicator* comm);

  std::string name;  // the layer's parameter prefix; the "layer" arg of its trace slices

  bool fused_swiglu_forward() const;
  bool swiglu_in_gmm() const;
  void prepare(int64_t rows);
  GroupedProblem problem(int64_t k, int64_t n) const {
    return GroupedProblem{rows.group_sizes,  rows.groups,      rows.m, k, n,
                          rows.group_offset, rows.local_groups};
  }
  int64_t local_experts() const { return shard.local_experts; }

  // The routed experts on `rows`: xs [rows.m, embed] -> ys [rows.m, embed],
  // keeping what backward needs (xs must outlive backward); and back.
  void experts_forward(const T* xs, T* ys);
  void experts_backward(const T* dys, T* dxs);
  // The up projection with SwiGLU's forward, the down projection's dlhs
  // with its backward (the unfused gate/up weights).
  void up_forward_and_swiglu(const T* x_rows);
  void down_grad_lhs_and_swiglu(const T* dys);
  // Zeroes the rows of `buffer` ([rows.m, width]) outside [rows.begin,
  // rows.end): the elementwise glue skips other ranks' rows (ring), and a
  // quantized tgmm's per-column scales must not see what they last held.
  void zero_other_rows(std::vector<T>& buffer, int64_t width) const;
  // Route this rank's tokens (logits already computed).
  void route_local();
  // The exchanges (moe_layer_parallel.cc).
  void forward_all_to_all(T* out);
  void backward_all_to_all(const T* dout, T* dx);
  void forward_ring(T* out);
  void backward_ring(const T* dout, T* dx);
  // The dense path, sparse_matmul=false (moe_layer_dense.cc).
  void forward_dense(T* out);
  void backward_dense(const T* dout, T* dx);
  const PassConfigs& einsum_passes(int64_t width);

  MoeConfig config;
  Profiler* profiler;
  Communicator* comm;
  std::vector<Communicator*> batch_comms;  // data and fsdp axes (set_batch_comms)
  // Sums `r`'s load-balancing statistics over batch_comms (the routing of
  // this rank's, or this expert group's, tokens -> the global batch's).
  void sum_over_batch(Routing<T>& r);
  std::vector<GmmCall> calls;  // of the last forward and backward
  ExpertShard shard;
  Exchange exchange = Exchange::kNone;
  MatmulContext experts;
  DenseMatmul<T> router;
  Param<T> gate, bias, wi_0, wi_1, wi, wo;
  std::optional<DenseMlp<T>> shared;
  int64_t resolved_rows = -1;
  PassConfigs wi_passes{}, wo_passes{};

  // Kept from forward for backward.
  const T* x = nullptr;
  int64_t tokens = 0;
  std::vector<T> logits, xs, h0, h1, h, act, y;
  Routing<T> routing;  // this rank's tokens
  Permutation perm;    // of this rank's tokens (ring: of all tokens)
  RoutingStats stats;
  bool h_kept = false;
  ExpertRows rows;
  const T* expert_xs = nullptr;  // what the experts' forward read
  // Exchange buffers: all-to-all (grouped rows on this rank's experts) and
  // ring (every rank's tokens).
  AllToAllPlan plan;
  std::vector<T> grouped_xs, grouped_ys, grouped_dys, grouped_dxs, scratch;
  RingTokens ring;
  Routing<T> ring_routing;
  std::vector<T> x_all, logits_all, out_all, dout_all, dweights_all, dx_all;
  // Dense path: slots, uniform group sizes, masks, their einsums' plans.
  DenseSlots slots;
  std::vector<int32_t> dense_sizes;
  std::vector<T> dispatch, combine, dcombine;
  MatmulContext einsums;
  PassConfigs einsum_configs{};
  int64_t einsum_tokens = -1, einsum_width = -1;
  // Backward scratch.
  std::vector<T> dy, dweights, dact, dh0, dh1, dh, dxs, dxs_part, dlogits, dx_part;
};

}  // namespace raggemm::moe
