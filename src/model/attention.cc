#include "model/attention.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <type_traits>

#include "core/float_bits.h"
#include "model/causal_attention.h"
#include "model/rmsnorm.h"
#include "moe/dense.h"
#include "moe/plans.h"
#include "raggemm/dtype.h"
#include "raggemm/error.h"

namespace raggemm::model {
namespace {

// Trace names of each projection's three passes.
constexpr moe::DenseNames kWq{"attention/wq/fwd", "attention/wq/dlhs", "attention/wq/drhs"};
constexpr moe::DenseNames kWk{"attention/wk/fwd", "attention/wk/dlhs", "attention/wk/drhs"};
constexpr moe::DenseNames kWv{"attention/wv/fwd", "attention/wv/dlhs", "attention/wv/drhs"};
constexpr moe::DenseNames kWo{"attention/wo/fwd", "attention/wo/dlhs", "attention/wo/drhs"};
constexpr moe::DenseNames kWqA{"attention/wq_a/fwd", "attention/wq_a/dlhs", "attention/wq_a/drhs"};
constexpr moe::DenseNames kWqB{"attention/wq_b/fwd", "attention/wq_b/dlhs", "attention/wq_b/drhs"};
constexpr moe::DenseNames kWkvA{"attention/wkv_a/fwd", "attention/wkv_a/dlhs",
                                "attention/wkv_a/drhs"};
constexpr moe::DenseNames kWkvB{"attention/wkv_b/fwd", "attention/wkv_b/dlhs",
                                "attention/wkv_b/drhs"};

// A weight [k, n] and its matmuls.
template <class T>
struct Projection {
  Projection(const std::string& name, int64_t k, int64_t n, const moe::MoeConfig& config,
             const moe::MatmulContext& context, moe::DenseNames names)
      : matmul(config, context, k, n, names), fan_in(k) {
    weight.reset(name, {k, n});
  }
  void forward(const T* x, int64_t rows, T* out) {
    matmul.forward(x, rows, weight.weight(), out);
  }
  // weight.grad = x^T dy (overwritten); dx += dy weight^T (through `scratch`).
  void backward(const T* x, const T* dy, int64_t rows, T* dx, std::vector<T>& scratch) {
    matmul.grad_rhs(x, dy, rows, weight.grad.data());
    scratch.resize(static_cast<size_t>(rows * fan_in));
    matmul.grad_lhs(dy, rows, weight.weight(), scratch.data());
    for (size_t i = 0; i < scratch.size(); ++i) dx[i] += scratch[i];
  }

