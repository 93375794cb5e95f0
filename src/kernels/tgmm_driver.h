// The one loop of tgmm, out[g] = lhs[rows g]^T @ dout[rows g] (DESIGN.md
// s.1), for both generations (s.3) and both microkernels that run it (f32,
// and bf16 dot products): the work items and their order, a staged tile's
// bands, the empty group, a direct tile's token slices with their streaming
// stores and misaligned head, and the group scale are written here once.
// A header of its own, as the gmm side's gmm_driver.h, rather than a grown
// tgmm_common.h: that one held what three loops shared; with one loop left
// everything in it is this loop's, so it is here and tgmm_common.h is gone.
//
// What differs between compute types is a policy (F32TgmmPolicy below, which
// v1 and v2 both run; Bf16TgmmPolicy in kernels/bf16_gmm.cc):
//   - Packed, the element type of its packed panels in the workspace, and
//     packed_a_size(rows) / packed_b_size(cols), the elements a block of
//     panels kc_max tokens deep takes;
//   - kc_max, the deepest token slice, and mr, the register tile's rows
//     (a staging band is whole panels of them);
//   - pack_a(t0, kc, begin, end, row0, rows, dst): lhs^T, rows
//     [row0, row0 + rows) of K over tokens [t0, t0 + kc), tokens outside
//     the group's [begin, end) zero; pack_b(t0, kc, end, col0, cols, dst):
//     dout's columns [col0, col0 + cols) over the same tokens;
//   - multiply(kc, a, rows, b, cols, c, ldc, store): the block multiply,
//     C[0:rows, 0:cols] (=, += or streamed, as `store`) A * B;
//   - zero_tile(c, rows, cols, ldc, read_back): an empty group's tile of a
//     direct f32 output (read_back: the group scale reads it next).
// Where a group's token slices lie is the other setting (TgmmSlicing): v2's
// from the group's first row, v1's the global token tiles.
#pragma once

#include <hwy/cache_control.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/gmm_kernel.h"
#include "kernels/machine_model.h"
#include "kernels/macro_kernel.h"
#include "kernels/pack.h"
#include "kernels/parallel.h"
#include "kernels/workspace.h"

