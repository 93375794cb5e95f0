#include "ops/default_tiles.h"

#include <algorithm>

namespace raggemm::ops {

Tiles fill_default_tiles(Tiles requested, OpKind op, int64_t m, int64_t k, int64_t n,
                         int64_t groups) {
  (void)groups;
  (void)op;
  // Measured on this machine's AVX-512 microkernel (12 x 32): a 256-deep
  // k-slice keeps the B micro-panel (32 KiB) in L1; a 192 x 256 A block and a
  // 256 x 256 B block share the 1 MiB L2.
  Tiles t = requested;
  if (t.m == 0) t.m = 192;
  if (t.k == 0) t.k = 256;
  if (t.n == 0) t.n = 256;
  // Never larger than the dims (at least 1): no workspace for nothing.
  t.m = std::max<int64_t>(1, std::min(t.m, std::max<int64_t>(m, 1)));
  t.k = std::max<int64_t>(1, std::min(t.k, std::max<int64_t>(k, 1)));
  t.n = std::max<int64_t>(1, std::min(t.n, std::max<int64_t>(n, 1)));
  return t;
}

}  // namespace raggemm::ops
