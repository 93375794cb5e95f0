// FSDP, ZeRO-3 style (docs/parallelism.md): every trainable parameter that
// is not an expert shard lives on its rank as 1/F of its flat values
// (padded to a multiple of F), with its optimizer state; the full tensor
// exists only while its unit of the model runs. The model calls the hooks:
//
//   forward_begin(u)   all-gather unit u (or wait for its prefetch), and
//                      start the all-gather of unit u+1 (MPI_Iallgather),
//                      so it travels while unit u computes;
//   forward_end(u)     drop unit u's full values (unless keep_gathered);
//   backward_begin(u)  gather unit u again (prefetched by unit u+1's
//                      backward), allocate its gradients, prefetch u-1;
//   backward_end(u)    reduce-scatter unit u's gradients over fsdp into the
//                      shards' gradients; drop the full values and grads.
//
// finish_gradients() then sums what the other axes hold in part: shard and
// whole non-expert gradients over data and expert, expert shards' over data
// and fsdp (each rank's backward yields its share of the global batch's
// gradient, so sums, not means). Expert weights stay whole on their expert
// rank when ep > 1; with ep = 1 they are ordinary parameters and sharded.
// With fsdp = 1 nothing is sharded and the hooks do nothing.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "raggemm/comm.h"
#include "raggemm/mesh.h"
#include "raggemm/moe.h"
#include "train/model.h"

namespace raggemm::train {

// A routed expert's weight (`<layer>.moe.wi`, `wi_0`, `wi_1`, `wo`; not the
// shared experts'): what the memory report counts as expert weights.
bool is_expert_weight(const std::string& name);

class ShardedParams final : public ModelHooks {
 public:
  // units: Model::units(), already initialised (every rank alike). Takes
  // this rank's shards and frees the full tensors of the sharded ones.
  ShardedParams(std::vector<std::vector<moe::Param<float>*>> units, const Mesh& mesh,
                bool keep_gathered);
  ~ShardedParams() override;

  // What the optimizer updates and checkpoints hold: the shards (named as
  // their parameters) and every whole parameter, trainable or not.
  std::vector<moe::Param<float>*> local_params();

  void forward_begin(size_t unit) override;
  void forward_end(size_t unit) override;
  void backward_begin(size_t unit) override;
  void backward_end(size_t unit) override;
  // After loss_and_grad: the reductions over the data and expert axes (and
  // fsdp for whole expert weights).
  void finish_gradients();
  // After the optimizer: gathered copies are stale (keep_gathered).
  void release_all();

  // Parameter name -> its unpadded size, for the fsdp-sharded ones.
  std::map<std::string, int64_t> sharded_sizes() const;
  // Names of the expert shards (split over the expert axis).
  std::vector<std::string> expert_params() const;
  // Full tensors, gathered over fsdp (every fsdp rank must call): the
  // values, or the gradients after finish_gradients. Expert shards are
  // this rank's slice.
  std::map<std::string, std::vector<float>> full_values();
  std::map<std::string, std::vector<float>> full_gradients();

  // Bytes this rank holds now (vector capacities): values of every
  // non-expert parameter (shards and any gathered full copies), and of the
  // routed experts' weights (is_expert_weight, sharded or not).
  int64_t non_expert_value_bytes() const;
  int64_t expert_value_bytes() const;

  // Unit gathers so far, and how many of them had been started ahead (by
  // the neighbouring unit's hook) when the unit needed them.
  struct GatherCounts {
    int64_t total = 0, prefetched = 0;
  };
  GatherCounts gather_counts() const { return counts_; }

 private:
  struct Slot {
    moe::Param<float>* full;
    moe::Param<float>* shard;
    int64_t size = 0;    // unpadded elements
    int64_t chunk = 0;   // elements per rank (padded size / F)
    int64_t offset = 0;  // within the unit's packed chunk
  };
  struct Unit {
    std::vector<Slot> slots;
    int64_t chunk = 0;  // sum of the slots' chunks
    bool present = true;
    std::vector<float> send, gathered;
    std::unique_ptr<CommRequest> pending;
  };
  void start_gather(size_t unit);
  void finish_gather(size_t unit);
  void ensure_present(size_t unit);
  void release(size_t unit);
  std::map<std::string, std::vector<float>> gather_full(bool gradients);

  const Mesh& mesh_;
  Communicator* fsdp_;
  int64_t ranks_ = 1, rank_ = 0;
  bool keep_gathered_;
  std::vector<std::vector<moe::Param<float>*>> model_units_;
  std::vector<Unit> units_;
  std::deque<moe::Param<float>> shards_;
  GatherCounts counts_;
};

}  // namespace raggemm::train
