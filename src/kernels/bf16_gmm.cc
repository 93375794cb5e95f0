// The bf16 dot-product drivers (bf16_gmm.h). gmm: work items are (group, up
// to kRowTilesPerItem m-tiles of its rows, n-tile), as in gmm v2; an item
// packs each k-slice of its B tile once and reuses it for its m-tiles. tgmm:
// one item per output tile (group, K-tile, N-tile), walking the group's
// tokens in slices of tiles.k from its first row, as in tgmm v2. Slices of
// the contraction are rounded up to even so no pair straddles two slices.
#include "kernels/bf16_gmm.h"

#include <hwy/cache_control.h>

#include <algorithm>
#include <cstring>

#include "kernels/bf16_pack.h"
#include "kernels/group_items.h"
#include "kernels/parallel.h"
#include "kernels/tgmm_common.h"
#include "kernels/workspace.h"

namespace raggemm::kernels {
namespace {

const uint16_t* bits(const Operand& op) { return static_cast<const uint16_t*>(op.data); }

bool plain_bf16(const Operand& op) { return op.dtype == DType::kBF16 && !op.scale.data; }

// A per-thread buffer of `count` bf16 values.
uint16_t* bf16_workspace(Slot slot, int64_t count) { return workspace_as<uint16_t>(slot, count); }

// Depth of a slice of the contraction: twice the tiles' k, which the machine
// model sized for packed f32 panels (the same bytes hold twice as many bf16),
// rounded up to even.
int64_t slice_depth(int64_t tile_k) { return std::max<int64_t>(2, tile_k * 2); }

// C[0:rows, 0:cols] (= or +=) A_packed * B_packed, B micro-panel outer so it
// stays in L1 across the A micro-panels.
// Streamed tiles of a contraction this short are bound by their stores; they
// go along the rows instead (as macro_kernel.cc's row bands).
constexpr int64_t kRowBandMaxDepth = 16;

void macro_kernel_bf16(const Bf16Microkernel& uk, int64_t kc, const uint16_t* a, int64_t rows,
                       const uint16_t* b, int64_t cols, float* c, int64_t ldc, Store store) {
  const int64_t kp = pairs_of(kc);
  if (store == Store::kStream && kc <= kRowBandMaxDepth) {
    for (int64_t i = 0; i < rows; i += uk.mr) {
      const int height = static_cast<int>(std::min<int64_t>(uk.mr, rows - i));
      for (int64_t j = 0; j < cols; j += uk.nr) {
        const int width = static_cast<int>(std::min<int64_t>(uk.nr, cols - j));
        uk.run(kp, a + (i / uk.mr) * uk.mr * kp * 2, b + (j / uk.nr) * uk.nr * kp * 2,
               c + i * ldc + j, ldc, height, width, store);
      }
    }
    return;
  }
  for (int64_t j = 0; j < cols; j += uk.nr) {
    const int width = static_cast<int>(std::min<int64_t>(uk.nr, cols - j));
    const uint16_t* b_panel = b + (j / uk.nr) * uk.nr * kp * 2;
    for (int64_t i = 0; i < rows; i += uk.mr) {
      const int height = static_cast<int>(std::min<int64_t>(uk.mr, rows - i));
      uk.run(kp, a + (i / uk.mr) * uk.mr * kp * 2, b_panel, c + i * ldc + j, ldc, height, width,
             store);
    }
  }
}

// Columns of B packed and multiplied at a time by an item of one m-tile (a
// small group): the packed chunk stays in L2 instead of a whole k-slice of
// B being packed past it and read back (as gmm v2's small items).
constexpr int64_t kChunkCols = 128;

void run_gmm_item(const GmmProblem& p, const Schedule& s, const Bf16Microkernel& uk,
                  const GroupItem& item) {
  const Operand rhs = p.rhs.group(item.group);
  const int64_t kc_max = slice_depth(s.tiles.k);
  const int64_t tm = s.tiles.m;
  const int64_t width = item.col_end - item.col_begin;
  const bool one_tile = item.row_end - item.row_begin <= tm;
  const int64_t chunk = one_tile ? std::min(kChunkCols, width) : width;
  uint16_t* packed_b = bf16_workspace(Slot::kPackedB, bf16_packed_size(chunk, kc_max, uk.nr));
  uint16_t* packed_a = bf16_workspace(Slot::kPackedA, bf16_packed_size(tm, kc_max, uk.mr));
  // f32 output: the slices accumulate in place. bf16: in an f32 block of the
  // item, rounded once by the store stage below.
  const OutputView out = p.output();
  const int64_t item_rows = item.row_end - item.row_begin;
  float* acc = out.direct() ? nullptr : workspace(Slot::kAccumulator, item_rows * width);
  auto c_at = [&](int64_t r, int64_t c) {
    return acc ? acc + (r - item.row_begin) * width + (c - item.col_begin) : out.f32_at(r, c);
  };
  const int64_t ldc = acc ? width : p.n;
  for (int64_t k0 = 0; k0 < p.k; k0 += kc_max) {
    const int64_t kc = std::min(kc_max, p.k - k0);
    const Store store = k0 > 0 ? Store::kAccumulate : Store::kOverwrite;
    if (one_tile) {  // A once, then B chunk by chunk
      const int64_t rows = item.row_end - item.row_begin;
      pack_pairs_along_rows(bits(p.lhs), p.lhs.ld, item.row_begin, rows, k0, kc, uk.mr, packed_a);
    }
    for (int64_t c0 = item.col_begin; c0 < item.col_end; c0 += chunk) {
      const int64_t cols = std::min(chunk, item.col_end - c0);
      if (p.transpose_rhs) {  // rhs [N, K]: pairs along its rows
        pack_pairs_along_rows(bits(rhs), rhs.ld, c0, cols, k0, kc, uk.nr, packed_b);
      } else {  // rhs [K, N]: pairs down its columns
        pack_pairs_down_columns(bits(rhs), rhs.ld, k0, kc, p.k, c0, cols, uk.nr, packed_b);
      }
      for (int64_t r0 = item.row_begin; r0 < item.row_end; r0 += tm) {
        const int64_t rows = std::min(tm, item.row_end - r0);
        if (!one_tile) {
          pack_pairs_along_rows(bits(p.lhs), p.lhs.ld, r0, rows, k0, kc, uk.mr, packed_a);
        }
        macro_kernel_bf16(uk, kc, packed_a, rows, packed_b, cols, c_at(r0, c0), ldc, store);
      }
    }
  }
  if (p.k == 0) {  // empty contraction: the product is zero
    out.zero(item.row_begin, item.col_begin, item_rows, width);
  } else if (acc) {
    out.store(item.row_begin, item.col_begin, acc, width, item_rows, width);
  }
}

// A tile of a bf16 output, or one accumulated into (as tgmm v2's): the
// slices accumulate in an f32 tile (or, f32 and one slice, in place with
// C + acc), which the store stage writes once.
void run_staged_tgmm_tile(const TgmmProblem& p, int64_t kc_max, const Bf16Microkernel& uk,
                          const TgmmTile& tile, int64_t begin, int64_t end, const OutputView& out,
                          int64_t out_row) {
  const float* scale = p.out_group_scale ? p.out_group_scale + tile.group : nullptr;
  if (end == begin) {
    out.zero(out_row, tile.col0, tile.rows, tile.cols);  // nothing when accumulating
    return;
  }
  uint16_t* packed_a = bf16_workspace(Slot::kPackedA, bf16_packed_size(tile.rows, kc_max, uk.mr));
  uint16_t* packed_b = bf16_workspace(Slot::kPackedB, bf16_packed_size(tile.cols, kc_max, uk.nr));
  const bool in_place = out.f32 && end - begin <= kc_max && !scale;
  float* c = in_place ? out.f32_at(out_row, tile.col0)
                      : workspace(Slot::kAccumulator, tile.rows * tile.cols);
  const int64_t ldc = in_place ? p.n : tile.cols;
  for (int64_t t0 = begin; t0 < end; t0 += kc_max) {
    const int64_t kc = std::min(kc_max, end - t0);
    pack_pairs_down_columns(bits(p.lhs), p.lhs.ld, t0, kc, end, tile.row0, tile.rows, uk.mr,
                            packed_a);
    pack_pairs_down_columns(bits(p.dout), p.dout.ld, t0, kc, end, tile.col0, tile.cols, uk.nr,
                            packed_b);
    macro_kernel_bf16(uk, kc, packed_a, tile.rows, packed_b, tile.cols, c, ldc,
                      in_place || t0 > begin ? Store::kAccumulate : Store::kOverwrite);
  }
  if (!in_place) out.store(out_row, tile.col0, c, tile.cols, tile.rows, tile.cols, scale);
}

}  // namespace

bool bf16_dot_fits(const GmmProblem& p) {
  return plain_bf16(p.lhs) && plain_bf16(p.rhs.base) && !p.epilogue.active();
}

bool bf16_dot_fits(const TgmmProblem& p) { return plain_bf16(p.lhs) && plain_bf16(p.dout); }

void bf16_gmm(const GmmProblem& p, const Schedule& s, const Bf16Microkernel& uk) {
  zero_uncovered_rows(p.starts, p.group_offset, p.local_groups, p.m, p.output(), p.n);
  Schedule schedule = s;
  schedule.tiles.m = whole_panels(s.tiles.m, uk.mr);
  schedule.tiles.n = whole_panels(s.tiles.n, uk.nr);
  // The B slice is packed whatever the rows: a few rows still cost it.
  const auto [items, costs] =
      group_items(p.starts, p.group_offset, p.local_groups, schedule.tiles.m * kRowTilesPerItem,
                  p.n, schedule.tiles.n, /*row_overhead=*/8);
  parallel_items(costs, s.threads, [&](int64_t i) { run_gmm_item(p, schedule, uk, items[i]); });
}

void bf16_tgmm(const TgmmProblem& p, const Schedule& s, const Bf16Microkernel& uk) {
  const TgmmTiling tiling = tgmm_tiling(p, s.tiles);
  const int64_t kc_max = slice_depth(s.tiles.k);
  std::vector<int64_t> costs(static_cast<size_t>(tiling.items()));
  for (int64_t item = 0; item < tiling.items(); ++item) {
    const int64_t g = item / tiling.tiles_per_group();
    costs[item] = p.starts[p.group_offset + g + 1] - p.starts[p.group_offset + g];
  }
  const OutputView out = p.output();
  parallel_items_two_ended(costs, s.threads, [&](int64_t item) {
    const TgmmTile tile = tiling.tile(item);
    const int64_t begin = p.starts[p.group_offset + tile.group];
    const int64_t end = p.starts[p.group_offset + tile.group + 1];
    const int64_t out_row = tile.group * p.k + tile.row0;
    if (!out.direct()) {
      run_staged_tgmm_tile(p, kc_max, uk, tile, begin, end, out, out_row);
      return;
    }
    float* c = out.f32_at(out_row, tile.col0);
    if (end == begin) {
      zero_tile(c, tile.rows, tile.cols, p.n);
    } else {
      uint16_t* packed_a =
          bf16_workspace(Slot::kPackedA, bf16_packed_size(tile.rows, kc_max, uk.mr));
      uint16_t* packed_b =
          bf16_workspace(Slot::kPackedB, bf16_packed_size(tile.cols, kc_max, uk.nr));
      // A group whose tokens fit one slice writes its tile once, final:
      // streaming stores skip reading the output lines first (as tgmm v2).
      const bool stream = end - begin <= kc_max && !p.out_group_scale;
      for (int64_t t0 = begin; t0 < end; t0 += kc_max) {
        const int64_t kc = std::min(kc_max, end - t0);
        // lhs^T: packed row i is lhs column row0 + i, contracted over tokens.
        pack_pairs_down_columns(bits(p.lhs), p.lhs.ld, t0, kc, end, tile.row0, tile.rows, uk.mr,
                                packed_a);
        pack_pairs_down_columns(bits(p.dout), p.dout.ld, t0, kc, end, tile.col0, tile.cols, uk.nr,
                                packed_b);
        macro_kernel_bf16(uk, kc, packed_a, tile.rows, packed_b, tile.cols, c, p.n,
                          t0 > begin ? Store::kAccumulate
                          : stream   ? Store::kStream
                                     : Store::kOverwrite);
      }
      if (stream) hwy::FlushStream();
    }
    scale_tile(p, tile, c);
  });
}

}  // namespace raggemm::kernels
