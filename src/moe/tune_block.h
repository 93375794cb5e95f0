// Tuning the six (weight, pass) grouped matmuls of one MoE block into the
// tune cache: the work of `raggemm tune` and of raggemm.tune() in Python.
// Pairs that are the same op problem (wi fwd and wo fwd when embed == mlp)
// are tuned once; the budget is shared out over the distinct problems.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "raggemm/moe_plan.h"
#include "tune/autotune.h"

namespace raggemm::tune {

struct BlockTuneOptions {
  double budget_s = 60.0;       // for the whole block
  int threads = 0;              // 0: OpenMP's default
  std::ostream* log = nullptr;  // the tuner's progress lines, if set
  // Called before a distinct problem is tuned, with its share of the budget.
  std::function<void(Weight, Pass, const GmmShape&, double budget_s)> on_start;
};

struct BlockTuneRow {
  Weight weight;
  Pass pass;
  GmmShape shape;
  TuneResult result;
  // The (weight, pass) whose problem this is, when tuned once for both;
  // equal to (weight, pass) otherwise.
  Weight tuned_as_weight;
  Pass tuned_as_pass;
};

struct BlockTuneReport {
  std::vector<BlockTuneRow> rows;  // (weight, pass) order: wi fwd .. wo drhs
  size_t distinct = 0;
  double seconds = 0;
};

// Tunes every (weight, pass) of a block with `dims`, `groups` experts and
// `group_sizes` (empty: balanced) and stores each winner in `cache`.
BlockTuneReport tune_block(const ModelDims& dims, int64_t groups,
                           const std::vector<int32_t>& group_sizes, DType dtype, TuneCache& cache,
                           const BlockTuneOptions& options);

}  // namespace raggemm::tune
