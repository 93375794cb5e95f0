// The trainer's model: forward, backward, parameters.
#include "train/model.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "model/rmsnorm.h"
#include "moe/dense.h"
#include "kernels/glue_simd.h"
#include "moe/ordered_sums.h"
#include "raggemm/error.h"

namespace raggemm::train {
using model::rmsnorm_backward;

namespace {

// x[i] = std::exp(x[i]): f32 through the vector kernel (the same bits).
void exp_in_place(float* x, int64_t n) { kernels::exp_f32(x, n, x); }
void exp_in_place(double* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = std::exp(x[i]);
}

}  // namespace

int64_t loss_chunk_tokens(int64_t vocab, int64_t tokens) {
  return std::clamp<int64_t>(kLossChunkFloats / std::max<int64_t>(vocab, 1), 1,
                             std::max<int64_t>(tokens, 1));
}
using model::rmsnorm_forward;

ModelConfig model_config(const TrainConfig& config, Communicator* comm) {
  ModelConfig out;
  out.vocab_size = config.vocab_size;
  out.num_layers = config.base_num_decoder_layers;
  out.dense_layers = config.first_num_dense_layers;
  out.moe = config.moe;
  out.dense_mlp_dim = config.base_mlp_dim;
  out.attention = attention_config(config);
  out.seq_len = config.max_target_length;
  out.comm = comm;
  return out;
}

template <class T>
struct Model<T>::Impl {
  struct Block {
    moe::Param<T> attention_norm_scale;
    std::optional<model::Attention<T>> attention;
    moe::Param<T> norm_scale;  // before the MLP
    std::optional<moe::DenseMlp<T>> dense;
    std::optional<moe::MoeLayer<T>> moe;
    std::vector<T> x_in, attention_normed, attention_inv_rms, attention_out, dattention_normed;
    std::vector<T> x_mid, normed, inv_rms, ffn_out, dnormed;
    size_t attention_unit = 0, ffn_unit = 0;  // Model::units() indices
  };

  Impl(const ModelConfig& config_, Profiler* profiler_)
      : config(config_),
        profiler(profiler_),
        output(config_.moe, moe::dense_context(config_.moe, profiler_, config_.moe.dtype),
               config_.moe.embed_dim, config_.vocab_size,
               {"output/fwd", "output/dlhs", "output/drhs"}) {
    const int64_t d = config.moe.embed_dim;
    require(config.vocab_size >= 2, "vocab_size", config.vocab_size, "must be at least 2");
    embed.reset("embedding", {config.vocab_size, d});
    blocks.resize(static_cast<size_t>(config.num_layers));
    for (int64_t l = 0; l < config.num_layers; ++l) {
      const std::string prefix = "layers." + std::to_string(l);
      Block& block = blocks[l];
      if (config.attention) {
        block.attention_norm_scale.reset(prefix + ".attention_norm", {d});
        block.attention.emplace(prefix + ".attention", *config.attention, config.moe, profiler);
      }
      block.norm_scale.reset(prefix + ".norm", {d});
      if (l < config.dense_layers) {
        const int64_t width = config.dense_mlp_dim > 0 ? config.dense_mlp_dim : config.moe.mlp_dim;
        block.dense.emplace(prefix + ".mlp", d, width, config.moe, profiler);
      } else {
        block.moe.emplace(prefix + ".moe", config.moe, profiler, config.comm);
        block.moe->set_batch_comms(config.batch_comms);
      }
    }
    // Unit numbers, in the order of Model::units().
    size_t unit = 1;
    for (Block& block : blocks) {
      if (block.attention) block.attention_unit = unit++;
      block.ffn_unit = unit++;
    }
    final_unit = unit;
    final_norm.reset("final_norm", {d});
    out_proj.reset("output", {d, config.vocab_size});
  }

  LossParts run(const int32_t* inputs, const int32_t* targets, int64_t tokens, bool backward);
  void sum_shared_gradients();
  // Sums `value` over the expert axis and every batch axis: a global count.
  template <class V>
  void sum_over_ranks(V* value) {
    if (comm_size(config.comm) > 1) config.comm->allreduce_sum(value, 1);
    for (Communicator* c : config.batch_comms) {
      if (comm_size(c) > 1) c->allreduce_sum(value, 1);
    }
  }
  void forward_begin(size_t unit) {
    if (config.hooks) config.hooks->forward_begin(unit);
  }
  void forward_end(size_t unit) {
    if (config.hooks) config.hooks->forward_end(unit);
  }
  void backward_begin(size_t unit) {
    if (config.hooks) config.hooks->backward_begin(unit);
  }
  void backward_end(size_t unit) {
    if (config.hooks) config.hooks->backward_end(unit);
  }
  size_t final_unit = 0;

