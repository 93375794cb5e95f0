// The MoE layer: router -> permute -> experts (grouped matmuls) -> unpermute,
// plus shared experts; and the backward of all of it.
#include <cmath>
#include <optional>

#include "moe/dense.h"
#include "moe/grouped_matmul.h"
#include "moe/permute.h"
#include "moe/plans.h"
#include "moe/router.h"
#include "moe/swiglu.h"
#include "raggemm/error.h"
#include "raggemm/moe.h"
#include "raggemm/profiler.h"

namespace raggemm::moe {
namespace {

template <class T>
void add_into(const std::vector<T>& source, T* target) {
  const int64_t count = static_cast<int64_t>(source.size());
  for (int64_t i = 0; i < count; ++i) target[i] += source[i];
}

}  // namespace

template <class T>
struct MoeLayer<T>::Impl {
  Impl(std::string prefix, const MoeConfig& config_, Profiler* profiler_)
      : config(config_),
        profiler(profiler_),
        experts(expert_context(config_, profiler_)),
        router(config_, dense_context(config_, profiler_, DType::kF32), config_.embed_dim,
               config_.router.num_experts, {"router/fwd", "router/dlhs", "router/drhs"}) {
    validate(config);
    const int64_t e = config.router.num_experts, d = config.embed_dim, f = config.mlp_dim;
    gate.reset(prefix + ".gate", {d, e});
    bias.reset(prefix + ".selection_bias", {e}, /*is_trainable=*/false);
    if (config.fused_gate_up) {
      wi.reset(prefix + ".wi", {e, d, 2 * f});
    } else {
      wi_0.reset(prefix + ".wi_0", {e, d, f});
      wi_1.reset(prefix + ".wi_1", {e, d, f});
    }
    wo.reset(prefix + ".wo", {e, f, d});
    if (config.shared_experts > 0) {
      shared.emplace(prefix + ".shared", d, config.shared_experts * f, config, profiler);
    }
  }

  // The v2 fused SwiGLU output stage computes the activation without keeping
  // gate|up, so backward recomputes them (one extra forward GMM).
  bool fused_swiglu_forward() const {
    if constexpr (!std::is_same_v<T, float>) return false;
    return config.fused_gate_up && config.backend == MatmulBackend::kOps &&
           config.quantization.empty() && wi_passes[0].kernel == KernelVersion::kV2;
  }

  void prepare(int64_t rows) {
    if (rows == resolved_rows) return;
    resolved_rows = rows;
    const int64_t f = config.fused_gate_up ? 2 * config.mlp_dim : config.mlp_dim;
    wi_passes = resolve_expert_passes(config, Weight::kWi, {rows, config.embed_dim, f});
    wo_passes =
        resolve_expert_passes(config, Weight::kWo, {rows, config.embed_dim, config.mlp_dim});
  }

  GroupedProblem problem(int64_t k, int64_t n) const {
    return GroupedProblem{perm.group_sizes.data(), config.router.num_experts, perm.rows(), k, n};
  }

