// Output tiling shared by both tgmm generations: items are (local group,
// K-tile of tiles.m rows, N-tile of tiles.n columns) of out [G_local, K, N];
// and the walk of a staged tile, shared by the f32 and bf16 tgmm drivers.
#pragma once

#include <hwy/cache_control.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/gmm_kernel.h"
#include "kernels/workspace.h"

namespace raggemm::kernels {

struct TgmmTile {
  int64_t group, row0, rows, col0, cols;
};

struct TgmmTiling {
  int64_t k = 0, n = 0, tm = 1, tn = 1, groups = 0;
  int64_t row_tiles() const { return (k + tm - 1) / tm; }
  int64_t col_tiles() const { return (n + tn - 1) / tn; }
  int64_t tiles_per_group() const { return row_tiles() * col_tiles(); }
  int64_t items() const { return groups * tiles_per_group(); }
  TgmmTile tile(int64_t item) const {
    const int64_t g = item / tiles_per_group();
    const int64_t rest = item % tiles_per_group();
    const int64_t row0 = (rest / col_tiles()) * tm;
    const int64_t col0 = (rest % col_tiles()) * tn;
    return {g, row0, std::min(tm, k - row0), col0, std::min(tn, n - col0)};
  }
};

inline TgmmTiling tgmm_tiling(const TgmmProblem& p, const Tiles& t) {
  return TgmmTiling{p.k, p.n, t.m, t.n, p.local_groups};
}

inline void zero_tile(float* c, int64_t rows, int64_t cols, int64_t ldc) {
  for (int64_t i = 0; i < rows; ++i) std::memset(c + i * ldc, 0, sizeof(float) * cols);
}

// Rows of the f32 block a staged tgmm tile (a bf16 output, or one added
// into) accumulates in at a time: a band of whole mr-row panels taking a
// quarter of L2, so the contraction's stores and the store stage's reads stay
// there. (The whole tile staged at once is 4 MiB at K = N = 1024: twice a
// 2 MiB L2, and a bf16 weight gradient at M = 4096, 32 groups took 19 ms
// against an f32 one's 5.5.) Whole panels keep the tile's partition into
// register tiles, hence its bits.
inline int64_t staging_band_rows(int64_t l2_bytes, int64_t cols, int mr) {
  const int64_t rows = l2_bytes / 4 / (std::max<int64_t>(cols, 1) * int64_t{sizeof(float)});
  return std::max<int64_t>(1, rows / mr) * mr;
}

// The bands of a staged tile share the packed B of up to this many token
// slices (a workspace bounded by the tiles); a longer group stages its tile
// whole and packs each slice's B in turn, as before the bands.
constexpr int64_t kMaxBandedSlices = 16;

// How a staged tile is walked (run_staged_bands).
struct StagedPlan {
  int64_t slices = 0;     // token slices of up to kc_max
  bool in_place = false;  // an f32 output of one slice: C + acc straight into it
  bool shared_b = false;  // every slice's B packed once, shared by the bands
  int64_t band = 0;       // rows a band accumulates
};

inline StagedPlan plan_staged_tile(const OutputView& out, bool scaled, int64_t tokens,
                                   int64_t kc_max, int64_t band_rows, int64_t tile_rows) {
  StagedPlan plan;
  plan.slices = (tokens + kc_max - 1) / kc_max;
  plan.in_place = out.f32 && plan.slices == 1 && !scaled;
  plan.shared_b = !plan.in_place && plan.slices <= kMaxBandedSlices;
  plan.band = plan.shared_b ? std::min(band_rows, tile_rows) : tile_rows;
  return plan;
}

// A staged tile (group tokens [begin, end), in slices of kc_max): bands of
// plan.band rows, each accumulating over every slice in an f32 block that
// the store stage then writes once (streamed, then one fence); in place with
// C + acc for an f32 output of one slice. pack_b(t0, i) packs slice i's B
// into the driver's slot i (slot 0 again for each slice when the B is not
// shared); multiply(t0, kc, i, r0, rows, c, ldc, accumulate) packs the
// band's A for the slice and runs it against slot i.
template <class PackB, class Multiply>
void run_staged_bands(const StagedPlan& plan, const OutputView& out, const TgmmTile& tile,
                      int64_t out_row, const float* scale, int64_t begin, int64_t end,
                      int64_t kc_max, int64_t n, PackB pack_b, Multiply multiply) {
  if (plan.shared_b) {
    for (int64_t t0 = begin, i = 0; t0 < end; t0 += kc_max, ++i) pack_b(t0, i);
  }
  float* c = plan.in_place ? out.f32_at(out_row, tile.col0)
                           : workspace(Slot::kAccumulator, plan.band * tile.cols);
  const int64_t ldc = plan.in_place ? n : tile.cols;
  for (int64_t r0 = 0; r0 < tile.rows; r0 += plan.band) {
    const int64_t rows = std::min(plan.band, tile.rows - r0);
    for (int64_t t0 = begin, i = 0; t0 < end; t0 += kc_max, ++i) {
      if (!plan.shared_b) pack_b(t0, 0);
      multiply(t0, std::min(kc_max, end - t0), plan.shared_b ? i : 0, r0, rows, c, ldc,
               plan.in_place || t0 > begin);
    }
    // The weight gradient is written once and is larger than the caches.
    if (!plan.in_place) {
      out.store(out_row + r0, tile.col0, c, tile.cols, rows, tile.cols, scale, /*stream=*/true);
    }
  }
  if (!plan.in_place) hwy::FlushStream();
}

// Columns of a streamed tile taken apart before the first 64-byte line of
// its first row, so that the rest of every row starts on a line and the
// non-temporal stores apply (they need whole lines; a misaligned row falls
// back to plain stores, which read every output line first). Only where all
// rows share the offset (ld a multiple of 16 floats); 0 when aligned.
// Measured on a numpy out= 16 bytes past a line, tgmm M=4096, K=N=1024,
// G=32 f32, Xeon model 167, 1 thread: 82 -> 58 ms, against 48-50 aligned.
inline int64_t misaligned_head_cols(const float* c, int64_t ld, int64_t cols) {
  constexpr int64_t kLineFloats = 16;
  const auto offset = static_cast<int64_t>(reinterpret_cast<uintptr_t>(c) % 64);
  if (offset == 0 || offset % sizeof(float) != 0 || ld % kLineFloats != 0) return 0;
  return std::min(cols, kLineFloats - offset / static_cast<int64_t>(sizeof(float)));
}

// Output stage of tgmm: an optional per-group scalar scale.
inline void scale_tile(const TgmmProblem& p, const TgmmTile& tile, float* c) {
  if (!p.out_group_scale) return;
  const float scale = p.out_group_scale[tile.group];
  for (int64_t i = 0; i < tile.rows; ++i) {
    for (int64_t j = 0; j < tile.cols; ++j) c[i * p.n + j] *= scale;
  }
}

}  // namespace raggemm::kernels