  ModelConfig config;
  Profiler* profiler;
  moe::DenseMatmul<T> output;
  moe::Param<T> embed, final_norm, out_proj;
  std::vector<Block> blocks;
  std::vector<T> x, final_normed, final_inv_rms, logits, dlogits, dfinal, dx, out_proj_grad_part;
  std::vector<double> token_loss;
};

template <class T>
LossParts Model<T>::Impl::run(const int32_t* inputs, const int32_t* targets, int64_t tokens,
                              bool backward) {
  const int64_t d = config.moe.embed_dim, v = config.vocab_size;
  const size_t activations = static_cast<size_t>(tokens * d);
  x.resize(activations);
  forward_begin(0);
  {
    auto scope = profile(profiler, "embed", OpKind::kGlue);
    for (int64_t t = 0; t < tokens; ++t) {
      require(inputs[t] >= 0 && inputs[t] < v, "inputs", inputs[t], "token outside the vocabulary");
      if (embed.bf16) {  // bf16 storage: the row widened as it is gathered
        const uint16_t* row = embed.bits.data() + inputs[t] * d;
        for (int64_t i = 0; i < d; ++i) x[t * d + i] = static_cast<T>(bf16_to_f32(row[i]));
      } else {
        std::copy_n(embed.value.data() + inputs[t] * d, d, x.data() + t * d);
      }
    }
  }
  forward_end(0);
  const int64_t seq = config.seq_len > 0 ? config.seq_len : tokens;
  require(tokens % seq == 0, "tokens", tokens,
          "must be whole sequences of max_target_length=" + std::to_string(seq));
  LossParts parts;
  for (size_t index = 0; index < blocks.size(); ++index) {
    Block& block = blocks[index];
    // One slice per decoder layer (attention, MoE or dense MLP), holding its
    // spans and GMM events: the trace's layer level.
    auto layer = profile(profiler, "layer/fwd", OpKind::kSpan);
    layer.arg("layer", static_cast<int64_t>(index));
    if (block.attention) {
      auto span = profile(profiler, "attention", OpKind::kSpan);
      forward_begin(block.attention_unit);
      block.x_in = x;
      block.attention_normed.resize(activations);
      block.attention_inv_rms.resize(static_cast<size_t>(tokens));
      block.attention_out.resize(activations);
      {
        auto scope = profile(profiler, "attention/norm", OpKind::kAttention);
        rmsnorm_forward(x.data(), block.attention_norm_scale.value.data(), tokens, d,
                        block.attention_normed.data(), block.attention_inv_rms.data());
      }
      block.attention->forward(block.attention_normed.data(), tokens / seq, seq,
                               block.attention_out.data());
      forward_end(block.attention_unit);
      auto scope = profile(profiler, "residual", OpKind::kGlue);
      for (size_t i = 0; i < activations; ++i) x[i] += block.attention_out[i];
    }
    forward_begin(block.ffn_unit);
    block.x_mid = x;
    block.normed.resize(activations);
    block.inv_rms.resize(static_cast<size_t>(tokens));
    block.ffn_out.resize(activations);
    {
      auto scope = profile(profiler, "rmsnorm", OpKind::kGlue);
      rmsnorm_forward(x.data(), block.norm_scale.value.data(), tokens, d, block.normed.data(),
                      block.inv_rms.data());
    }
    auto span = profile(profiler, block.dense ? "mlp" : "moe", OpKind::kSpan);
    if (block.dense) {
      block.dense->forward(block.normed.data(), tokens, block.ffn_out.data());
    } else {
      block.moe->forward(block.normed.data(), tokens, block.ffn_out.data());
      parts.aux_loss += block.moe->routing().load_balance_loss;
    }
    forward_end(block.ffn_unit);
    auto scope = profile(profiler, "residual", OpKind::kGlue);
    for (size_t i = 0; i < activations; ++i) x[i] += block.ffn_out[i];
  }
  // The last unit's forward and backward are one pass (the loss chunks
  // take the output layer's gradients as they go).
  forward_begin(final_unit);
  if (backward) backward_begin(final_unit);
  final_normed.resize(activations);
  final_inv_rms.resize(static_cast<size_t>(tokens));
  {
    auto scope = profile(profiler, "rmsnorm", OpKind::kGlue);
    rmsnorm_forward(x.data(), final_norm.value.data(), tokens, d, final_normed.data(),
                    final_inv_rms.data());
  }
  // Softmax cross-entropy, a mean over the tokens of every rank:
  // dlogits = (softmax - onehot) / global tokens. Computed in chunks of
  // tokens (model_chunk_tokens), so a large vocabulary's logits for the whole
  // batch are never held at once; with backward each chunk's output-layer
  // gradients are taken right away.
  const bool parallel = comm_size(config.comm) > 1;
  int64_t global_tokens = tokens;
  sum_over_ranks(&global_tokens);
  const T denominator = static_cast<T>(global_tokens);
  const int64_t chunk = config.loss_chunk > 0 ? std::min(config.loss_chunk, tokens)
                                             : loss_chunk_tokens(v, tokens);
  logits.resize(static_cast<size_t>(chunk * v));
  dlogits.resize(logits.size());
  if (backward) dfinal.resize(activations);
  if (backward && chunk < tokens) out_proj_grad_part.resize(out_proj.grad.size());
  double loss_sum = 0;
  token_loss.resize(static_cast<size_t>(tokens));
  for (int64_t t0 = 0; t0 < tokens; t0 += chunk) {
    const int64_t rows = std::min(chunk, tokens - t0);
    output.forward(final_normed.data() + t0 * d, rows, out_proj.weight(), logits.data());
    {
      auto scope = profile(profiler, "cross_entropy", OpKind::kGlue);
      // Blocks of tokens, three passes over each while it is in cache, so
      // that the softmax totals can be summed several tokens at a time
      // (each in its serial order: moe/ordered_sums.h). Blocks in parallel
      // only for large vocabularies (under load a parallel region costs more
      // than these loops at small ones: docs/performance.md); the loss is
      // summed after, in token order, so the bits do not depend on the
      // thread count.
      const int64_t block = moe::kOrderedSumChains;
#pragma omp parallel for schedule(static) if (rows * v >= (1 << 22))
      for (int64_t b = 0; b < rows; b += block) {
        const int64_t count = std::min(block, rows - b);
        T peaks[moe::kOrderedSumChains], totals[moe::kOrderedSumChains];
        // Each token's running max in its serial order, the block's tokens
        // interleaved (as ordered_row_sums does for sums).
        const T* zb = logits.data() + b * v;
        for (int64_t j = 0; j < count; ++j) peaks[j] = zb[j * v];
        for (int64_t i = 1; i < v; ++i) {
          for (int64_t j = 0; j < count; ++j) peaks[j] = std::max(peaks[j], zb[j * v + i]);
        }
        for (int64_t t = b; t < b + count; ++t) {
          const T* z = logits.data() + t * v;
          T* dz = dlogits.data() + t * v;  // first the exps of z - peak
          for (int64_t i = 0; i < v; ++i) dz[i] = z[i] - peaks[t - b];
          exp_in_place(dz, v);
        }
        const T* exps = dlogits.data() + b * v;
        moe::ordered_row_sums(
            count, v, [exps, v](int64_t t, int64_t i) { return exps[t * v + i]; }, totals);
        for (int64_t t = b; t < b + count; ++t) {
          const T* z = logits.data() + t * v;
          T* dz = dlogits.data() + t * v;
          const T log_total = std::log(totals[t - b]) + peaks[t - b];
          token_loss[t0 + t] = static_cast<double>(log_total - z[targets[t0 + t]]);
          for (int64_t i = 0; i < v; ++i) dz[i] = z[i] - log_total;
          exp_in_place(dz, v);
          for (int64_t i = 0; i < v; ++i) dz[i] /= denominator;
          dz[targets[t0 + t]] -= T(1) / denominator;
        }
      }
      for (int64_t t = 0; t < rows; ++t) loss_sum += token_loss[t0 + t];
    }
    if (!backward) continue;
    const T* x_rows = final_normed.data() + t0 * d;
    if (chunk == tokens) {
      output.grad_rhs(x_rows, dlogits.data(), rows, out_proj.grad.data());
    } else {
      output.grad_rhs(x_rows, dlogits.data(), rows, out_proj_grad_part.data());
      auto scope = profile(profiler, "output/add_grad", OpKind::kGlue);
      if (t0 == 0) {
        std::copy(out_proj_grad_part.begin(), out_proj_grad_part.end(), out_proj.grad.begin());
      } else {
        for (size_t i = 0; i < out_proj_grad_part.size(); ++i) {
          out_proj.grad[i] += out_proj_grad_part[i];
        }
      }
    }
    output.grad_lhs(dlogits.data(), rows, out_proj.weight(), dfinal.data() + t0 * d);
  }
  sum_over_ranks(&loss_sum);
  parts.cross_entropy = loss_sum / static_cast<double>(global_tokens);
  parts.total = parts.cross_entropy + config.moe.router.load_balance_loss_weight * parts.aux_loss;
  if (!backward) {
    forward_end(final_unit);
    return parts;
  }

  dx.assign(activations, T(0));
  {
    auto scope = profile(profiler, "rmsnorm_bwd", OpKind::kGlue);
    rmsnorm_backward(x.data(), final_norm.value.data(), final_inv_rms.data(), dfinal.data(), tokens,
                     d, dx.data(), final_norm.grad.data());
  }
  backward_end(final_unit);
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
    Block& block = *it;
    auto layer = profile(profiler, "layer/bwd", OpKind::kSpan);
    layer.arg("layer", static_cast<int64_t>(blocks.rend() - it - 1));
    // x_out = x_mid + ffn(norm(x_mid)): dx passes through and gains the branch.
    block.dnormed.assign(activations, T(0));
    backward_begin(block.ffn_unit);
    {
      auto span = profile(profiler, block.dense ? "mlp_bwd" : "moe_bwd", OpKind::kSpan);
      if (block.dense) {
        block.dense->backward(dx.data(), block.dnormed.data());
      } else {
        block.moe->backward(dx.data(), block.dnormed.data());
      }
    }
    {
      auto scope = profile(profiler, "rmsnorm_bwd", OpKind::kGlue);
      rmsnorm_backward(block.x_mid.data(), block.norm_scale.value.data(), block.inv_rms.data(),
                       block.dnormed.data(), tokens, d, dx.data(), block.norm_scale.grad.data());
    }
    backward_end(block.ffn_unit);
    if (!block.attention) continue;
    // x_mid = x_in + attention(norm(x_in)).
    auto span = profile(profiler, "attention_bwd", OpKind::kSpan);
    block.dattention_normed.assign(activations, T(0));
    backward_begin(block.attention_unit);
    block.attention->backward(dx.data(), block.dattention_normed.data());
    auto scope = profile(profiler, "attention/norm_bwd", OpKind::kAttention);
    rmsnorm_backward(block.x_in.data(), block.attention_norm_scale.value.data(),
                     block.attention_inv_rms.data(), block.dattention_normed.data(), tokens, d,
                     dx.data(), block.attention_norm_scale.grad.data());
    backward_end(block.attention_unit);
  }
  backward_begin(0);
  {
    auto scope = profile(profiler, "embed_bwd", OpKind::kGlue);
    std::fill(embed.grad.begin(), embed.grad.end(), T(0));
    for (int64_t t = 0; t < tokens; ++t) {
      T* row = embed.grad.data() + inputs[t] * d;
      const T* g = dx.data() + t * d;
      for (int64_t i = 0; i < d; ++i) row[i] += g[i];
    }
  }
  backward_end(0);
  if (parallel && !config.hooks) sum_shared_gradients();
  return parts;
}