  MoeConfig config;
  Profiler* profiler;
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
  Routing<T> routing;
  Permutation perm;
  RoutingStats stats;
  bool h_kept = false;
  // Backward scratch.
  std::vector<T> dy, dweights, dact, dh0, dh1, dh, dxs, dxs_part, dlogits, dx_part;
};

template <class T>
MoeLayer<T>::MoeLayer(std::string name, const MoeConfig& config, Profiler* profiler)
    : impl_(std::make_unique<Impl>(std::move(name), config, profiler)) {}
template <class T>
MoeLayer<T>::~MoeLayer() = default;
template <class T>
MoeLayer<T>::MoeLayer(MoeLayer&&) noexcept = default;

template <class T>
const MoeConfig& MoeLayer<T>::config() const {
  return impl_->config;
}

template <class T>
void MoeLayer<T>::init(uint64_t seed) {
  Impl& m = *impl_;
  const double in_scale = 1.0 / std::sqrt(static_cast<double>(m.config.embed_dim));
  init_normal(m.gate, seed, in_scale);
  if (m.config.fused_gate_up) {
    init_normal(m.wi, seed, in_scale);
  } else {
    init_normal(m.wi_0, seed, in_scale);
    init_normal(m.wi_1, seed, in_scale);
  }
  init_normal(m.wo, seed, 1.0 / std::sqrt(static_cast<double>(m.config.mlp_dim)));
  if (m.shared) m.shared->init(seed);
}

template <class T>
void MoeLayer<T>::forward(const T* x, int64_t tokens, T* out) {
  Impl& m = *impl_;
  auto span = profile(m.profiler, "moe_layer/fwd", OpKind::kSpan);
  const MoeConfig& c = m.config;
  const int64_t e = c.router.num_experts, d = c.embed_dim, f = c.mlp_dim, k = c.router.top_k;
  const int64_t rows = tokens * k;
  m.x = x;
  m.tokens = tokens;
  m.prepare(rows);

  m.logits.resize(static_cast<size_t>(tokens * e));
  m.router.forward(x, tokens, m.gate.value.data(), m.logits.data());
  {
    auto scope = profile(m.profiler, "moe/route", OpKind::kGlue);
    route(c.router, m.logits.data(), tokens,
          c.router.selection_bias ? m.bias.value.data() : nullptr, m.routing);
    build_permutation(m.routing.experts.data(), tokens, k, e, m.perm);
    m.stats.group_sizes = m.perm.group_sizes;
    m.stats.load_balance_loss = m.routing.load_balance_loss;
  }
  {
    auto scope = profile(m.profiler, "moe/permute", OpKind::kGlue);
    m.xs.resize(static_cast<size_t>(rows * d));
    gather_rows(m.perm, x, d, m.xs.data());
  }
  m.act.resize(static_cast<size_t>(rows * f));
  if (c.fused_gate_up) {
    m.h_kept = !m.fused_swiglu_forward();
    if (m.h_kept) {
      m.h.resize(static_cast<size_t>(rows * 2 * f));
      grouped_forward<T>(m.experts, m.wi_passes[0], "moe/wi/fwd", m.problem(d, 2 * f), m.xs.data(),
                         m.wi.value.data(), m.h.data());
      auto scope = profile(m.profiler, "moe/swiglu", OpKind::kGlue);
      swiglu_forward(m.h.data(), m.h.data() + f, rows, f, 2 * f, m.act.data());
    } else if constexpr (std::is_same_v<T, float>) {
      grouped_forward_swiglu(m.experts, m.wi_passes[0], "moe/wi/fwd_swiglu", m.problem(d, 2 * f),
                             m.xs.data(), m.wi.value.data(), m.act.data());
    }
  } else {
    m.h0.resize(static_cast<size_t>(rows * f));
    m.h1.resize(static_cast<size_t>(rows * f));
    grouped_forward<T>(m.experts, m.wi_passes[0], "moe/wi_0/fwd", m.problem(d, f), m.xs.data(),
                       m.wi_0.value.data(), m.h0.data());
    grouped_forward<T>(m.experts, m.wi_passes[0], "moe/wi_1/fwd", m.problem(d, f), m.xs.data(),
                       m.wi_1.value.data(), m.h1.data());
    auto scope = profile(m.profiler, "moe/swiglu", OpKind::kGlue);
    swiglu_forward(m.h0.data(), m.h1.data(), rows, f, f, m.act.data());
  }
  m.y.resize(static_cast<size_t>(rows * d));
  grouped_forward<T>(m.experts, m.wo_passes[0], "moe/wo/fwd", m.problem(f, d), m.act.data(),
                     m.wo.value.data(), m.y.data());
  {
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
  const MoeConfig& c = m.config;
  const int64_t e = c.router.num_experts, d = c.embed_dim, f = c.mlp_dim, k = c.router.top_k;
  const int64_t tokens = m.tokens, rows = tokens * k;

  m.dy.resize(static_cast<size_t>(rows * d));
  m.dweights.resize(static_cast<size_t>(rows));
  {
    auto scope = profile(m.profiler, "moe/unpermute_bwd", OpKind::kGlue);
    combine_rows_backward(m.perm, m.y.data(), m.routing.weights.data(), dout, d, m.dy.data(),
                          m.dweights.data());
  }
  grouped_grad_rhs<T>(m.experts, m.wo_passes[2], "moe/wo/drhs", m.problem(f, d), m.act.data(),
                      m.dy.data(), m.wo.grad.data());
  m.dact.resize(static_cast<size_t>(rows * f));
  grouped_grad_lhs<T>(m.experts, m.wo_passes[1], "moe/wo/dlhs", m.problem(f, d), m.dy.data(),
                      m.wo.value.data(), m.dact.data());
  m.dxs.resize(static_cast<size_t>(rows * d));
  if (c.fused_gate_up) {
    if (!m.h_kept) {
      m.h.resize(static_cast<size_t>(rows * 2 * f));
      grouped_forward<T>(m.experts, m.wi_passes[0], "moe/wi/fwd_remat", m.problem(d, 2 * f),
                         m.xs.data(), m.wi.value.data(), m.h.data());
    }
    m.dh.resize(static_cast<size_t>(rows * 2 * f));
    {
      auto scope = profile(m.profiler, "moe/swiglu_bwd", OpKind::kGlue);
      swiglu_backward(m.h.data(), m.h.data() + f, m.dact.data(), rows, f, 2 * f, m.dh.data(),
                      m.dh.data() + f);
    }
    grouped_grad_rhs<T>(m.experts, m.wi_passes[2], "moe/wi/drhs", m.problem(d, 2 * f), m.xs.data(),
                        m.dh.data(), m.wi.grad.data());
    grouped_grad_lhs<T>(m.experts, m.wi_passes[1], "moe/wi/dlhs", m.problem(d, 2 * f), m.dh.data(),
                        m.wi.value.data(), m.dxs.data());
  } else {
    m.dh0.resize(static_cast<size_t>(rows * f));
    m.dh1.resize(static_cast<size_t>(rows * f));
    {
      auto scope = profile(m.profiler, "moe/swiglu_bwd", OpKind::kGlue);
      swiglu_backward(m.h0.data(), m.h1.data(), m.dact.data(), rows, f, f, m.dh0.data(),
                      m.dh1.data());
    }
    grouped_grad_rhs<T>(m.experts, m.wi_passes[2], "moe/wi_0/drhs", m.problem(d, f), m.xs.data(),
                        m.dh0.data(), m.wi_0.grad.data());
    grouped_grad_rhs<T>(m.experts, m.wi_passes[2], "moe/wi_1/drhs", m.problem(d, f), m.xs.data(),
                        m.dh1.data(), m.wi_1.grad.data());
    grouped_grad_lhs<T>(m.experts, m.wi_passes[1], "moe/wi_0/dlhs", m.problem(d, f), m.dh0.data(),
                        m.wi_0.value.data(), m.dxs.data());
    m.dxs_part.resize(static_cast<size_t>(rows * d));
    grouped_grad_lhs<T>(m.experts, m.wi_passes[1], "moe/wi_1/dlhs", m.problem(d, f), m.dh1.data(),
                        m.wi_1.value.data(), m.dxs_part.data());
    auto scope = profile(m.profiler, "moe/add_dxs", OpKind::kGlue);
    add_into(m.dxs_part, m.dxs.data());
  }
  {
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
  m.router.grad_lhs(m.dlogits.data(), tokens, m.gate.value.data(), m.dx_part.data());
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
void MoeLayer<T>::update_selection_bias(double rate) {
  Impl& m = *impl_;
  if (!m.config.router.selection_bias || m.perm.group_sizes.empty()) return;
  const int64_t e = m.config.router.num_experts;
  double mean = 0;
  for (int32_t size : m.perm.group_sizes) mean += size;
  mean /= static_cast<double>(e);
  for (int64_t i = 0; i < e; ++i) {
    const double load = m.perm.group_sizes[i];
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
