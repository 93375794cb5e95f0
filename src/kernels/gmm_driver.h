// The one loop of the group-aligned gmm (DESIGN.md s.3, v2), and of v1's
// masked tiles, shared by every compute type: the work items, their
// per-thread buffers and the walk over column chunks, K-blocks, m-tiles and
// micro-panels are written here once; what differs between compute types is
// a policy (F32GmmPolicy in kernels/f32_gmm_policy.h, with v1's variant in
// kernels/gmm_v1.cc; Int8Policy in kernels/int8_gmm.cc; Bf16GmmPolicy in
// kernels/bf16_gmm.cc):
//
//   - the microkernel (from the registry) and its packed layouts: mr, nr,
//     k_group (consecutive k one packed step holds: f32 1, bf16 2, int8 4)
//     and the bytes a row of A / a column of B takes per step;
//   - the K-block depth, the m-tile, and the column chunk an item walks;
//   - pack_a, pack_b: A rows [r0, r0 + rows) and B columns [c0, c0 + cols)
//     over k [k0, k0 + kc), in those layouts; pack_b may note what the
//     output stage needs of B (int8: the column sums of biased A);
//   - the accumulator type Acc (f32, i32) and the multiply;
//   - where an item accumulates: in place in the f32 output, or in an Acc
//     block the store stage writes once;
//   - finish: the store stage once an item's (or a chunk's) contraction is
//     complete (i32 sums to f32 with the row and column scales, the bf16
//     rounding, out += for an accumulated output, the v2 epilogue, v1's row
//     mask, zeros for an empty contraction).
//
// Two loop orders, a property of the policy (Policy::kKOuter):
//
// Chunks outer (the dot-product microkernels): column chunks, then K-blocks
// (B packed once per chunk and K-block), then m-tiles (A packed per m-tile
// and K-block, or once over all of K for the whole item when the policy
// asks: int8 always, bf16 when the item walks more than one chunk, so A is
// never packed twice). A chunk's output stage runs once its K-blocks are
// done, so per-chunk state (int8's column sums) lives one chunk at a time.
// The driver walks the micro-panels (multiply_panels) and calls the policy's
// multiply once per register tile.
//
// K-blocks outer (the f32 microkernel, whose macro kernel walks the
// micro-panels itself, prefetching A and streaming in what is packed next):
// K-blocks, then m-tiles (A packed per m-tile and K-block). B is packed for
// the whole item's width once per K-block, before the m-tiles; or, when the
// policy's chunk is narrower than the item, by the first m-tile chunk by
// chunk, each chunk's multiply streaming in the next chunk's source from
// DRAM (the next chunk of this K-block, else the first of the next) while
// its FMAs run, and the later m-tiles reuse the packed block. pack_b then
// returns what the multiply needs of a chunk it left unpacked (the f32
// microkernel can pack B as its first A micro-panel reads it).
//
// In both, a K-block accumulates onto the previous ones in the microkernel
// (accumulate for k0 > 0), so each output element's summation order is the
// microkernel's, K-block after K-block, whatever the chunks, tiles or
// threads.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/group_items.h"
#include "kernels/macro_kernel.h"
#include "kernels/parallel.h"
#include "kernels/workspace.h"

