// What a training run will hold, estimated from the resolved config before
// anything is allocated, so that a config that cannot fit is refused with
// the numbers and the keys that shrink it instead of dying in the allocator
// (or swapping) minutes later.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "raggemm/train.h"

namespace raggemm::train {

struct MemoryEstimate {
  int64_t parameters = 0;        // this process's parameter count
  double parameter_bytes = 0;    // values and gradients
  double optimizer_bytes = 0;    // AdamW moments, f32 masters of bf16 weights
  double activation_bytes = 0;   // what forward keeps for backward, all layers
  double workspace_bytes = 0;    // loss chunk, per-layer scratch, packed panels
  double total_bytes() const {
    return parameter_bytes + optimizer_bytes + activation_bytes + workspace_bytes;
  }
  // The keys whose reduction shrinks the estimate most, largest first.
  std::vector<std::string> shrinking_keys;
};

MemoryEstimate estimate_memory(const TrainConfig& config);

// Throws Error (key "memory") naming the estimate, the machine's memory and
// the keys that shrink it when the estimate exceeds `available` bytes.
void check_memory(const TrainConfig& config, double available);

}  // namespace raggemm::train
