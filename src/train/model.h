// The model the trainer trains: token embedding, decoder blocks of
// [RMSNorm, MoE (routed + shared) or dense MLP, residual], final RMSNorm,
// output projection, mean next-token cross-entropy (+ weighted load-balancing
// losses). A template over the scalar: double runs every matmul naively and
// is the finite-difference oracle of the model test.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "raggemm/comm.h"
#include "raggemm/moe.h"
#include "raggemm/profiler.h"

namespace raggemm::train {

struct ModelConfig {
  int64_t vocab_size = 0;
  int64_t num_layers = 0;
  int64_t dense_layers = 0;  // the first dense_layers blocks use a dense MLP
  moe::MoeConfig moe;        // embed_dim, mlp_dim, routing, matmul settings
  // Expert parallelism (P > 1 ranks; null = one process): the MoE layers
  // shard their experts; losses are means over every rank's tokens and
  // loss_and_grad returns the global batch's gradient on every rank (shared
  // parameters' shares summed over the ranks, expert shards complete).
  Communicator* comm = nullptr;
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
  // Forward only.
  LossParts loss(const int32_t* inputs, const int32_t* targets, int64_t tokens);
  // Forward and backward: every parameter's grad is overwritten.
  LossParts loss_and_grad(const int32_t* inputs, const int32_t* targets, int64_t tokens);
  std::vector<moe::Param<T>*> params();
  // The MoE layers, for routing statistics and the selection-bias update.
  std::vector<moe::MoeLayer<T>*> moe_layers();

 private:
  struct Impl;
  static std::vector<moe::Param<T>*> params_of(Impl& impl);
  std::unique_ptr<Impl> impl_;
};

extern template class Model<float>;
extern template class Model<double>;

}  // namespace raggemm::train
