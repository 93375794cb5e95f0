// The model the trainer trains: token embedding, decoder blocks of
// [RMSNorm, causal self-attention, residual, RMSNorm, MoE (routed + shared)
// or dense MLP, residual] (attention optional), final RMSNorm,
// output projection, mean next-token cross-entropy (+ weighted load-balancing
// losses). A template over the scalar: double runs every matmul naively and
// is the finite-difference oracle of the model test.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "model/attention.h"
#include "raggemm/comm.h"
#include "raggemm/moe.h"
#include "raggemm/profiler.h"
#include "raggemm/train.h"

namespace raggemm::train {

// Called by the model around each unit of parameters (Model::units()):
// FSDP gathers a unit's weights just before it runs and reduce-scatters its
// gradients right after its backward (src/train/fsdp.h).
class ModelHooks {
 public:
  virtual ~ModelHooks() = default;
  virtual void forward_begin(size_t unit) = 0;
  virtual void forward_end(size_t unit) = 0;
  virtual void backward_begin(size_t unit) = 0;
  virtual void backward_end(size_t unit) = 0;
};

struct ModelConfig {
  int64_t vocab_size = 0;
  int64_t num_layers = 0;
  int64_t dense_layers = 0;  // the first dense_layers blocks use a dense MLP
  moe::MoeConfig moe;        // embed_dim, mlp_dim, routing, matmul settings
  // Hidden size of the dense layers (base_mlp_dim); moe.mlp_dim is the
  // experts' (base_moe_mlp_dim). 0: moe.mlp_dim.
  int64_t dense_mlp_dim = 0;
  // Self-attention in every block; unset: blocks without attention.
  std::optional<model::AttentionConfig> attention;
  // Tokens per sequence: a call's tokens are whole sequences of this length
  // one after another (attention sees only its own sequence). 0: one
  // sequence of all the call's tokens.
  int64_t seq_len = 0;
  // Tokens per chunk of the loss (tests); 0: loss_chunk_tokens().
  int64_t loss_chunk = 0;
  // The expert axis (P > 1 ranks; null = one process): the MoE layers
  // shard their experts; losses are means over every rank's tokens and
  // loss_and_grad returns the global batch's gradient on every rank (shared
  // parameters' shares summed over the ranks, expert shards complete).
  Communicator* comm = nullptr;
  // The other mesh axes whose ranks hold other tokens (data, fsdp; null
  // entries skipped): token counts, losses and routing statistics are summed
  // over them too. With them, gradients are this rank's shares: `hooks`
  // (or the caller) reduces them.
  std::vector<Communicator*> batch_comms;
  // Not owned. Set: called around every unit, and the model leaves every
  // gradient reduction to them.
  ModelHooks* hooks = nullptr;
};

struct LossParts {
  double cross_entropy = 0;  // mean over tokens, nats
  double aux_loss = 0;       // load-balancing losses summed over MoE layers, unweighted
  double total = 0;          // cross_entropy + weight * aux_loss
};

template <class T>
class Model {
 public:
  Model(const ModelConfig& config, Profiler* profiler);
  ~Model();
  void init(uint64_t seed);
  // Replaces config.hooks (they need the initialised units to exist).
  void set_hooks(ModelHooks* hooks);
  // Forward only.
  LossParts loss(const int32_t* inputs, const int32_t* targets, int64_t tokens);
  // Forward and backward: every parameter's grad is overwritten.
  LossParts loss_and_grad(const int32_t* inputs, const int32_t* targets, int64_t tokens);
  std::vector<moe::Param<T>*> params();
  // The parameters in the order the forward uses them, grouped by unit:
  // the embedding, then per block [attention norm + attention] (when
  // present) and [norm + MLP or MoE layer], then [final norm + output].
  // Backward runs the units in reverse (the last unit's forward and
  // backward are one: the loss). params() is their concatenation.
  std::vector<std::vector<moe::Param<T>*>> units();
  // Each token's cross-entropy (nats) from the last loss call, this rank's.
  const std::vector<double>& token_losses() const;
  // The MoE layers, for routing statistics and the selection-bias update.
  std::vector<moe::MoeLayer<T>*> moe_layers();

 private:
  struct Impl;
  static std::vector<moe::Param<T>*> params_of(Impl& impl);
  static std::vector<std::vector<moe::Param<T>*>> units_of(Impl& impl);
  std::unique_ptr<Impl> impl_;
};

// The loss is computed over chunks of tokens whose logits take at most
// kLossChunkFloats floats (64 MiB; a 256-token vocabulary: 65536 tokens, one
// chunk for any batch here; deepseek3's 129280: 129 tokens).
inline constexpr int64_t kLossChunkFloats = int64_t{1} << 24;
int64_t loss_chunk_tokens(int64_t vocab, int64_t tokens);

// The model of a resolved config (the trainer's, and tests'): dimensions,
// matmul settings, attention, sequence length; `comm` for expert parallelism.
ModelConfig model_config(const TrainConfig& config, Communicator* comm = nullptr);

// The attention of a resolved config (attention_type=none: unset).
std::optional<model::AttentionConfig> attention_config(const TrainConfig& config);

extern template class Model<float>;
extern template class Model<double>;

}  // namespace raggemm::train
