// v2 tgmm, group-aligned: out[g] = lhs[rows g]^T @ dout[rows g]. A work item
// is one output tile (group, K-tile, N-tile); it walks the group's own tokens
// from the group's first row in slices of tiles.k, in order, so the
// reduction over tokens is fixed and independent of the thread count. Empty
// groups produce zero slices (left as they are when accumulating into out).
#include <algorithm>
#include <cstring>
#include <utility>

#include <hwy/cache_control.h>

#include "kernels/bf16_gmm.h"
#include "kernels/gmm_kernel.h"
#include "kernels/machine_model.h"
#include "kernels/macro_kernel.h"
#include "kernels/pack.h"
#include "kernels/parallel.h"
#include "kernels/tgmm_common.h"
#include "kernels/workspace.h"

namespace raggemm::kernels {
namespace {

// A tile of a bf16 output, or one accumulated into: the f32 microkernel's
// configuration of run_staged_bands (tgmm_common.h).
void run_staged_tile(const TgmmProblem& p, const Schedule& s, const Microkernel& uk,
                     int64_t band_rows, const TgmmTile& tile, int64_t begin, int64_t end,
                     const OutputView& out, int64_t out_row) {
  const Tiles& t = s.tiles;
  const float* scale = p.out_group_scale ? p.out_group_scale + tile.group : nullptr;
  if (end == begin) {
    out.zero(out_row, tile.col0, tile.rows, tile.cols);  // nothing when accumulating
    return;
  }
  const StagedPlan plan =
      plan_staged_tile(out, scale != nullptr, end - begin, t.k, band_rows, tile.rows);
  const int64_t slice_size = packed_size(tile.cols, t.k, uk.nr);
  float* packed_a = workspace(Slot::kPackedA, packed_size(plan.band, t.k, uk.mr));
  float* packed_b = workspace(Slot::kPackedB, (plan.shared_b ? plan.slices : 1) * slice_size);
  const int depth = s.input_buffer_count - 1;
  run_staged_bands(
      plan, out, tile, out_row, scale, begin, end, t.k, p.n,
      [&](int64_t t0, int64_t i) {
        pack_b(p.dout, false, t0, std::min(t.k, end - t0), tile.col0, tile.cols, uk.nr,
               packed_b + i * slice_size);
      },
      [&](int64_t t0, int64_t kc, int64_t i, int64_t r0, int64_t rows, float* c, int64_t ldc,
          bool accumulate) {
        pack_a_transposed(p.lhs, t0, kc, tile.row0 + r0, rows, begin, end, uk.mr, packed_a);
        macro_kernel(uk, kc, packed_a, rows, packed_b + i * slice_size, tile.cols, c, ldc,
                     accumulate, depth);
      });
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
  const int64_t band_rows =
      staging_band_rows(this_machine_model(s.threads).caches.l2, t.n, uk.mr);
  parallel_items_two_ended(costs, s.threads, [&](int64_t item) {
    const TgmmTile tile = tiling.tile(item);
    const int64_t begin = p.starts[p.group_offset + tile.group];
    const int64_t end = p.starts[p.group_offset + tile.group + 1];
    const int64_t out_row = tile.group * p.k + tile.row0;
    if (!out.direct()) {
      run_staged_tile(p, s, uk, band_rows, tile, begin, end, out, out_row);
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
      // Streamed: the columns before the rows' first line boundary apart.
      const int64_t head = stream ? misaligned_head_cols(c, p.n, tile.cols) : 0;
      for (int64_t t0 = begin; t0 < end; t0 += t.k) {
        const int64_t kc = std::min(t.k, end - t0);
        pack_a_transposed(p.lhs, t0, kc, tile.row0, tile.rows, begin, end, uk.mr, packed_a);
        for (const auto& [c0, width] : {std::pair{int64_t{0}, head},
                                        std::pair{head, tile.cols - head}}) {
          if (width == 0) continue;
          pack_b(p.dout, false, t0, kc, tile.col0 + c0, width, uk.nr, packed_b);
          macro_kernel(uk, kc, packed_a, tile.rows, packed_b, width, c + c0, p.n, t0 > begin,
                       depth, {}, stream);
        }
      }
      if (stream) hwy::FlushStream();
    }
    scale_tile(p, tile, c);
  });
}

}  // namespace raggemm::kernels