// Every parameter but the expert shards: this rank's share of the gradient
// summed over the ranks, packed into one allreduce.
template <class T>
void Model<T>::Impl::sum_shared_gradients() {
  std::vector<moe::Param<T>*> shared;
  size_t count = 0;
  for (moe::Param<T>* p : Model<T>::params_of(*this)) {
    if (p->expert_sharded || !p->trainable) continue;
    shared.push_back(p);
    count += p->grad.size();
  }
  std::vector<T> packed(count);
  size_t offset = 0;
  for (moe::Param<T>* p : shared) {
    std::copy(p->grad.begin(), p->grad.end(), packed.begin() + static_cast<int64_t>(offset));
    offset += p->grad.size();
  }
  config.comm->allreduce_sum(packed.data(), static_cast<int64_t>(count));
  offset = 0;
  for (moe::Param<T>* p : shared) {
    std::copy_n(packed.begin() + static_cast<int64_t>(offset), p->grad.size(), p->grad.begin());
    offset += p->grad.size();
  }
}

template <class T>
Model<T>::Model(const ModelConfig& config, Profiler* profiler)
    : impl_(std::make_unique<Impl>(config, profiler)) {}
template <class T>
Model<T>::~Model() = default;

template <class T>
void Model<T>::init(uint64_t seed) {
  Impl& m = *impl_;
  moe::init_normal(m.embed, seed, 1.0);
  for (auto& block : m.blocks) {
    if (block.attention) {
      std::fill(block.attention_norm_scale.value.begin(), block.attention_norm_scale.value.end(),
                T(1));
      block.attention->init(seed);
    }
    std::fill(block.norm_scale.value.begin(), block.norm_scale.value.end(), T(1));
    if (block.dense) block.dense->init(seed);
    if (block.moe) block.moe->init(seed);
  }
  std::fill(m.final_norm.value.begin(), m.final_norm.value.end(), T(1));
  moe::init_normal(m.out_proj, seed, 1.0 / std::sqrt(static_cast<double>(m.config.moe.embed_dim)));
}

