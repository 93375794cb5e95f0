// A dense SwiGLU MLP (shared experts, and the trainer's dense layers).
#include <cmath>
#include <optional>

#include "moe/dense.h"
#include "moe/swiglu.h"
#include "raggemm/moe.h"
#include "raggemm/profiler.h"

namespace raggemm::moe {

template <class T>
struct DenseMlp<T>::Impl {
  Impl(std::string prefix, int64_t embed, int64_t width_, const MoeConfig& config,
       Profiler* profiler_)
      : embed_dim(embed),
        width(width_),
        profiler(profiler_),
        up(config, dense_context(config, profiler_, config.dtype), embed, width_,
           {"mlp/wi/fwd", "mlp/wi/dlhs", "mlp/wi/drhs"}),
        down(config, dense_context(config, profiler_, config.dtype), width_, embed,
             {"mlp/wo/fwd", "mlp/wo/dlhs", "mlp/wo/drhs"}) {
    wi_0.reset(prefix + ".wi_0", {embed, width});
    wi_1.reset(prefix + ".wi_1", {embed, width});
    wo.reset(prefix + ".wo", {width, embed});
  }

  int64_t embed_dim, width;
  Profiler* profiler;
  DenseMatmul<T> up, down;
  Param<T> wi_0, wi_1, wo;
  // Kept from forward for backward.
  const T* x = nullptr;
  int64_t tokens = 0;
  std::vector<T> h0, h1, act, dact, dh0, dh1, dx_part;
};

template <class T>
DenseMlp<T>::DenseMlp(std::string name, int64_t embed_dim, int64_t width, const MoeConfig& matmuls,
                      Profiler* profiler)
    : impl_(std::make_unique<Impl>(std::move(name), embed_dim, width, matmuls, profiler)) {}

template <class T>
DenseMlp<T>::~DenseMlp() = default;
template <class T>
DenseMlp<T>::DenseMlp(DenseMlp&&) noexcept = default;

template <class T>
void DenseMlp<T>::init(uint64_t seed) {
  Impl& m = *impl_;
  init_normal(m.wi_0, seed, 1.0 / std::sqrt(static_cast<double>(m.embed_dim)));
  init_normal(m.wi_1, seed, 1.0 / std::sqrt(static_cast<double>(m.embed_dim)));
  init_normal(m.wo, seed, 1.0 / std::sqrt(static_cast<double>(m.width)));
}

template <class T>
void DenseMlp<T>::forward(const T* x, int64_t tokens, T* out) {
  Impl& m = *impl_;
  m.x = x;
  m.tokens = tokens;
  const size_t hidden = static_cast<size_t>(tokens * m.width);
  m.h0.resize(hidden);
  m.h1.resize(hidden);
  m.act.resize(hidden);
  m.up.forward(x, tokens, m.wi_0.weight(), m.h0.data());
  m.up.forward(x, tokens, m.wi_1.weight(), m.h1.data());
  {
    auto scope = profile(m.profiler, "mlp/swiglu", OpKind::kGlue);
    swiglu_forward(m.h0.data(), m.h1.data(), tokens, m.width, m.width, m.act.data());
  }
  m.down.forward(m.act.data(), tokens, m.wo.weight(), out);
}

template <class T>
void DenseMlp<T>::backward(const T* dout, T* dx) {
  Impl& m = *impl_;
  const int64_t tokens = m.tokens;
  const size_t hidden = static_cast<size_t>(tokens * m.width);
  m.dact.resize(hidden);
  m.dh0.resize(hidden);
  m.dh1.resize(hidden);
  m.dx_part.resize(static_cast<size_t>(tokens * m.embed_dim));
  m.down.grad_rhs(m.act.data(), dout, tokens, m.wo.grad.data());
  m.down.grad_lhs(dout, tokens, m.wo.weight(), m.dact.data());
  {
    auto scope = profile(m.profiler, "mlp/swiglu_bwd", OpKind::kGlue);
    swiglu_backward(m.h0.data(), m.h1.data(), m.dact.data(), tokens, m.width, m.width, m.dh0.data(),
                    m.dh1.data());
  }
  m.up.grad_rhs(m.x, m.dh0.data(), tokens, m.wi_0.grad.data());
  m.up.grad_rhs(m.x, m.dh1.data(), tokens, m.wi_1.grad.data());
  for (const std::vector<T>* dh : {&m.dh0, &m.dh1}) {
    m.up.grad_lhs(dh->data(), tokens, dh == &m.dh0 ? m.wi_0.weight() : m.wi_1.weight(),
                  m.dx_part.data());
    auto scope = profile(m.profiler, "mlp/add_dx", OpKind::kGlue);
    const int64_t count = tokens * m.embed_dim;
    for (int64_t i = 0; i < count; ++i) dx[i] += m.dx_part[i];
  }
}

template <class T>
std::vector<Param<T>*> DenseMlp<T>::params() {
  return {&impl_->wi_0, &impl_->wi_1, &impl_->wo};
}

template class DenseMlp<float>;
template class DenseMlp<double>;

}  // namespace raggemm::moe
