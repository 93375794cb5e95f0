// SGD and AdamW over the model's parameters. With weight_dtype=bf16 every
// matrix parameter (bf16_weight) is switched to bf16 storage when the
// optimizer is built: the optimizer keeps its f32 master copy, the update
// runs on the master and writes the rounded bf16 value in the same pass.
// Norm scales stay f32 and are updated in place. Non-trainable params (the
// routing selection bias) are left alone.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "raggemm/moe.h"
#include "raggemm/train.h"

namespace raggemm::train {

class Optimizer {
 public:
  Optimizer(const TrainConfig& config, std::vector<moe::Param<float>*> params);
  // One update with learning rate `lr`.
  void step(double lr);
  // Learning rate of 1-based step `step`: linear warmup, then cosine decay.
  static double learning_rate(const TrainConfig& config, int64_t step);

  // Checkpointed state, by name: "master/<param>", "adam_m/<param>",
  // "adam_v/<param>" (and the step count).
  std::map<std::string, std::vector<float>*> state();
  int64_t& update_count() { return updates_; }
  // After loading a checkpoint: the model's weights from the masters.
  void sync_weights();
  // Whether weight_dtype=bf16 stores `param` as bf16: trainable matrices
  // (rank >= 2: embedding, projections, router, experts, output), not norm
  // scales or the selection bias.
  static bool bf16_weight(const moe::Param<float>& param);

 private:
  struct Slot {
    moe::Param<float>* param;
    std::vector<float> master, m, v;
  };
  TrainConfig config_;
  bool bf16_weights_;
  std::vector<Slot> slots_;
  int64_t updates_ = 0;
};

}  // namespace raggemm::train
