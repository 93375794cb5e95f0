// v1 gmm, megablox-style (DESIGN.md s.3): m-tiles are laid over the global
// row space [0, M); a metadata table lists, for each m-tile, the groups whose
// rows it touches (one "visit" per (m-tile, group)). A visit multiplies the
// whole m-tile by that group's rhs into an accumulator tile and then stores
// only the rows the group owns (the row mask), so a tile that straddles a
// group boundary is computed once per group it touches. It runs on the gmm
// driver (gmm_driver.h) as the f32 configuration with v1's items: one per
// (visit, n-tile), the item's rows the whole m-tile, its output stage the
// row mask (then the SwiGLU stage on those rows). Visits of one m-tile
// store disjoint rows, so they run in parallel like any other items.
#include <algorithm>

#include "kernels/f32_gmm_policy.h"
#include "kernels/gmm_driver.h"
#include "kernels/gmm_kernel.h"
#include "kernels/swiglu_stage.h"
#include "kernels/v1_metadata.h"

namespace raggemm::kernels {
namespace {

// The f32 configuration with v1's tiles: B packed whole per K-block (no
// chunks), every item accumulating in its own block, and only the rows its
// group owns stored.
struct V1Policy : F32GmmPolicy {
  using F32GmmPolicy::F32GmmPolicy;

  int64_t chunk_cols(const GroupItem& item) const { return item.cols(); }
  int64_t acc_ld(const GroupItem& item) const { return item.cols(); }

  void finish(const GroupItem& item, int64_t c0, int64_t cols, float* acc, int64_t ldc) const {
    const int64_t rows = item.rows();
    if (k == 0) std::fill(acc, acc + rows * ldc, 0.0f);  // empty contraction: zero
    // Row mask: the tile's rows that the item's group owns.
    const int64_t begin = std::max(item.row_begin, p.starts[p.group_offset + item.group]);
    const int64_t end = std::min(item.row_end, p.starts[p.group_offset + item.group + 1]);
    out.store(begin, c0, acc + (begin - item.row_begin) * ldc, ldc, end - begin, cols);
    apply_swiglu_stage(p, begin, end - begin, c0, cols);
  }
};

}  // namespace

void gmm_v1(const GmmProblem& p, const Schedule& s) {
  const Tiles& t = s.tiles;
  const Microkernel uk = select_microkernel();
  const V1Metadata meta = build_v1_metadata(p.starts, p.group_offset, p.local_groups, p.m, t.m);
  const int64_t n = p.n;  // v1 has no output stage: out cols == n
  GroupItems work;
  for (const V1Visit& visit : meta.visits) {
    const int64_t r0 = visit.tile * t.m;
    for (int64_t c0 = 0; c0 < n; c0 += t.n) {
      const GroupItem item{visit.group, r0, std::min(r0 + t.m, p.m), c0, std::min(c0 + t.n, n)};
      work.items.push_back(item);
      work.costs.push_back(item.rows() * item.cols());
    }
  }
  // Rows no visit stores: those past (or before) the local groups.
  zero_uncovered_rows(p.starts, p.group_offset, p.local_groups, p.m, p.output(), n);
  zero_swiglu_stage_uncovered(p);
  run_driver_items(V1Policy(p, s, uk, /*chunk_cols=*/n), work, s.threads);
}

}  // namespace raggemm::kernels
