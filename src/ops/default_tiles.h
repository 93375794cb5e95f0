// Tiles an op uses when the caller left them unset: the tune heuristic
// (src/tune/heuristic.cc, docs/tiling.md) on the call's own group sizes.
#pragma once

#include <cstdint>
#include <vector>

#include "raggemm/gmm.h"

namespace raggemm::ops {

// gmm with rhs as stored, gmm with transposed rhs (dlhs), tgmm.
enum class OpKind { kGmm, kGmmTransposedRhs, kTgmm };

inline OpKind gmm_kind(bool transpose_rhs) {
  return transpose_rhs ? OpKind::kGmmTransposedRhs : OpKind::kGmm;
}

// Fills the unset (zero) fields of `requested` for a problem in kernel terms
// (gmm: m rows, k contracted, n output columns; tgmm: m = K, k = tokens,
// n = N) whose local groups are rows starts[offset + g] .. starts[offset + g
// + 1], run by `kernel`. The thread count may change only the n tile, which never changes a
// value, so results stay independent of the thread count.
Tiles fill_default_tiles(Tiles requested, OpKind op, int64_t m, int64_t k, int64_t n,
                         const std::vector<int64_t>& starts, int64_t group_offset,
                         int64_t local_groups, KernelVersion kernel, int threads);

}  // namespace raggemm::ops
