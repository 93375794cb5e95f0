#include "ops/default_tiles.h"

#include <algorithm>

#include "tune/heuristic.h"

namespace raggemm::ops {

Tiles fill_default_tiles(Tiles requested, OpKind op, int64_t m, int64_t k, int64_t n,
                         const std::vector<int64_t>& starts, int64_t group_offset,
                         int64_t local_groups, KernelVersion kernel, int threads) {
  if (requested.m > 0 && requested.k > 0 && requested.n > 0) return requested;
  GmmShape shape;
  const bool tgmm = op == OpKind::kTgmm;
  shape.pass = tgmm ? Pass::kGradRhs
                    : op == OpKind::kGmmTransposedRhs ? Pass::kGradLhs : Pass::kForward;
  // GmmShape is in op terms: tgmm's tokens are its m, its K its k.
  shape.m = tgmm ? k : m;
  shape.k = tgmm ? m : k;
  shape.n = n;
  shape.groups = local_groups;
  for (int64_t g = 0; g < local_groups; ++g) {
    shape.group_sizes.push_back(
        static_cast<int32_t>(starts[group_offset + g + 1] - starts[group_offset + g]));
  }
  const Tiles heuristic = tune::heuristic(shape, tune::this_machine(std::max(1, threads)), kernel).tiles;
  Tiles t = requested;
  if (t.m == 0) t.m = heuristic.m;
  if (t.k == 0) t.k = heuristic.k;
  if (t.n == 0) t.n = heuristic.n;
  // Never larger than the dims (at least 1): no workspace for nothing.
  t.m = std::max<int64_t>(1, std::min(t.m, std::max<int64_t>(m, 1)));
  t.k = std::max<int64_t>(1, std::min(t.k, std::max<int64_t>(k, 1)));
  t.n = std::max<int64_t>(1, std::min(t.n, std::max<int64_t>(n, 1)));
  return t;
}

}  // namespace raggemm::ops