  moe::DenseMatmul<T> matmul;
  moe::Param<T> weight;
  int64_t fan_in;
};

// With dtype=bf16 the core reads bf16 operands, as the GMMs do.
template <class T>
void round_to_compute(std::vector<T>& values, DType dtype) {
  if constexpr (std::is_same_v<T, float>) {
    if (dtype != DType::kBF16) return;
    // core::bf16_bits_of is inline, so this vectorizes (f32_to_bf16 is a call).
    for (float& v : values) v = bf16_to_f32(core::bf16_bits_of(v));
  }
}

double core_flops(const AttentionDims& d) {
  // Causal: S (S + 1) / 2 query-key pairs, 2 flops per multiply-add.
  const double pairs = static_cast<double>(d.seq) * static_cast<double>(d.seq + 1) / 2;
  return 2 * pairs * static_cast<double>(d.batch * d.heads * (d.qk_dim + d.v_dim));
}

}  // namespace

void validate(const AttentionConfig& c) {
  require(c.embed_dim >= 1, "base_emb_dim", c.embed_dim, "must be at least 1");
  require(c.num_query_heads >= 1, "base_num_query_heads", c.num_query_heads,
          "must be at least 1");
  if (c.type == AttentionType::kMla) {
    require(c.q_lora_rank >= 0, "q_lora_rank", c.q_lora_rank, "must be >= 0 (0: no compression)");
    require(c.kv_lora_rank >= 1, "kv_lora_rank", c.kv_lora_rank, "must be at least 1");
    require(c.qk_nope_head_dim >= 0, "qk_nope_head_dim", c.qk_nope_head_dim, "must be >= 0");
    require(c.qk_rope_head_dim >= 2 && c.qk_rope_head_dim % 2 == 0, "qk_rope_head_dim",
            c.qk_rope_head_dim, "must be even and at least 2");
    require(c.v_head_dim >= 1, "v_head_dim", c.v_head_dim, "must be at least 1");
  } else {
    require(c.num_kv_heads >= 1 && c.num_query_heads % c.num_kv_heads == 0,
            "base_num_query_heads,base_num_kv_heads",
            std::to_string(c.num_query_heads) + "," + std::to_string(c.num_kv_heads),
            "query heads must be a positive multiple of kv heads");
    require(c.type != AttentionType::kMha || c.num_kv_heads == c.num_query_heads,
            "attention_type,base_num_kv_heads", "mha," + std::to_string(c.num_kv_heads),
            "mha has as many kv heads as query heads (" + std::to_string(c.num_query_heads) +
                "); use attention_type=gqa to share them");
    require(c.head_dim >= 2 && c.head_dim % 2 == 0, "head_dim", c.head_dim,
            "must be even and at least 2 (RoPE rotates pairs)");
  }
}

int64_t attention_parameter_count(const AttentionConfig& c) {
  const int64_t d = c.embed_dim, h = c.num_query_heads;
  if (c.type != AttentionType::kMla) {
    return d * h * c.head_dim * 2 + d * c.num_kv_heads * c.head_dim * 2;
  }
  const int64_t qk = c.qk_nope_head_dim + c.qk_rope_head_dim;
  const int64_t q = c.q_lora_rank > 0 ? d * c.q_lora_rank + c.q_lora_rank + c.q_lora_rank * h * qk
                                      : d * h * qk;
  return q + d * (c.kv_lora_rank + c.qk_rope_head_dim) + c.kv_lora_rank +
         c.kv_lora_rank * h * (c.qk_nope_head_dim + c.v_head_dim) + h * c.v_head_dim * d;
}

template <class T>
struct Attention<T>::Impl {
  Impl(const std::string& prefix, const AttentionConfig& config_, const moe::MoeConfig& matmuls,
       Profiler* profiler_)
      : c(config_), profiler(profiler_), dtype(matmuls.dtype) {
    validate(c);
    moe::MatmulContext context = moe::dense_context(matmuls, profiler, matmuls.dtype);
    context.kind = OpKind::kAttention;
    // bf16: the projections share one CastMemo (cleared at each forward), so
    // x is cast once for wq, wk, wv and their drhs, o and each gradient once
    // for their two GMMs. Every source is written before its first cast of
    // the step and kept until the next forward (the backward reads x, o, qn
    // and latent_normed again as they are).
    if (matmuls.dtype == DType::kBF16) context.casts = std::make_shared<moe::CastMemo>();
    casts = context.casts;
    const int64_t d = c.embed_dim, h = c.num_query_heads;
    auto make = [&](std::optional<Projection<T>>& p, const char* name, int64_t k, int64_t n,
                    moe::DenseNames names) {
      p.emplace(prefix + "." + name, k, n, matmuls, context, names);
    };
    if (c.type == AttentionType::kMla) {
      heads = kv_heads = h;
      qk_dim = c.qk_nope_head_dim + c.qk_rope_head_dim;
      v_dim = c.v_head_dim;
      if (c.q_lora_rank > 0) {
        make(wq_a, "wq_a", d, c.q_lora_rank, kWqA);
        q_norm.reset(prefix + ".q_norm", {c.q_lora_rank});
        make(wq_b, "wq_b", c.q_lora_rank, h * qk_dim, kWqB);
      } else {
        make(wq, "wq", d, h * qk_dim, kWq);
      }
      make(wkv_a, "wkv_a", d, c.kv_lora_rank + c.qk_rope_head_dim, kWkvA);
      kv_norm.reset(prefix + ".kv_norm", {c.kv_lora_rank});
      make(wkv_b, "wkv_b", c.kv_lora_rank, h * (c.qk_nope_head_dim + v_dim), kWkvB);
      rope = std::make_unique<Rope>(c.rope, c.qk_rope_head_dim);
      scale = mla_softmax_factor(c.rope) / std::sqrt(static_cast<double>(qk_dim));
    } else {
      heads = h;
      kv_heads = c.num_kv_heads;
      qk_dim = v_dim = c.head_dim;
      make(wq, "wq", d, h * qk_dim, kWq);
      make(wk, "wk", d, kv_heads * qk_dim, kWk);
      make(wv, "wv", d, kv_heads * v_dim, kWv);
      rope = std::make_unique<Rope>(c.rope, c.head_dim);
      scale = 1.0 / std::sqrt(static_cast<double>(qk_dim));
    }
    make(wo, "wo", h * v_dim, d, kWo);
  }

