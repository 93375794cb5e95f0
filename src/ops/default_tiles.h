// Tiles an op uses for fields the caller left at 0.
#pragma once

#include <cstdint>

#include "raggemm/gmm.h"

namespace raggemm::ops {

enum class OpKind { kGmm, kTgmm };

// Fills the unset (zero) fields of `requested`. Depends only on the problem
// shape (never on the thread count), so results stay thread-independent.
Tiles fill_default_tiles(Tiles requested, OpKind op, int64_t m, int64_t k, int64_t n,
                         int64_t groups);

}  // namespace raggemm::ops
