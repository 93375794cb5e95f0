// SGD and AdamW over the model's parameters, with f32 master weights when
// the model's weights are bf16 (weight_dtype=bf16): the update runs on the
// master copy and the model sees it rounded to bf16. Non-trainable params
// (the routing selection bias) are left alone.
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
