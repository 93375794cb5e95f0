// v2 tgmm, group-aligned: out[g] = lhs[rows g]^T @ dout[rows g]. A work item
// is one output tile (group, K-tile, N-tile); it walks the group's own tokens
// from the group's first row in slices of tiles.k, in order, so the
// reduction over tokens is fixed and independent of the thread count. Empty
// groups produce zero slices (left as they are when accumulating into out).
#include <algorithm>
#include <cstring>

#include <hwy/cache_control.h>

#include "kernels/bf16_gmm.h"
#include "kernels/gmm_kernel.h"
#include "kernels/macro_kernel.h"
#include "kernels/pack.h"
#include "kernels/parallel.h"
#include "kernels/tgmm_common.h"
#include "kernels/workspace.h"

namespace raggemm::kernels {
namespace {

// A tile of a bf16 output, or one accumulated into: the token slices
// accumulate in an f32 tile (or, for an f32 output and a group of one slice,
// straight into out with the microkernel's C + acc), then the store stage
// writes it once.
void run_staged_tile(const TgmmProblem& p, const Schedule& s, const Microkernel& uk,
                     const TgmmTile& tile, int64_t begin, int64_t end, const OutputView& out,
                     int64_t out_row) {
  const Tiles& t = s.tiles;
  const float* scale = p.out_group_scale ? p.out_group_scale + tile.group : nullptr;
  if (end == begin) {
    out.zero(out_row, tile.col0, tile.rows, tile.cols);  // nothing when accumulating
    return;
  }
  float* packed_a = workspace(Slot::kPackedA, packed_size(t.m, t.k, uk.mr));
  float* packed_b = workspace(Slot::kPackedB, packed_size(t.n, t.k, uk.nr));
  const bool in_place = out.f32 && end - begin <= t.k && !scale;  // out = out + acc, one slice
  float* c = in_place ? out.f32_at(out_row, tile.col0)
                      : workspace(Slot::kAccumulator, tile.rows * tile.cols);
  const int64_t ldc = in_place ? p.n : tile.cols;
  const int depth = s.input_buffer_count - 1;
  for (int64_t t0 = begin; t0 < end; t0 += t.k) {
    const int64_t kc = std::min(t.k, end - t0);
    pack_a_transposed(p.lhs, t0, kc, tile.row0, tile.rows, begin, end, uk.mr, packed_a);
    pack_b(p.dout, false, t0, kc, tile.col0, tile.cols, uk.nr, packed_b);
    macro_kernel(uk, kc, packed_a, tile.rows, packed_b, tile.cols, c, ldc,
                 in_place || t0 > begin, depth);
  }
  if (!in_place) out.store(out_row, tile.col0, c, tile.cols, tile.rows, tile.cols, scale);
}

}  // namespace

void tgmm_v2(const TgmmProblem& p, const Schedule& s) {
  // bf16 x bf16 runs on bf16 dot products where the CPU has them.
  if (bf16_dot_fits(p)) {
    if (const Bf16Microkernel* bf16 = select_bf16_microkernel()) {
      bf16_tgmm(p, s, *bf16);
      return;
    }
  }
  const Tiles& t = s.tiles;
  const Microkernel uk = select_microkernel();
  const TgmmTiling tiling = tgmm_tiling(p, t);
  std::vector<int64_t> costs(static_cast<size_t>(tiling.items()));
  for (int64_t item = 0; item < tiling.items(); ++item) {
    const int64_t g = item / tiling.tiles_per_group();
    costs[item] = p.starts[p.group_offset + g + 1] - p.starts[p.group_offset + g];
  }
  const int depth = s.input_buffer_count - 1;
  const OutputView out = p.output();
  parallel_items_two_ended(costs, s.threads, [&](int64_t item) {
    const TgmmTile tile = tiling.tile(item);
    const int64_t begin = p.starts[p.group_offset + tile.group];
    const int64_t end = p.starts[p.group_offset + tile.group + 1];
    const int64_t out_row = tile.group * p.k + tile.row0;
    if (!out.direct()) {
      run_staged_tile(p, s, uk, tile, begin, end, out, out_row);
      return;
    }
    float* c = out.f32_at(out_row, tile.col0);
    if (end == begin) {
      // An empty contraction through the microkernel (kc = 0 stores zeros),
      // streamed along the rows unless the group scale reads the tile back,
      // rather than memset row by row with ordinary stores (about 1.04x at
      // 128 groups, a quarter empty).
      static const float kNoOperand[1] = {};
      const bool stream = !p.out_group_scale;
      macro_kernel(uk, 0, kNoOperand, tile.rows, kNoOperand, tile.cols, c, p.n, false, 0, {},
                   stream);
      if (stream) hwy::FlushStream();
    } else {
      float* packed_a = workspace(Slot::kPackedA, packed_size(t.m, t.k, uk.mr));
      float* packed_b = workspace(Slot::kPackedB, packed_size(t.n, t.k, uk.nr));
      // A group whose tokens fit one slice writes its tile once, final:
      // streaming stores skip reading the [K, N] output lines first (at 128
      // groups the output is 512 MiB, and tgmm was bound by writing it).
      const bool stream = end - begin <= t.k && !p.out_group_scale;
      for (int64_t t0 = begin; t0 < end; t0 += t.k) {
        const int64_t kc = std::min(t.k, end - t0);
        pack_a_transposed(p.lhs, t0, kc, tile.row0, tile.rows, begin, end, uk.mr, packed_a);
        pack_b(p.dout, false, t0, kc, tile.col0, tile.cols, uk.nr, packed_b);
        macro_kernel(uk, kc, packed_a, tile.rows, packed_b, tile.cols, c, p.n, t0 > begin, depth,
                     {}, stream);
      }
      if (stream) hwy::FlushStream();
    }
    scale_tile(p, tile, c);
  });
}

}  // namespace raggemm::kernels
