// The MoE layer: router -> permute -> experts (grouped matmuls) -> unpermute,
// plus shared experts; and the backward of all of it. The exchanges of
// expert parallelism live in moe_layer_parallel.cc.
#include <algorithm>
#include <cmath>
#include <optional>

#include "moe/moe_layer_impl.h"
#include "moe/swiglu.h"
#include "raggemm/error.h"
#include "raggemm/profiler.h"

namespace raggemm::moe {
namespace {

template <class T>
void add_into(const std::vector<T>& source, T* target) {
  const int64_t count = static_cast<int64_t>(source.size());
  for (int64_t i = 0; i < count; ++i) target[i] += source[i];
}

ExpertShard make_shard(const MoeConfig& config, Communicator* comm) {
  ExpertShard shard;
  shard.rank = comm_rank(comm);
  shard.ranks = comm_size(comm);
  shard.num_experts = config.router.num_experts;
  require(shard.num_experts % shard.ranks == 0, "num_experts", shard.num_experts,
          "must be divisible by the " + std::to_string(shard.ranks) +
              " ranks of expert parallelism (ici_expert_parallelism)");
  shard.local_experts = shard.num_experts / shard.ranks;
  return shard;
}

// Expert weights start as the matching slice of the full [E, ...] tensor a
// single process would draw, so every P starts from the same model.
template <class T>
void init_expert_shard(Param<T>& param, const ExpertShard& shard, uint64_t seed, double stddev) {
  if (shard.ranks == 1) return init_normal(param, seed, stddev);
  Param<T> full;
  Shape shape = param.shape;
  shape[0] = shard.num_experts;
  full.reset(param.name, shape);
  init_normal(full, seed, stddev);
  const int64_t per_expert = param.size() / shard.local_experts;
  std::copy_n(full.value.begin() + shard.first_expert() * per_expert, param.size(),
              param.value.begin());
}

}  // namespace

template <class T>
MoeLayer<T>::Impl::Impl(std::string prefix, const MoeConfig& config_, Profiler* profiler_,
                        Communicator* comm_)
    : name(prefix),
      config(config_),
      profiler(profiler_),
      comm(comm_),
      shard(make_shard(config_, comm_)),
      experts(expert_context(config_, profiler_, &calls)),
      router(config_, dense_context(config_, profiler_, DType::kF32, &calls), config_.embed_dim,
             config_.router.num_experts, {"router/fwd", "router/dlhs", "router/drhs"}),
      einsums(dense_context(config_, profiler_, config_.dtype, &calls)) {
  validate(config);
  if (config.dtype == DType::kBF16) experts.casts = std::make_shared<CastMemo>();
  require(config.sparse_matmul || shard.ranks == 1, "sparse_matmul,ici_expert_parallelism",
          "false," + std::to_string(shard.ranks),
          "the dense path runs on one process (expert parallelism needs sparse_matmul=true)");
  if (shard.ranks > 1)
    exchange = config.use_ring_of_experts ? Exchange::kRing : Exchange::kAllToAll;
  const int64_t e = config.router.num_experts, d = config.embed_dim, f = config.mlp_dim;
  const int64_t local = shard.local_experts;
  gate.reset(prefix + ".gate", {d, e});
  bias.reset(prefix + ".selection_bias", {e}, /*is_trainable=*/false);
  if (config.fused_gate_up) {
    wi.reset(prefix + ".wi", {local, d, 2 * f});
  } else {
    wi_0.reset(prefix + ".wi_0", {local, d, f});
    wi_1.reset(prefix + ".wi_1", {local, d, f});
  }
  wo.reset(prefix + ".wo", {local, f, d});
  const bool sharded = shard.ranks > 1;
  wi.expert_sharded = wi_0.expert_sharded = wi_1.expert_sharded = wo.expert_sharded = sharded;
  if (config.shared_experts > 0) {
    shared.emplace(prefix + ".shared", d, config.shared_experts * f, config, profiler);
  }
}

// The v2 fused SwiGLU output stage computes the activation without keeping
// gate|up, so backward recomputes them (one extra forward GMM).
template <class T>
bool MoeLayer<T>::Impl::fused_swiglu_forward() const {
  if constexpr (!std::is_same_v<T, float>) return false;
  return config.fused_gate_up && config.backend == MatmulBackend::kOps &&
         !config.quantization && wi_passes[0].kernel == KernelVersion::kV2;
}

// Two gate/up weights: SwiGLU in the GMMs' store stage (grouped_matmul.h).
// Its outputs come out zero on the rows no local group covers, the rows
// [rows.begin, rows.end) leaves out, as zero_other_rows makes them.
template <class T>
bool MoeLayer<T>::Impl::swiglu_in_gmm() const {
  if constexpr (!std::is_same_v<T, float>) return false;
  return !config.fused_gate_up && config.swiglu_in_gmm && swiglu_stage_runs(experts);
}

template <class T>
void MoeLayer<T>::Impl::prepare(int64_t nominal_rows) {
  if (nominal_rows == resolved_rows) return;
  resolved_rows = nominal_rows;
  const int64_t f = config.fused_gate_up ? 2 * config.mlp_dim : config.mlp_dim;
  wi_passes = resolve_expert_passes(config, Weight::kWi, {nominal_rows, config.embed_dim, f});
  wo_passes =
      resolve_expert_passes(config, Weight::kWo, {nominal_rows, config.embed_dim, config.mlp_dim});
}

template <class T>
void MoeLayer<T>::Impl::route_local() {
  auto scope = profile(profiler, "moe/route", OpKind::kGlue);
  route(config.router, logits.data(), tokens,
        config.router.selection_bias ? bias.value.data() : nullptr, routing);
  build_permutation(routing.experts.data(), tokens, config.router.top_k, config.router.num_experts,
                    perm);
}

template <class T>
void MoeLayer<T>::Impl::zero_other_rows(std::vector<T>& buffer, int64_t width) const {
  std::fill(buffer.begin(), buffer.begin() + rows.begin * width, T(0));
  std::fill(buffer.begin() + rows.end * width, buffer.end(), T(0));
}

template <class T>
void MoeLayer<T>::Impl::experts_forward(const T* x_rows, T* ys) {
  const int64_t d = config.embed_dim, f = config.mlp_dim, m = rows.m;
  const int64_t first = rows.begin, count = rows.end - rows.begin;
  // A new step: the bf16 copies of the last one's inputs are stale (the
  // memo's contract, grouped_matmul.h); this step's x, act, dy and dh are
  // not written after their first cast until the next forward.
  if (experts.casts) experts.casts->clear();
  expert_xs = x_rows;
  act.resize(static_cast<size_t>(m * f));
  zero_other_rows(act, f);
  if (config.fused_gate_up) {
    h_kept = !fused_swiglu_forward();
    if (h_kept) {
      h.resize(static_cast<size_t>(m * 2 * f));
      grouped_forward<T>(experts, wi_passes[0], "moe/wi/fwd", problem(d, 2 * f), x_rows,
                         wi.weight(), h.data());
      auto scope = profile(profiler, "moe/swiglu", OpKind::kGlue);
      const T* h_first = h.data() + first * 2 * f;
      swiglu_forward(h_first, h_first + f, count, f, 2 * f, act.data() + first * f);
    } else if constexpr (std::is_same_v<T, float>) {
      grouped_forward_swiglu(experts, wi_passes[0], "moe/wi/fwd_swiglu", problem(d, 2 * f), x_rows,
                             wi.weight(), act.data());
    }
  } else {
    h0.resize(static_cast<size_t>(m * f));
    h1.resize(static_cast<size_t>(m * f));
    grouped_forward<T>(experts, wi_passes[0], "moe/wi_0/fwd", problem(d, f), x_rows,
                       wi_0.weight(), h0.data());
    up_forward_and_swiglu(x_rows);
  }
  grouped_forward<T>(experts, wo_passes[0], "moe/wo/fwd", problem(f, d), act.data(),
                     wo.weight(), ys);
}

// h1 = x @ wi_1 and act = silu(h0) * h1: in wi_1's store stage, or as a
// separate pass over the rows.
template <class T>
void MoeLayer<T>::Impl::up_forward_and_swiglu(const T* x_rows) {
  const int64_t d = config.embed_dim, f = config.mlp_dim;
  if constexpr (std::is_same_v<T, float>) {
    if (swiglu_in_gmm()) {
      grouped_forward_with_swiglu(experts, wi_passes[0], "moe/wi_1/fwd", problem(d, f), x_rows,
                                  wi_1.weight(), h0.data(), h1.data(), act.data());
      return;
    }
  }
  grouped_forward<T>(experts, wi_passes[0], "moe/wi_1/fwd", problem(d, f), x_rows, wi_1.weight(),
                     h1.data());
  auto scope = profile(profiler, "moe/swiglu", OpKind::kGlue);
  const int64_t first = rows.begin, count = rows.end - rows.begin;
  swiglu_forward(h0.data() + first * f, h1.data() + first * f, count, f, f,
                 act.data() + first * f);
}

// dact = dy @ wo^T and SwiGLU's backward into dh0, dh1: in wo's dlhs store
// stage, or as a separate pass over the rows.
template <class T>
void MoeLayer<T>::Impl::down_grad_lhs_and_swiglu(const T* dys) {
  const int64_t d = config.embed_dim, f = config.mlp_dim, m = rows.m;
  dh0.resize(static_cast<size_t>(m * f));
  dh1.resize(static_cast<size_t>(m * f));
  if constexpr (std::is_same_v<T, float>) {
    if (swiglu_in_gmm()) {
      grouped_grad_lhs_with_swiglu(experts, wo_passes[1], "moe/wo/dlhs", problem(f, d), dys,
                                   wo.weight(), h0.data(), h1.data(), dact.data(), dh0.data(),
                                   dh1.data());
      return;
    }
  }
  grouped_grad_lhs<T>(experts, wo_passes[1], "moe/wo/dlhs", problem(f, d), dys, wo.weight(),
                      dact.data());
  zero_other_rows(dh0, f);
  zero_other_rows(dh1, f);
  auto scope = profile(profiler, "moe/swiglu_bwd", OpKind::kGlue);
  const int64_t first = rows.begin, count = rows.end - rows.begin;
  swiglu_backward(h0.data() + first * f, h1.data() + first * f, dact.data() + first * f, count, f,
                  f, dh0.data() + first * f, dh1.data() + first * f);
}

template <class T>
void MoeLayer<T>::Impl::experts_backward(const T* dys, T* dx_rows) {
  const int64_t d = config.embed_dim, f = config.mlp_dim, m = rows.m;
  const int64_t first = rows.begin, count = rows.end - rows.begin;
  grouped_grad_rhs<T>(experts, wo_passes[2], "moe/wo/drhs", problem(f, d), act.data(), dys,
                      wo.grad.data());
  dact.resize(static_cast<size_t>(m * f));
  if (config.fused_gate_up) {
    grouped_grad_lhs<T>(experts, wo_passes[1], "moe/wo/dlhs", problem(f, d), dys, wo.weight(),
                        dact.data());
    if (!h_kept) {
      h.resize(static_cast<size_t>(m * 2 * f));
      grouped_forward<T>(experts, wi_passes[0], "moe/wi/fwd_remat", problem(d, 2 * f), expert_xs,
                         wi.weight(), h.data());
    }
    dh.resize(static_cast<size_t>(m * 2 * f));
    zero_other_rows(dh, 2 * f);
    {
      auto scope = profile(profiler, "moe/swiglu_bwd", OpKind::kGlue);
      const T* h_first = h.data() + first * 2 * f;
      T* dh_first = dh.data() + first * 2 * f;
      swiglu_backward(h_first, h_first + f, dact.data() + first * f, count, f, 2 * f, dh_first,
                      dh_first + f);
    }
    grouped_grad_rhs<T>(experts, wi_passes[2], "moe/wi/drhs", problem(d, 2 * f), expert_xs,
                        dh.data(), wi.grad.data());
    grouped_grad_lhs<T>(experts, wi_passes[1], "moe/wi/dlhs", problem(d, 2 * f), dh.data(),
                        wi.weight(), dx_rows);
  } else {
    down_grad_lhs_and_swiglu(dys);
    grouped_grad_rhs<T>(experts, wi_passes[2], "moe/wi_0/drhs", problem(d, f), expert_xs,
                        dh0.data(), wi_0.grad.data());
    grouped_grad_rhs<T>(experts, wi_passes[2], "moe/wi_1/drhs", problem(d, f), expert_xs,
                        dh1.data(), wi_1.grad.data());
    grouped_grad_lhs<T>(experts, wi_passes[1], "moe/wi_0/dlhs", problem(d, f), dh0.data(),
                        wi_0.weight(), dx_rows);
    dxs_part.resize(static_cast<size_t>(m * d));
    grouped_grad_lhs<T>(experts, wi_passes[1], "moe/wi_1/dlhs", problem(d, f), dh1.data(),
                        wi_1.weight(), dxs_part.data());
    auto scope = profile(profiler, "moe/add_dxs", OpKind::kGlue);
    add_into(dxs_part, dx_rows);
  }
}

template <class T>
MoeLayer<T>::MoeLayer(std::string name, const MoeConfig& config, Profiler* profiler,
                      Communicator* comm)
    : impl_(std::make_unique<Impl>(std::move(name), config, profiler, comm)) {}
template <class T>
MoeLayer<T>::~MoeLayer() = default;
template <class T>
MoeLayer<T>::MoeLayer(MoeLayer&&) noexcept = default;

template <class T>
const MoeConfig& MoeLayer<T>::config() const {
  return impl_->config;
}

template <class T>
void MoeLayer<T>::set_batch_comms(std::vector<Communicator*> comms) {
  impl_->batch_comms.clear();
  for (Communicator* c : comms) {
    if (comm_size(c) > 1) impl_->batch_comms.push_back(c);
  }
}

template <class T>
void MoeLayer<T>::Impl::sum_over_batch(Routing<T>& r) {
  for (Communicator* c : batch_comms) sum_routing_stats(*c, config.router, r);
}

template <class T>
void MoeLayer<T>::init(uint64_t seed) {
  Impl& m = *impl_;
  const double in_scale = 1.0 / std::sqrt(static_cast<double>(m.config.embed_dim));
  init_normal(m.gate, seed, in_scale);
  if (m.config.fused_gate_up) {
    init_expert_shard(m.wi, m.shard, seed, in_scale);
  } else {
    init_expert_shard(m.wi_0, m.shard, seed, in_scale);
    init_expert_shard(m.wi_1, m.shard, seed, in_scale);
  }
  init_expert_shard(m.wo, m.shard, seed, 1.0 / std::sqrt(static_cast<double>(m.config.mlp_dim)));
  if (m.shared) m.shared->init(seed);
}

template <class T>
void MoeLayer<T>::forward(const T* x, int64_t tokens, T* out) {
  Impl& m = *impl_;
  auto span = profile(m.profiler, "moe_layer/fwd", OpKind::kSpan);
  span.arg("layer", m.name);
  const MoeConfig& c = m.config;
  const int64_t e = c.router.num_experts, d = c.embed_dim;
  const int64_t rows = tokens * c.router.top_k;
  m.x = x;
  m.tokens = tokens;
  m.calls.clear();
  if (c.sparse_matmul) m.prepare(rows);

  m.logits.resize(static_cast<size_t>(tokens * e));
  m.router.forward(x, tokens, m.gate.weight(), m.logits.data());
  if (!c.sparse_matmul) {
    m.forward_dense(out);
  } else if (m.exchange == Exchange::kRing) {
    m.forward_ring(out);
  } else if (m.exchange == Exchange::kAllToAll) {
    m.forward_all_to_all(out);
  } else {
    m.route_local();
    m.sum_over_batch(m.routing);
    // Global loads (the routing's counts, summed); perm keeps this rank's.
    m.stats.group_sizes = m.batch_comms.empty() ? m.perm.group_sizes : m.routing.counts;
    m.stats.load_balance_loss = m.routing.load_balance_loss;
    {
      auto scope = profile(m.profiler, "moe/permute", OpKind::kGlue);
      m.xs.resize(static_cast<size_t>(rows * d));
      gather_rows(m.perm, x, d, m.xs.data());
    }
    m.rows = ExpertRows{m.perm.group_sizes.data(), e, rows, 0, -1, 0, rows};
    m.y.resize(static_cast<size_t>(rows * d));
    m.experts_forward(m.xs.data(), m.y.data());
    auto scope = profile(m.profiler, "moe/unpermute", OpKind::kGlue);
    combine_rows(m.perm, m.y.data(), m.routing.weights.data(), d, out);
  }
  if (m.shared) {
    m.dx_part.resize(static_cast<size_t>(tokens * d));
    m.shared->forward(x, tokens, m.dx_part.data());
    auto scope = profile(m.profiler, "moe/add_shared", OpKind::kGlue);
    add_into(m.dx_part, out);
  }
}

template <class T>
void MoeLayer<T>::backward(const T* dout, T* dx) {
  Impl& m = *impl_;
  auto span = profile(m.profiler, "moe_layer/bwd", OpKind::kSpan);
  span.arg("layer", m.name);
  const MoeConfig& c = m.config;
  const int64_t e = c.router.num_experts, d = c.embed_dim, k = c.router.top_k;
  const int64_t tokens = m.tokens, rows = tokens * k;

  if (!c.sparse_matmul) {
    m.backward_dense(dout, dx);
  } else if (m.exchange == Exchange::kRing) {
    m.backward_ring(dout, dx);
  } else if (m.exchange == Exchange::kAllToAll) {
    m.backward_all_to_all(dout, dx);
  } else {
    m.dy.resize(static_cast<size_t>(rows * d));
    m.dweights.resize(static_cast<size_t>(rows));
    {
      auto scope = profile(m.profiler, "moe/unpermute_bwd", OpKind::kGlue);
      combine_rows_backward(m.perm, m.y.data(), m.routing.weights.data(), dout, d, m.dy.data(),
                            m.dweights.data());
    }
    m.dxs.resize(static_cast<size_t>(rows * d));
    m.experts_backward(m.dy.data(), m.dxs.data());
    auto scope = profile(m.profiler, "moe/permute_bwd", OpKind::kGlue);
    scatter_add_rows(m.perm, m.dxs.data(), d, dx);
  }
  m.dlogits.resize(static_cast<size_t>(tokens * e));
  {
    auto scope = profile(m.profiler, "moe/route_bwd", OpKind::kGlue);
    route_backward(c.router, m.routing, m.dweights.data(), c.router.load_balance_loss_weight,
                   m.dlogits.data());
  }
  m.router.grad_rhs(m.x, m.dlogits.data(), tokens, m.gate.grad.data());
  m.dx_part.resize(static_cast<size_t>(tokens * d));
  m.router.grad_lhs(m.dlogits.data(), tokens, m.gate.weight(), m.dx_part.data());
  {
    auto scope = profile(m.profiler, "moe/add_dx", OpKind::kGlue);
    add_into(m.dx_part, dx);
  }
  if (m.shared) m.shared->backward(dout, dx);
}

template <class T>
const RoutingStats& MoeLayer<T>::routing() const {
  return impl_->stats;
}

template <class T>
const std::vector<GmmCall>& MoeLayer<T>::calls() const {
  return impl_->calls;
}

template <class T>
void MoeLayer<T>::update_selection_bias(double rate) {
  Impl& m = *impl_;
  // The global batch's loads, so every rank moves its bias copy alike.
  const std::vector<int32_t>& loads = m.stats.group_sizes;
  if (!m.config.router.selection_bias || loads.empty()) return;
  const int64_t e = m.config.router.num_experts;
  double mean = 0;
  for (int32_t size : loads) mean += size;
  mean /= static_cast<double>(e);
  for (int64_t i = 0; i < e; ++i) {
    const double load = loads[i];
    const double sign = load < mean ? 1.0 : (load > mean ? -1.0 : 0.0);
    m.bias.value[i] += static_cast<T>(rate * sign);
  }
}

template <class T>
std::vector<Param<T>*> MoeLayer<T>::params() {
  Impl& m = *impl_;
  std::vector<Param<T>*> out = {&m.gate};
  if (m.config.router.selection_bias) out.push_back(&m.bias);
  if (m.config.fused_gate_up) {
    out.push_back(&m.wi);
  } else {
    out.push_back(&m.wi_0);
    out.push_back(&m.wi_1);
  }
  out.push_back(&m.wo);
  if (m.shared) {
    for (Param<T>* p : m.shared->params()) out.push_back(p);
  }
  return out;
}

template class MoeLayer<float>;
template class MoeLayer<double>;

}  // namespace raggemm::moe
