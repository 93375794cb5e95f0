// The CPU backend's tuning candidates (docs/tiling.md, "The autotuner"):
// powers of two and divisors of each kernel axis, aligned to the
// microkernel's MR/NR, around the heuristic's tiles; then the best values
// of each axis combined; then both kernel generations and input buffer
// counts 1..4 on the best tiles.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/backend.h"

namespace raggemm::backends::cpu {

// Round `round` of the search for `shape` (see Backend::candidates).
std::vector<TuneCandidate> tuning_candidates(const GmmShape& shape, const kernels::MachineModel& machine,
                                             int round, const Measurements& measured);

// The candidate values of one kernel axis: powers of two and divisors of
// `extent` that are multiples of `align`, plus `extra`, within a factor
// `spread` of `center`, at most `limit` of them nearest to `center`.
std::vector<int64_t> axis_candidates(int64_t extent, int64_t align, int64_t center,
                                     const std::vector<int64_t>& extra, double spread, size_t limit);

}  // namespace raggemm::backends::cpu