  AttentionDims dims() const {
    return AttentionDims{batch, seq, heads, kv_heads, qk_dim, v_dim, scale};
  }
  void rope_q(T* data, bool inverse) {
    auto scope = profile(profiler, "attention/rope", OpKind::kAttention);
    const int64_t offset = c.type == AttentionType::kMla ? c.qk_nope_head_dim : 0;
    rope->apply(data + offset, tokens, seq, heads, heads * qk_dim, qk_dim, inverse);
  }
  void forward(const T* x_, T* out);
  void backward(const T* dout, T* dx);

  AttentionConfig c;
  Profiler* profiler;
  DType dtype;
  std::shared_ptr<moe::CastMemo> casts;  // bf16: the projections' (null for f32)
  int64_t heads = 0, kv_heads = 0, qk_dim = 0, v_dim = 0;
  double scale = 0;
  std::optional<Projection<T>> wq, wk, wv, wo, wq_a, wq_b, wkv_a, wkv_b;
  moe::Param<T> q_norm, kv_norm;
  std::unique_ptr<Rope> rope;
  // Forward state, kept for backward.
  const T* x = nullptr;
  int64_t batch = 0, seq = 0, tokens = 0;
  std::vector<T> q, k, v, o, lse;
  std::vector<T> qa, qn, q_inv, latent, latent_normed, latent_inv, k_pe;
  // Backward scratch.
  std::vector<T> d_o, dq, dk, dv, scratch, d_kv, d_latent_normed, d_latent, d_kva, d_qn, d_qa;
};

template <class T>
void Attention<T>::Impl::forward(const T* x_, T* out) {
  if (casts) casts->clear();  // a new step: the last one's copies are stale
  x = x_;
  const int64_t t = tokens;
  q.resize(static_cast<size_t>(t * heads * qk_dim));
  k.resize(static_cast<size_t>(t * kv_heads * qk_dim));
  v.resize(static_cast<size_t>(t * kv_heads * v_dim));
  if (c.type == AttentionType::kMla) {
    const int64_t nope = c.qk_nope_head_dim, rope_dim = c.qk_rope_head_dim;
    const int64_t rank = c.kv_lora_rank;
    if (wq_a) {
      qa.resize(static_cast<size_t>(t * c.q_lora_rank));
      qn.resize(qa.size());
      q_inv.resize(static_cast<size_t>(t));
      wq_a->forward(x, t, qa.data());
      {
        auto scope = profile(profiler, "attention/q_norm", OpKind::kAttention);
        rmsnorm_forward(qa.data(), q_norm.value.data(), t, c.q_lora_rank, qn.data(), q_inv.data());
      }
      wq_b->forward(qn.data(), t, q.data());
    } else {
      wq->forward(x, t, q.data());
    }
    std::vector<T>& kva = scratch;
    kva.resize(static_cast<size_t>(t * (rank + rope_dim)));
    wkv_a->forward(x, t, kva.data());
    latent.resize(static_cast<size_t>(t * rank));
    latent_normed.resize(latent.size());
    latent_inv.resize(static_cast<size_t>(t));
    k_pe.resize(static_cast<size_t>(t * rope_dim));
    for (int64_t i = 0; i < t; ++i) {
      std::copy_n(kva.data() + i * (rank + rope_dim), rank, latent.data() + i * rank);
      std::copy_n(kva.data() + i * (rank + rope_dim) + rank, rope_dim, k_pe.data() + i * rope_dim);
    }
    {
      auto scope = profile(profiler, "attention/kv_norm", OpKind::kAttention);
      rmsnorm_forward(latent.data(), kv_norm.value.data(), t, rank, latent_normed.data(),
                      latent_inv.data());
      rope->apply(k_pe.data(), t, seq, 1, rope_dim, rope_dim, false);
    }
    std::vector<T>& kv = d_kv;  // [t, heads, nope + v_dim], a scratch here
    kv.resize(static_cast<size_t>(t * heads * (nope + v_dim)));
    wkv_b->forward(latent_normed.data(), t, kv.data());
    for (int64_t i = 0; i < t; ++i) {
      for (int64_t h = 0; h < heads; ++h) {
        const T* src = kv.data() + (i * heads + h) * (nope + v_dim);
        T* kd = k.data() + (i * heads + h) * qk_dim;
        std::copy_n(src, nope, kd);
        std::copy_n(k_pe.data() + i * rope_dim, rope_dim, kd + nope);
        std::copy_n(src + nope, v_dim, v.data() + (i * heads + h) * v_dim);
      }
    }
    rope_q(q.data(), false);
  } else {
    wq->forward(x, t, q.data());
    wk->forward(x, t, k.data());
    wv->forward(x, t, v.data());
    rope_q(q.data(), false);
    auto scope = profile(profiler, "attention/rope", OpKind::kAttention);
    rope->apply(k.data(), t, seq, kv_heads, kv_heads * qk_dim, qk_dim, false);
  }
  round_to_compute(q, dtype);
  round_to_compute(k, dtype);
  round_to_compute(v, dtype);
  o.resize(static_cast<size_t>(t * heads * v_dim));
  lse.resize(static_cast<size_t>(t * heads));
  {
    const AttentionDims d = dims();
    auto scope = profile(profiler, "attention/core", OpKind::kAttention, core_flops(d));
    causal_attention_forward(d, q.data(), k.data(), v.data(), o.data(), lse.data());
  }
  wo->forward(o.data(), t, out);
}

template <class T>
void Attention<T>::Impl::backward(const T* dout, T* dx) {
  const int64_t t = tokens;
  d_o.resize(o.size());
  wo->matmul.grad_rhs(o.data(), dout, t, wo->weight.grad.data());
  wo->matmul.grad_lhs(dout, t, wo->weight.weight(), d_o.data());
  round_to_compute(d_o, dtype);
  dq.resize(q.size());
  dk.resize(k.size());
  dv.resize(v.size());
  {
    const AttentionDims d = dims();
    auto scope =
        profile(profiler, "attention/core_bwd", OpKind::kAttention, 3.5 * core_flops(d));
    causal_attention_backward(d, q.data(), k.data(), v.data(), o.data(), lse.data(), d_o.data(),
                              dq.data(), dk.data(), dv.data());
  }
  rope_q(dq.data(), true);
  if (c.type == AttentionType::kMla) {
    const int64_t nope = c.qk_nope_head_dim, rope_dim = c.qk_rope_head_dim;
    const int64_t rank = c.kv_lora_rank;
    d_kv.resize(static_cast<size_t>(t * heads * (nope + v_dim)));
    d_kva.assign(static_cast<size_t>(t * (rank + rope_dim)), T(0));
    for (int64_t i = 0; i < t; ++i) {
      T* dpe = d_kva.data() + i * (rank + rope_dim) + rank;  // the shared key: summed over heads
      for (int64_t h = 0; h < heads; ++h) {
        const T* dkh = dk.data() + (i * heads + h) * qk_dim;
        T* dst = d_kv.data() + (i * heads + h) * (nope + v_dim);
        std::copy_n(dkh, nope, dst);
        std::copy_n(dv.data() + (i * heads + h) * v_dim, v_dim, dst + nope);
        for (int64_t r = 0; r < rope_dim; ++r) dpe[r] += dkh[nope + r];
      }
    }
    {
      auto scope = profile(profiler, "attention/rope", OpKind::kAttention);
      rope->apply(d_kva.data() + rank, t, seq, 1, rank + rope_dim, rope_dim, true);
    }
    d_latent_normed.assign(latent.size(), T(0));
    wkv_b->backward(latent_normed.data(), d_kv.data(), t, d_latent_normed.data(), scratch);
    d_latent.assign(latent.size(), T(0));
    {
      auto scope = profile(profiler, "attention/kv_norm_bwd", OpKind::kAttention);
      rmsnorm_backward(latent.data(), kv_norm.value.data(), latent_inv.data(),
                       d_latent_normed.data(), t, rank, d_latent.data(), kv_norm.grad.data());
    }
    for (int64_t i = 0; i < t; ++i) {
      std::copy_n(d_latent.data() + i * rank, rank, d_kva.data() + i * (rank + rope_dim));
    }
    wkv_a->backward(x, d_kva.data(), t, dx, scratch);
    if (wq_a) {
      d_qn.assign(qn.size(), T(0));
      wq_b->backward(qn.data(), dq.data(), t, d_qn.data(), scratch);
      d_qa.assign(qa.size(), T(0));
      {
        auto scope = profile(profiler, "attention/q_norm_bwd", OpKind::kAttention);
        rmsnorm_backward(qa.data(), q_norm.value.data(), q_inv.data(), d_qn.data(), t,
                         c.q_lora_rank, d_qa.data(), q_norm.grad.data());
      }
      wq_a->backward(x, d_qa.data(), t, dx, scratch);
    } else {
      wq->backward(x, dq.data(), t, dx, scratch);
    }
  } else {
    {
      auto scope = profile(profiler, "attention/rope", OpKind::kAttention);
      rope->apply(dk.data(), t, seq, kv_heads, kv_heads * qk_dim, qk_dim, true);
    }
    wq->backward(x, dq.data(), t, dx, scratch);
    wk->backward(x, dk.data(), t, dx, scratch);
    wv->backward(x, dv.data(), t, dx, scratch);
  }
}

template <class T>
Attention<T>::Attention(std::string prefix, const AttentionConfig& config,
                        const moe::MoeConfig& matmuls, Profiler* profiler)
    : impl_(std::make_unique<Impl>(prefix, config, matmuls, profiler)) {}
template <class T>
Attention<T>::~Attention() = default;
template <class T>
Attention<T>::Attention(Attention&&) noexcept = default;

template <class T>
void Attention<T>::init(uint64_t seed) {
  Impl& m = *impl_;
  for (auto* p : {&m.wq, &m.wk, &m.wv, &m.wo, &m.wq_a, &m.wq_b, &m.wkv_a, &m.wkv_b}) {
    if (*p) moe::init_normal((*p)->weight, seed, 1.0 / std::sqrt(static_cast<double>((*p)->fan_in)));
  }
  std::fill(m.q_norm.value.begin(), m.q_norm.value.end(), T(1));
  std::fill(m.kv_norm.value.begin(), m.kv_norm.value.end(), T(1));
}

template <class T>
void Attention<T>::forward(const T* x, int64_t batch, int64_t seq, T* out) {
  Impl& m = *impl_;
  require(batch >= 1 && seq >= 1, "attention batch,seq",
          std::to_string(batch) + "," + std::to_string(seq), "must be positive");
  m.batch = batch;
  m.seq = seq;
  m.tokens = batch * seq;
  m.forward(x, out);
}

template <class T>
void Attention<T>::backward(const T* dout, T* dx) {
  impl_->backward(dout, dx);
}

template <class T>
std::vector<moe::Param<T>*> Attention<T>::params() {
  Impl& m = *impl_;
  std::vector<moe::Param<T>*> out;
  auto add = [&](std::optional<Projection<T>>& p) {
    if (p) out.push_back(&p->weight);
  };
  add(m.wq);
  add(m.wk);
  add(m.wv);
  add(m.wq_a);
  if (m.wq_a) out.push_back(&m.q_norm);
  add(m.wq_b);
  add(m.wkv_a);
  if (m.wkv_a) out.push_back(&m.kv_norm);
  add(m.wkv_b);
  add(m.wo);
  return out;
}

template class Attention<float>;
template class Attention<double>;

}  // namespace raggemm::model