template <class T>
void Model<T>::set_hooks(ModelHooks* hooks) {
  impl_->config.hooks = hooks;
}

template <class T>
LossParts Model<T>::loss(const int32_t* inputs, const int32_t* targets, int64_t tokens) {
  return impl_->run(inputs, targets, tokens, false);
}

template <class T>
LossParts Model<T>::loss_and_grad(const int32_t* inputs, const int32_t* targets, int64_t tokens) {
  return impl_->run(inputs, targets, tokens, true);
}

template <class T>
std::vector<moe::Param<T>*> Model<T>::params() {
  return params_of(*impl_);
}

template <class T>
std::vector<moe::Param<T>*> Model<T>::params_of(Impl& m) {
  std::vector<moe::Param<T>*> out = {&m.embed};
  for (auto& block : m.blocks) {
    if (block.attention) {
      out.push_back(&block.attention_norm_scale);
      auto attention = block.attention->params();
      out.insert(out.end(), attention.begin(), attention.end());
    }
    out.push_back(&block.norm_scale);
    auto inner = block.dense ? block.dense->params() : block.moe->params();
    out.insert(out.end(), inner.begin(), inner.end());
  }
  out.push_back(&m.final_norm);
  out.push_back(&m.out_proj);
  return out;
}

template <class T>
std::vector<std::vector<moe::Param<T>*>> Model<T>::units() {
  return units_of(*impl_);
}