namespace raggemm::kernels {

// Where the items come from and what no item covers.
struct DriverItems {
  const int64_t* starts = nullptr;
  int64_t group_offset = 0;
  int64_t local_groups = 0;
  int64_t m = 0, n = 0;  // output rows and columns
  int64_t rows_per_item = 0;
  int64_t col_step = 0;
  int64_t row_overhead = 0;  // see group_items()
};

// A block packed into micro-panels of `panel` rows (A) or columns (B), each
// `steps` k steps deep, step_bytes per row or column and step.
struct PanelLayout {
  int panel = 1;
  int64_t step_bytes = 0;
  int64_t steps = 0;
  int64_t bytes(int64_t count) const {
    return (count + panel - 1) / panel * panel * steps * step_bytes;
  }
  int64_t offset(int64_t panel_index, int64_t step) const {
    return (panel_index * steps + step) * panel * step_bytes;
  }
};

// C[0:rows, 0:cols] (= or +=) A * B over `steps` k steps: B micro-panel
// outer, so it stays in L1 across the A micro-panels. `a` and `b` point at
// the first panel's step; panels lie a.offset(1, 0) / b.offset(1, 0) apart.
// run(a, b, c, ldc, rows, cols): one microkernel call.
template <class Acc, class Run>
void multiply_panels(const char* a, const PanelLayout& a_layout, int64_t rows, const char* b,
                     const PanelLayout& b_layout, int64_t cols, Acc* c, int64_t ldc,
                     const Run& run) {
  const int mr = a_layout.panel, nr = b_layout.panel;
  const int64_t a_panel_bytes = a_layout.offset(1, 0), b_panel_bytes = b_layout.offset(1, 0);
  for (int64_t j = 0; j < cols; j += nr) {
    const int width = static_cast<int>(std::min<int64_t>(nr, cols - j));
    const char* b_panel = b + (j / nr) * b_panel_bytes;
    for (int64_t i = 0; i < rows; i += mr) {
      const int height = static_cast<int>(std::min<int64_t>(mr, rows - i));
      run(a + (i / mr) * a_panel_bytes, b_panel, c + i * ldc + j, ldc, height, width);
    }
  }
}

// Chunks outer (see the top of this file).
template <class Policy>
void run_chunks_outer_item(const Policy& policy, const GroupItem& item) {
  using Acc = typename Policy::Acc;
  const int64_t k = policy.k, kc_max = policy.kc, tm = policy.tm;
  const int64_t item_rows = item.rows();
  const int64_t width = item.cols();
  const int64_t chunk = std::min(policy.chunk_cols(item), width);
  const int64_t chunks = (width + chunk - 1) / chunk;
  auto steps = [&](int64_t depth) { return (depth + policy.k_group - 1) / policy.k_group; };
  const bool a_whole_k = policy.pack_a_whole_k(chunks);
  PanelLayout a_layout{policy.mr, policy.a_step_bytes, steps(a_whole_k ? k : std::min(k, kc_max))};
  const PanelLayout b_slice{policy.nr, policy.b_step_bytes, steps(std::min(k, kc_max))};
  char* packed_a = workspace_as<char>(Slot::kPackedA, a_layout.bytes(a_whole_k ? item_rows : tm));
  char* packed_b = workspace_as<char>(Slot::kPackedB, b_slice.bytes(chunk));
  const bool in_place = policy.accumulates_in_place();
  Acc* acc = in_place ? nullptr : workspace_as<Acc>(Slot::kAccumulator, item_rows * chunk);
  if (a_whole_k) policy.pack_a(item.row_begin, item_rows, 0, k, packed_a);
  for (int64_t c0 = item.col_begin; c0 < item.col_end; c0 += chunk) {
    const int64_t cols = std::min(chunk, item.col_end - c0);
    const int64_t ldc = in_place ? policy.n : cols;
    for (int64_t k0 = 0; k0 < k; k0 += kc_max) {
      const int64_t kc = std::min(kc_max, k - k0);
      const PanelLayout b_layout{policy.nr, policy.b_step_bytes, steps(kc)};
      policy.pack_b(item, k0, kc, c0, cols, packed_b);
      if (!a_whole_k) a_layout.steps = steps(kc);
      const bool accumulate = k0 > 0;
      for (int64_t r0 = item.row_begin; r0 < item.row_end; r0 += tm) {
        const int64_t rows = std::min(tm, item.row_end - r0);
        const char* a = packed_a;
        if (a_whole_k) {  // tm is whole panels: the m-tile starts on a panel
          a += a_layout.offset((r0 - item.row_begin) / policy.mr, k0 / policy.k_group);
        } else {
          policy.pack_a(r0, rows, k0, kc, packed_a);
        }
        Acc* c = in_place ? policy.out_at(r0, c0) : acc + (r0 - item.row_begin) * ldc;
        multiply_panels(a, a_layout, rows, packed_b, b_layout, cols, c, ldc,
                        [&](const char* ap, const char* bp, Acc* cp, int64_t ld, int h, int w) {
                          policy.multiply(steps(kc), ap, bp, cp, ld, h, w, accumulate);
                        });
      }
    }
    policy.finish(item, c0, cols, acc, ldc);
  }
}

// K-blocks outer (see the top of this file). The policy's chunk_cols(item)
// is the whole width unless the first m-tile packs B chunk by chunk;
// acc_ld(item) is 0 for an item accumulating in place, else its Acc block's
// row stride; b_offset(c0, kc) is where the chunk at item column c0 starts
// in a packed block (c0 whole B micro-panels); next_source(item, k0, kc, c0,
// cols) is the source of the chunk at (k0, c0) for the multiply to stream in.
template <class Policy>
void run_k_outer_item(const Policy& policy, const GroupItem& item) {
  using Acc = typename Policy::Acc;
  const int64_t k = policy.k, kc_max = policy.kc, tm = policy.tm;
  const int64_t item_rows = item.rows();
  const int64_t width = item.cols();
  const int64_t chunk = std::min(policy.chunk_cols(item), width);
  const bool chunked = chunk < width;
  const bool b_reused = item_rows > tm;  // the later m-tiles read the whole packed block
  const int64_t depth = std::min(k, kc_max);
  char* packed_a =
      workspace_as<char>(Slot::kPackedA, policy.a_bytes(std::min(tm, item_rows), depth));
  const int64_t b_cols = chunked && !b_reused ? chunk : width;  // a chunk reused, or the block
  char* packed_b = workspace_as<char>(Slot::kPackedB, policy.b_bytes(b_cols, depth));
  const int64_t acc_ld = policy.acc_ld(item);
  Acc* acc = acc_ld > 0 ? workspace_as<Acc>(Slot::kAccumulator, item_rows * acc_ld) : nullptr;
  for (int64_t k0 = 0; k0 < k; k0 += kc_max) {
    const int64_t kc = std::min(kc_max, k - k0);
    const bool accumulate = k0 > 0;
    if (!chunked) policy.pack_b(item, k0, kc, item.col_begin, width, packed_b, false);
    for (int64_t r0 = item.row_begin; r0 < item.row_end; r0 += tm) {
      const int64_t rows = std::min(tm, item.row_end - r0);
      policy.pack_a(r0, rows, k0, kc, packed_a);
      Acc* c = acc ? acc + (r0 - item.row_begin) * acc_ld : policy.out_at(r0, item.col_begin);
      const int64_t ldc = acc ? acc_ld : policy.out_ld();
      if (!chunked || r0 != item.row_begin) {
        policy.multiply_block(item, kc, packed_a, rows, packed_b, width, c, ldc, accumulate, {},
                              {});
        continue;
      }
      for (int64_t c0 = 0; c0 < width; c0 += chunk) {
        const int64_t cols = std::min(chunk, width - c0);
        char* b = packed_b + (b_reused ? policy.b_offset(c0, kc) : 0);
        const auto unpacked = policy.pack_b(item, k0, kc, item.col_begin + c0, cols, b, true);
        NextSource next;  // the chunk packed after this one
        if (c0 + chunk < width) {
          next = policy.next_source(item, k0, kc, item.col_begin + c0 + chunk,
                                    std::min(chunk, width - c0 - chunk));
        } else if (k0 + kc < k) {
          next = policy.next_source(item, k0 + kc, std::min(kc_max, k - k0 - kc),
                                    item.col_begin, chunk);
        }
        policy.multiply_block(item, kc, packed_a, rows, b, cols, c + c0, ldc, accumulate, next,
                              unpacked);
      }
    }
  }
  policy.finish(item, item.col_begin, width, acc, acc_ld);
}

// A policy may run some items another way (F32GmmPolicy: dlhs of a small
// group from the weight's rows, kernels/dlhs_weight_rows.h).
template <class Policy>
void run_driver_item(const Policy& policy, const GroupItem& item) {
  if constexpr (requires { policy.ran_item_itself(item); }) {
    if (policy.ran_item_itself(item)) return;
  }
  if constexpr (Policy::kKOuter) {
    run_k_outer_item(policy, item);
  } else {
    run_chunks_outer_item(policy, item);
  }
}

// Runs every item of `work`, largest first, on `threads` threads.
template <class Policy>
void run_driver_items(const Policy& policy, const GroupItems& work, int threads) {
  parallel_items(work.costs, threads,
                 [&](int64_t i) { run_driver_item(policy, work.items[i]); });
}

// The group-aligned gmm: zeros the rows no local group covers, then runs
// the items of group_items().
template <class Policy>
void run_driver(const Policy& policy, const DriverItems& d, const OutputView& out, int threads) {
  zero_uncovered_rows(d.starts, d.group_offset, d.local_groups, d.m, out, d.n);
  run_driver_items(policy,
                   group_items(d.starts, d.group_offset, d.local_groups, d.rows_per_item, d.n,
                               d.col_step, d.row_overhead),
                   threads);
}

}  // namespace raggemm::kernels
