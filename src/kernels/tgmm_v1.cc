// v1 tgmm, megablox-style: token tiles of tiles.k rows are laid over the
// global row space; the v1 metadata lists (token tile, group) visits in row
// order. Each output tile (K-tile, N-tile) walks every visit in order: the lhs
// tile is packed with the rows of other groups masked to zero, multiplied
// into an accumulator, and the accumulator is written to out[g] when the
// visits move on to the next group (f32 or bf16, overwritten or accumulated
// into: kernels/output_store.h). Groups with no visit are zero, or left as
// they are when accumulating.
#include <algorithm>
#include <cstring>

#include "kernels/gmm_kernel.h"
#include "kernels/macro_kernel.h"
#include "kernels/pack.h"
#include "kernels/parallel.h"
#include "kernels/tgmm_driver.h"
#include "kernels/v1_metadata.h"
#include "kernels/workspace.h"

namespace raggemm::kernels {

void tgmm_v1(const TgmmProblem& p, const Schedule& s) {
  const Tiles& t = s.tiles;
  const Microkernel uk = select_microkernel();
  const V1Metadata meta = build_v1_metadata(p.starts, p.group_offset, p.local_groups, p.m, t.k);
  // Items are the output tiles of one group; every group's tile at the same
  // (K-tile, N-tile) position is handled by the same item.
  TgmmTiling tiling = tgmm_tiling(p, t);
  tiling.groups = 1;
  const int64_t items = p.local_groups > 0 ? tiling.items() : 0;
  std::vector<int64_t> costs(static_cast<size_t>(items), 1);
  const int depth = s.input_buffer_count - 1;
  parallel_items(costs, s.threads, [&](int64_t item) {
    const TgmmTile tile = tiling.tile(item);
    const OutputView out = p.output();
    for (int64_t g = 0; g < p.local_groups; ++g) {
      out.zero(g * p.k + tile.row0, tile.col0, tile.rows, tile.cols);  // none when accumulating
    }
    float* packed_a = workspace(Slot::kPackedA, packed_size(t.m, t.k, uk.mr));
    float* packed_b = workspace(Slot::kPackedB, packed_size(t.n, t.k, uk.nr));
    float* acc = workspace(Slot::kAccumulator, t.m * t.n);
    const int64_t visits = static_cast<int64_t>(meta.visits.size());
    for (int64_t v = 0; v < visits; ++v) {
      const V1Visit& visit = meta.visits[v];
      const int64_t t0 = visit.tile * t.k;
      const int64_t kc = std::min(t.k, p.m - t0);
      const bool first = v == 0 || meta.visits[v - 1].group != visit.group;
      pack_a_transposed(p.lhs, t0, kc, tile.row0, tile.rows, visit.row_begin, visit.row_end,
                        uk.mr, packed_a);
      pack_b(p.dout, false, t0, kc, tile.col0, tile.cols, uk.nr, packed_b);
      macro_kernel(uk, kc, packed_a, tile.rows, packed_b, tile.cols, acc, t.n, !first, depth);
      const bool last = v + 1 == visits || meta.visits[v + 1].group != visit.group;
      if (last) {
        const float* scale = p.out_group_scale ? p.out_group_scale + visit.group : nullptr;
        out.store(visit.group * p.k + tile.row0, tile.col0, acc, t.n, tile.rows, tile.cols,
                  scale);
      }
    }
  });
}

}  // namespace raggemm::kernels
