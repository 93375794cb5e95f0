// The tile heuristic: kernel tiles from the cache sizes and the microkernel's
// register tile, the m (or, for tgmm, k) tile from the group sizes, and the
// kernel version (v2, measured faster everywhere; an explicit v1 gets tiles
// that weigh the rows it would waste). Rules: docs/tiling.md.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "kernels/machine_model.h"
#include "raggemm/problem.h"

namespace raggemm::backends::cpu {

// Everything the heuristic depends on (kernels/machine_model.h), so tests
// can pin it: caches, the L3's sharers, the cache line, the microkernel's
// register tile, threads.
using kernels::MachineModel;

// This machine: kernels::this_machine_model(threads) (0: OpenMP's maximum).
MachineModel this_machine(int threads = 0);

// The group sizes to reason about: the shape's own, or `groups` balanced
// groups of m / groups rows (remainder spread over the first ones).
std::vector<int64_t> representative_group_sizes(const GmmShape& shape);

// Fraction of extra rows v1 computes when it lays `tile`-row tiles over the
// global row space: each tile that straddles a group boundary is visited once
// per group it touches (masked), so its whole height is paid again.
double v1_row_waste(const std::vector<int64_t>& group_sizes, int64_t tile);

// `kernel`, when given, is the generation that will run (an explicit
// setting): the tiles are then chosen for it instead of the heuristic's own
// pick (v1 and v2 split the work into different items and waste differently).
TuneCandidate heuristic(const GmmShape& shape, const MachineModel& machine,
                        std::optional<KernelVersion> kernel = std::nullopt);

}  // namespace raggemm::backends::cpu