namespace raggemm::kernels {

// Items are (local group, K-tile of tiles.m rows, N-tile of tiles.n
// columns) of out [G_local, K, N].
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

// Where a group's token slices lie. Each slice's partial starts from zero
// in the microkernel and the slices add up in order, so the slices are the
// summation order (tests/kernels/gmm_kernels_test.cc pins both):
//   - kFromGroupStart (v2, group-aligned): every kc_max tokens from the
//     group's first row, none past its last;
//   - kGlobalTokenTiles (v1, megablox): the tiles of kc_max tokens over the
//     global rows [0, M) that the group's rows overlap, each packed whole,
//     the other groups' tokens masked to zero.
enum class TgmmSlicing { kFromGroupStart, kGlobalTokenTiles };

struct TgmmSlices {
  int64_t first = 0;  // slice i starts at first + i * step
  int64_t step = 0;
  int64_t limit = 0;  // and ends at the step or here
  int64_t count = 0;
  int64_t t0(int64_t i) const { return first + i * step; }
  int64_t kc(int64_t i) const { return std::min(step, limit - t0(i)); }
};

inline TgmmSlices tgmm_slices(TgmmSlicing slicing, int64_t begin, int64_t end, int64_t step,
                              int64_t m) {
  const bool global = slicing == TgmmSlicing::kGlobalTokenTiles;
  TgmmSlices s;
  s.first = global ? begin / step * step : begin;
  s.step = step;
  s.limit = global ? m : end;
  s.count = end > begin ? (end - s.first + step - 1) / step : 0;
  return s;
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

// How a staged tile is walked (run_staged_tile).
struct StagedPlan {
  int64_t slices = 0;
  bool in_place = false;  // an f32 output of one slice: C + acc straight into it
  bool shared_b = false;  // every slice's B packed once, shared by the bands
  int64_t band = 0;       // rows a band accumulates
};

inline StagedPlan plan_staged_tile(const OutputView& out, bool scaled, int64_t slices,
                                   int64_t band_rows, int64_t tile_rows) {
  StagedPlan plan;
  plan.slices = slices;
  plan.in_place = out.f32 && plan.slices == 1 && !scaled;
  plan.shared_b = !plan.in_place && plan.slices <= kMaxBandedSlices;
  plan.band = plan.shared_b ? std::min(band_rows, tile_rows) : tile_rows;
  return plan;
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

// A staged tile of a non-empty group: bands of plan.band rows, each
// accumulating over every slice in an f32 block that the store stage then
// writes once (streamed, then one fence); in place with C + acc for an f32
// output of one slice.
template <class Policy>
void run_staged_tile(const Policy& policy, const StagedPlan& plan, const TgmmSlices& slices,
                     const OutputView& out, const TgmmTile& tile, int64_t out_row,
                     const float* scale, int64_t begin, int64_t end, int64_t n) {
  using Packed = typename Policy::Packed;
  const int64_t slice_size = policy.packed_b_size(tile.cols);
  Packed* packed_a = workspace_as<Packed>(Slot::kPackedA, policy.packed_a_size(plan.band));
  Packed* packed_b =
      workspace_as<Packed>(Slot::kPackedB, (plan.shared_b ? plan.slices : 1) * slice_size);
  auto pack_b = [&](int64_t i, Packed* dst) {
    policy.pack_b(slices.t0(i), slices.kc(i), end, tile.col0, tile.cols, dst);
  };
  if (plan.shared_b) {
    for (int64_t i = 0; i < plan.slices; ++i) pack_b(i, packed_b + i * slice_size);
  }
  float* c = plan.in_place ? out.f32_at(out_row, tile.col0)
                           : workspace(Slot::kAccumulator, plan.band * tile.cols);
  const int64_t ldc = plan.in_place ? n : tile.cols;
  for (int64_t r0 = 0; r0 < tile.rows; r0 += plan.band) {
    const int64_t rows = std::min(plan.band, tile.rows - r0);
    for (int64_t i = 0; i < plan.slices; ++i) {
      if (!plan.shared_b) pack_b(i, packed_b);
      policy.pack_a(slices.t0(i), slices.kc(i), begin, end, tile.row0 + r0, rows, packed_a);
      policy.multiply(slices.kc(i), packed_a, rows, packed_b + (plan.shared_b ? i * slice_size : 0),
                      tile.cols, c, ldc,
                      plan.in_place || i > 0 ? Store::kAccumulate : Store::kOverwrite);
    }
    // The weight gradient is written once and is larger than the caches.
    if (!plan.in_place) {
      out.store(out_row + r0, tile.col0, c, tile.cols, rows, tile.cols, scale, /*stream=*/true);
    }
  }
  if (!plan.in_place) hwy::FlushStream();
}

// A tile of a direct (f32, overwritten) output of a non-empty group: the
// slices accumulate in the output itself.
template <class Policy>
void run_direct_tile(const Policy& policy, const TgmmSlices& slices, const TgmmTile& tile, float* c,
                     bool scaled, int64_t begin, int64_t end, int64_t n) {
  using Packed = typename Policy::Packed;
  Packed* packed_a = workspace_as<Packed>(Slot::kPackedA, policy.packed_a_size(tile.rows));
  Packed* packed_b = workspace_as<Packed>(Slot::kPackedB, policy.packed_b_size(tile.cols));
  // A group whose tokens fit one slice writes its tile once, final:
  // streaming stores skip reading the [K, N] output lines first (at 128
  // groups the output is 512 MiB, and tgmm was bound by writing it).
  const bool stream = slices.count == 1 && !scaled;
  // Streamed: the columns before the rows' first line boundary apart.
  const int64_t head = stream ? misaligned_head_cols(c, n, tile.cols) : 0;
  for (int64_t i = 0; i < slices.count; ++i) {
    const int64_t t0 = slices.t0(i), kc = slices.kc(i);
    policy.pack_a(t0, kc, begin, end, tile.row0, tile.rows, packed_a);
    for (const auto& [c0, width] :
         {std::pair{int64_t{0}, head}, std::pair{head, tile.cols - head}}) {
      if (width == 0) continue;
      policy.pack_b(t0, kc, end, tile.col0 + c0, width, packed_b);
      policy.multiply(kc, packed_a, tile.rows, packed_b, width, c + c0, n,
                      i > 0    ? Store::kAccumulate
                      : stream ? Store::kStream
                               : Store::kOverwrite);
    }
  }
  if (stream) hwy::FlushStream();
}

// Every output tile of every local group, one work item each, walking the
// group's tokens in `slicing`'s slices, in order, so the reduction over
// tokens is fixed and independent of the thread count.
template <class Policy>
void run_tgmm(const TgmmProblem& p, const Schedule& s, const Policy& policy, TgmmSlicing slicing) {
  const TgmmTiling tiling = tgmm_tiling(p, s.tiles);
  std::vector<int64_t> costs(static_cast<size_t>(tiling.items()));
  for (int64_t item = 0; item < tiling.items(); ++item) {
    const int64_t g = item / tiling.tiles_per_group();
    costs[item] = p.starts[p.group_offset + g + 1] - p.starts[p.group_offset + g];
  }
  const OutputView out = p.output();
  const int64_t band_rows =
      staging_band_rows(this_machine_model(s.threads).caches.l2, s.tiles.n, policy.mr);
  parallel_items_two_ended(costs, s.threads, [&](int64_t item) {
    const TgmmTile tile = tiling.tile(item);
    const int64_t begin = p.starts[p.group_offset + tile.group];
    const int64_t end = p.starts[p.group_offset + tile.group + 1];
    const int64_t out_row = tile.group * p.k + tile.row0;
    const TgmmSlices slices = tgmm_slices(slicing, begin, end, policy.kc_max, p.m);
    const float* scale = p.out_group_scale ? p.out_group_scale + tile.group : nullptr;
    if (!out.direct()) {
      if (end == begin) {
        out.zero(out_row, tile.col0, tile.rows, tile.cols);  // nothing when accumulating
      } else {
        const StagedPlan plan =
            plan_staged_tile(out, scale != nullptr, slices.count, band_rows, tile.rows);
        run_staged_tile(policy, plan, slices, out, tile, out_row, scale, begin, end, p.n);
      }
      return;
    }
    float* c = out.f32_at(out_row, tile.col0);
    if (end == begin) {
      // v2 scales an empty group's zeros (0 * scale: -0 where it is
      // negative); v1 never did (an empty group had no token tile to
      // scale), and each keeps its bits.
      const bool scaled_zeros = scale && slicing == TgmmSlicing::kFromGroupStart;
      policy.zero_tile(c, tile.rows, tile.cols, p.n, scaled_zeros);
      if (scaled_zeros) scale_tile(p, tile, c);
      return;
    }
    run_direct_tile(policy, slices, tile, c, scale != nullptr, begin, end, p.n);
    scale_tile(p, tile, c);
  });
}

// The f32 microkernel's policy, v1's and v2's (so in this header): every
// input dtype is widened or decoded to f32 while packing.
struct F32TgmmPolicy {
  using Packed = float;
  const TgmmProblem& p;
  Microkernel uk;
  int mr;
  int64_t kc_max;
  int prefetch_depth;

  F32TgmmPolicy(const TgmmProblem& problem, const Schedule& s)
      : p(problem),
        uk(select_microkernel()),
        mr(uk.mr),
        kc_max(s.tiles.k),
        prefetch_depth(s.input_buffer_count - 1) {}

  int64_t packed_a_size(int64_t rows) const { return packed_size(rows, kc_max, uk.mr); }
  int64_t packed_b_size(int64_t cols) const { return packed_size(cols, kc_max, uk.nr); }

  void pack_a(int64_t t0, int64_t kc, int64_t begin, int64_t end, int64_t row0, int64_t rows,
              float* dst) const {
    pack_a_transposed(p.lhs, t0, kc, row0, rows, begin, end, uk.mr, dst);
  }
  // B over the whole slice, unmasked: A's zeros mask the other groups'
  // tokens of a v1 token tile (an inf or NaN of theirs still makes NaN, as
  // in v1 before the driver; v2's slices hold only the group's tokens).
  void pack_b(int64_t t0, int64_t kc, int64_t /*end*/, int64_t col0, int64_t cols,
              float* dst) const {
    kernels::pack_b(p.dout, false, t0, kc, col0, cols, uk.nr, dst);
  }

  void multiply(int64_t kc, const float* a, int64_t rows, const float* b, int64_t cols, float* c,
                int64_t ldc, Store store) const {
    macro_kernel(uk, kc, a, rows, b, cols, c, ldc, store == Store::kAccumulate, prefetch_depth, {},
                 store == Store::kStream);
  }

  // An empty contraction through the microkernel (kc = 0 stores zeros),
  // streamed along the rows unless the group scale reads the tile back,
  // rather than memset row by row with ordinary stores (about 1.04x at 128
  // groups, a quarter empty).
  void zero_tile(float* c, int64_t rows, int64_t cols, int64_t ldc, bool read_back) const {
    static const float kNoOperand[1] = {};
    macro_kernel(uk, 0, kNoOperand, rows, kNoOperand, cols, c, ldc, false, 0, {}, !read_back);
    if (!read_back) hwy::FlushStream();
  }
};

}  // namespace raggemm::kernels