template <class T>
std::vector<std::vector<moe::Param<T>*>> Model<T>::units_of(Impl& m) {
  std::vector<std::vector<moe::Param<T>*>> out = {{&m.embed}};
  for (auto& block : m.blocks) {
    if (block.attention) {
      std::vector<moe::Param<T>*> unit = {&block.attention_norm_scale};
      auto attention = block.attention->params();
      unit.insert(unit.end(), attention.begin(), attention.end());
      out.push_back(std::move(unit));
    }
    std::vector<moe::Param<T>*> unit = {&block.norm_scale};
    auto inner = block.dense ? block.dense->params() : block.moe->params();
    unit.insert(unit.end(), inner.begin(), inner.end());
    out.push_back(std::move(unit));
  }
  out.push_back({&m.final_norm, &m.out_proj});
  return out;
}

template <class T>
const std::vector<double>& Model<T>::token_losses() const {
  return impl_->token_loss;
}

template <class T>
std::vector<moe::MoeLayer<T>*> Model<T>::moe_layers() {
  std::vector<moe::MoeLayer<T>*> out;
  for (auto& block : impl_->blocks) {
    if (block.moe) out.push_back(&*block.moe);
  }
  return out;
}

template class Model<float>;
template class Model<double>;

}  // namespace raggemm::train
