// v1 gmm, megablox-style (DESIGN.md s.3): m-tiles are laid over the global
// row space [0, M); a metadata table lists, for each m-tile, the groups whose
// rows it touches (one "visit" per (m-tile, group)). A visit multiplies the
// whole m-tile by that group's rhs into an accumulator tile and then stores
// only the rows the group owns (the row mask), so a tile that straddles a
// group boundary is computed once per group it touches. Work items are output
// tiles (m-tile, n-tile); each runs its visits in order.
#include <algorithm>
#include <cstring>

#include "kernels/gmm_kernel.h"
#include "kernels/macro_kernel.h"
#include "kernels/pack.h"
#include "kernels/parallel.h"
#include "kernels/v1_metadata.h"
#include "kernels/workspace.h"

namespace raggemm::kernels {

void gmm_v1(const GmmProblem& p, const Schedule& s) {
  const Tiles& t = s.tiles;
  const Microkernel uk = select_microkernel();
  const V1Metadata meta = build_v1_metadata(p.starts, p.group_offset, p.local_groups, p.m, t.m);
  const int64_t n = p.n;  // v1 has no output stage: out cols == n
  const int64_t n_tiles = (n + t.n - 1) / t.n;
  std::vector<int64_t> costs(static_cast<size_t>(meta.m_tiles * n_tiles));
  for (int64_t mt = 0; mt < meta.m_tiles; ++mt) {
    const int64_t visits = meta.tile_visit_begin[mt + 1] - meta.tile_visit_begin[mt];
    for (int64_t nt = 0; nt < n_tiles; ++nt) costs[mt * n_tiles + nt] = std::max<int64_t>(visits, 1);
  }
  const int depth = s.input_buffer_count - 1;
  parallel_items(costs, s.threads, [&](int64_t item) {
    const int64_t mt = item / n_tiles;
    const int64_t c0 = (item % n_tiles) * t.n;
    const int64_t width = std::min(t.n, n - c0);
    const int64_t r0 = mt * t.m;
    const int64_t rows = std::min(t.m, p.m - r0);
    // Rows of this tile that no visit stores stay zero (rows past the groups).
    const OutputView out = p.output();
    out.zero(r0, c0, rows, width);
    float* packed_a = workspace(Slot::kPackedA, packed_size(t.m, t.k, uk.mr));
    float* packed_b = workspace(Slot::kPackedB, packed_size(width, t.k, uk.nr));
    float* acc = workspace(Slot::kAccumulator, t.m * t.n);
    for (int64_t v = meta.tile_visit_begin[mt]; v < meta.tile_visit_begin[mt + 1]; ++v) {
      const V1Visit& visit = meta.visits[v];
      const Operand rhs = p.rhs.group(visit.group);
      if (p.k == 0) std::fill(acc, acc + rows * t.n, 0.0f);
      for (int64_t k0 = 0; k0 < p.k; k0 += t.k) {
        const int64_t kc = std::min(t.k, p.k - k0);
        pack_a(p.lhs, r0, rows, k0, kc, uk.mr, packed_a);
        pack_b(rhs, p.transpose_rhs, k0, kc, c0, width, uk.nr, packed_b);
        macro_kernel(uk, kc, packed_a, rows, packed_b, width, acc, t.n, k0 > 0, depth);
      }
      // Row mask: keep only the rows this group owns.
      out.store(visit.row_begin, c0, acc + (visit.row_begin - r0) * t.n, t.n,
                visit.row_end - visit.row_begin, width);
    }
  });
}

}  // namespace raggemm::kernels
