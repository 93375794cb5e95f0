// v2 gmm, group-aligned (DESIGN.md s.3): each group's rows are tiled from the
// group's own first row, only valid rows are packed, and the ragged last
// panel of a tile runs the microkernel's narrower row bucket. A work item is
// (group, row range of up to kRowTilesPerItem m-tiles, n-tile): it packs each
// k-slice of its B tile once and reuses it for all of its m-tiles.
#include <algorithm>
#include <cstring>

#include "kernels/bf16_gmm.h"
#include "kernels/epilogue.h"
#include "kernels/gmm_kernel.h"
#include "kernels/gmm_driver.h"
#include "kernels/group_items.h"
#include "kernels/machine_model.h"
#include "kernels/macro_kernel.h"
#include "kernels/pack.h"
#include "kernels/workspace.h"

namespace raggemm::kernels {
namespace {

// Columns of B packed and multiplied at a time (a small group's item, and
// the first m-tile of a larger one): the packed chunk (kc x cols) takes an
// eighth of L2, which leaves room there for the next chunk being streamed in
// while this one's FMAs run, the A block and the C rows. On a 1 MiB L2 that
// is 128 columns at the forward small-group kc of 256 (the constant this
// replaced) and 32 at dlhs's whole 1024-float rows, where 128 columns
// (512 KiB) pushed the A block out of L2. Same-run A/B, docs/performance.md.
constexpr int64_t kL2ChunkShare = 8;

// A chunk of a [K,N] weight is kc rows of `cols` columns, and the stream
// that brings the next one in (b_chunk_source) covers rows of a power of two
// lines only, so there the width is rounded down to nr times a power of
// two: at K = 2048, N = 768 (tiles.k 304) the share gave 48 columns, 192
// bytes a row, and no chunk was streamed in at all.
int64_t b_chunk_cols(int64_t l2_bytes, int64_t kc, int nr, bool streamed_by_rows) {
  const int64_t cols = l2_bytes / kL2ChunkShare / (std::max<int64_t>(kc, 1) * sizeof(float));
  const int64_t panels = std::max<int64_t>(1, cols / nr);
  if (!streamed_by_rows) return panels * nr;
  return (int64_t{1} << (63 - __builtin_clzll(static_cast<uint64_t>(panels)))) * nr;
}

// Where the chunk of B at (k0, c0) lies in the rhs source, for streaming it
// in ahead of its packing; none when it is not whole lines in rows of a
// power-of-two number of lines.
NextSource b_chunk_source(const GmmProblem& p, const Operand& rhs, int64_t k0, int64_t kc,
                          int64_t c0, int64_t cols) {
  const auto elem = static_cast<int64_t>(dtype_size(rhs.dtype));
  const char* base = static_cast<const char*>(rhs.data);
  NextSource next;
  if (!p.transpose_rhs) {  // kc rows of `cols` columns
    const int64_t row_bytes = cols * elem;
    if (row_bytes % 64 != 0 || (row_bytes & (row_bytes - 1)) != 0) return {};
    next.start = {base + (k0 * rhs.ld + c0) * elem, rhs.ld * elem, __builtin_ctzll(row_bytes / 64)};
    next.lines = kc * row_bytes / 64;
  } else if (kc == rhs.ld && kc * elem % 64 == 0) {  // `cols` whole rows, one range
    next.start = {base + c0 * rhs.ld * elem, 64, 0};
    next.lines = cols * kc * elem / 64;
  }
  return next;
}

// Output rows a multiple of 2 KiB apart (N or K a multiple of 512) put the
// MR rows of a register tile into one or two of L1's sets (a 4 KiB period),
// where the C tile's reloads on every k-slice fight the B source lines being
// streamed in; a small item then accumulates in a staging block whose rows
// are one line longer and copies it out once. Same-run medians of 4 rounds
// at M = 4096, 2 threads (December 2026, Zen 5): gmm K = N = 1024, 32
// groups, bf16 0.90x -> 0.99x of f32's speed; over eight staged gmm and
// dlhs cases at 32 and 128 groups, bf16 -2% to +15% (+5% or more on six)
// and f32 -8% to +14% (the noisy zipf cases at the low ends); at N = 768
// (3 KiB rows, not staged) the copy bought nothing.
constexpr int64_t kAliasingRowBytes = 2048;

bool rows_alias(int64_t row_floats) {
  return (row_floats * static_cast<int64_t>(sizeof(float))) % kAliasingRowBytes == 0;
}

// Row stride of a staging block `width` floats wide: one 64-byte line longer
// when `width` rows would alias.
int64_t staging_ld(int64_t width) { return rows_alias(width) ? width + 16 : width; }

// Whether a chunk of B is packed by the microkernel calls of its first A
// micro-panel (Microkernel::run_packing_b) rather than by pack_b before
// them: a plain f32 [K,N] weight in whole micro-panels. With one m-tile, B
// is read once per chunk and a separate packing pass ran with no FMA in
// flight: one Zen 3 core, a 32 x 64 x 256 block with its B in L3, 95 GFLOP/s
// for the FMAs alone and 72 with pack_b before them.
bool packs_b_in_microkernel(const GmmProblem& p, const Operand& rhs, int64_t cols,
                            const Microkernel& uk) {
  return uk.run_packing_b && !p.transpose_rhs && rhs.dtype == DType::kF32 && !rhs.scale.data &&
         cols % uk.nr == 0;
}

// An item of one m-tile (a small group): its A block is packed once per
// k-slice and B goes by chunks of columns, each streamed into cache while
// the previous chunk is multiplied, so DRAM and the FMAs work at once. (The
// whole-block path below packs B in one memory-bound burst, then computes:
// at 128 groups of 32 rows the two halves took 18 ms each, back to back.)
void run_small_item(const GmmProblem& p, const Schedule& s, const Microkernel& uk,
                    int64_t chunk_cols, const GroupItem& item) {
  const Tiles& t = s.tiles;
  const Operand rhs = p.rhs.group(item.group);
  const int64_t rows = item.row_end - item.row_begin;
  const int64_t width = item.col_end - item.col_begin;
  const int64_t chunk = std::min(chunk_cols, width);
  float* packed_b = workspace(Slot::kPackedB, packed_size(chunk, 1, uk.nr) * t.k);
  float* packed_a = workspace(Slot::kPackedA, packed_size(rows, t.k, uk.mr));
  const bool epilogue = p.epilogue.active();
  const OutputView out = p.output();
  // A bf16 output accumulates in the f32 staging block and is rounded once.
  const bool staged = epilogue || !out.direct() || rows_alias(p.out_cols());
  const int64_t acc_ld = staging_ld(width);
  float* acc = staged ? workspace(Slot::kAccumulator, rows * acc_ld) : nullptr;
  float* c = staged ? acc : out.f32_at(item.row_begin, item.col_begin);
  const int64_t ldc = staged ? acc_ld : p.out_cols();
  const int depth = s.input_buffer_count - 1;
  for (int64_t k0 = 0; k0 < p.k; k0 += t.k) {
    const int64_t kc = std::min(t.k, p.k - k0);
    pack_a(p.lhs, item.row_begin, rows, k0, kc, uk.mr, packed_a);
    for (int64_t c0 = 0; c0 < width; c0 += chunk) {
      const int64_t cols = std::min(chunk, width - c0);
      BSource source;
      if (packs_b_in_microkernel(p, rhs, cols, uk)) {
        source = {static_cast<const float*>(rhs.data) + k0 * rhs.ld + item.col_begin + c0,
                  rhs.ld, packed_b};
      } else {
        pack_b(rhs, p.transpose_rhs, k0, kc, item.col_begin + c0, cols, uk.nr, packed_b);
      }
      // The next chunk: this slice's, or the first of the next slice.
      NextSource next;
      if (c0 + chunk < width) {
        next = b_chunk_source(p, rhs, k0, kc, item.col_begin + c0 + chunk,
                              std::min(chunk, width - c0 - chunk));
      } else if (k0 + kc < p.k) {
        next = b_chunk_source(p, rhs, k0 + kc, std::min(t.k, p.k - k0 - kc), item.col_begin,
                              chunk);
      }
      macro_kernel(uk, kc, packed_a, rows, packed_b, cols, c + c0, ldc, k0 > 0, depth, next,
                   /*stream_stores=*/false, source);
    }
  }
  if (p.k == 0) {  // empty contraction: the product is zero
    for (int64_t r = 0; r < rows; ++r) std::fill_n(c + r * ldc, width, 0.0f);
  }
  if (epilogue) {
    apply_epilogue(p, item.group, item.row_begin, rows, item.col_begin, width, acc, acc_ld);
  } else if (staged) {
    out.store(item.row_begin, item.col_begin, acc, acc_ld, rows, width);
  }
}

void run_item(const GmmProblem& p, const Schedule& s, const Microkernel& uk, int64_t chunk_cols,
              const GroupItem& item) {
  if (!p.epilogue.swiglu && item.row_end - item.row_begin <= s.tiles.m &&
      item.col_end - item.col_begin > chunk_cols) {
    run_small_item(p, s, uk, chunk_cols, item);
    return;
  }
  const Tiles& t = s.tiles;
  const Operand rhs = p.rhs.group(item.group);
  const int64_t width = item.col_end - item.col_begin;
  const bool swiglu = p.epilogue.swiglu;
  const OutputView out = p.output();
  // A bf16 output accumulates in the f32 item block and is rounded once.
  const bool staged = p.epilogue.active() || !out.direct();
  const int64_t acc_cols = swiglu ? 2 * width : width;
  const int64_t item_rows = item.row_end - item.row_begin;
  const int64_t b_panel = packed_size(width, 1, uk.nr);  // floats per k step
  float* packed_b = workspace(Slot::kPackedB, (swiglu ? 2 : 1) * b_panel * t.k);
  float* packed_a = workspace(Slot::kPackedA, packed_size(t.m, t.k, uk.mr));
  float* acc = staged ? workspace(Slot::kAccumulator, item_rows * acc_cols) : nullptr;
  const int depth = s.input_buffer_count - 1;
  // dlhs packs its B block chunk by chunk while the first m-tile multiplies
  // each chunk, the next chunk's rows streaming in meanwhile, instead of in
  // one memory-bound burst before any FMA (the later m-tiles reuse the
  // packed block). Same-run A/B, docs/performance.md.
  const bool chunked_first_tile = p.transpose_rhs && !swiglu && width > chunk_cols;
  for (int64_t k0 = 0; k0 < p.k; k0 += t.k) {
    const int64_t kc = std::min(t.k, p.k - k0);
    const bool accumulate = k0 > 0;
    if (!chunked_first_tile) {
      pack_b(rhs, p.transpose_rhs, k0, kc, item.col_begin, width, uk.nr, packed_b);
    }
    float* packed_up = packed_b + b_panel * kc;
    if (swiglu) {
      pack_b(rhs, p.transpose_rhs, k0, kc, p.n / 2 + item.col_begin, width, uk.nr, packed_up);
    }
    for (int64_t r0 = item.row_begin; r0 < item.row_end; r0 += t.m) {
      const int64_t rows = std::min(t.m, item.row_end - r0);
      pack_a(p.lhs, r0, rows, k0, kc, uk.mr, packed_a);
      float* c = staged ? acc + (r0 - item.row_begin) * acc_cols : out.f32_at(r0, item.col_begin);
      const int64_t ldc = staged ? acc_cols : p.out_cols();
      if (chunked_first_tile && r0 == item.row_begin) {
        for (int64_t c0 = 0; c0 < width; c0 += chunk_cols) {
          const int64_t cols = std::min(chunk_cols, width - c0);
          float* chunk = packed_b + c0 * kc;  // c0 is whole panels of nr
          pack_b(rhs, p.transpose_rhs, k0, kc, item.col_begin + c0, cols, uk.nr, chunk);
          NextSource next;
          if (c0 + chunk_cols < width) {
            next = b_chunk_source(p, rhs, k0, kc, item.col_begin + c0 + chunk_cols,
                                  std::min(chunk_cols, width - c0 - chunk_cols));
          }
          macro_kernel(uk, kc, packed_a, rows, chunk, cols, c + c0, ldc, accumulate, depth, next);
        }
        continue;
      }
      macro_kernel(uk, kc, packed_a, rows, packed_b, width, c, ldc, accumulate, depth);
      if (swiglu) {
        macro_kernel(uk, kc, packed_a, rows, packed_up, width, c + width, acc_cols, accumulate,
                     depth);
      }
    }
  }
  if (p.k == 0) {  // empty contraction: the product is zero
    if (staged) {
      std::fill(acc, acc + item_rows * acc_cols, 0.0f);
    } else {
      out.zero(item.row_begin, item.col_begin, item_rows, width);
    }
  }
  if (p.epilogue.active()) {
    apply_epilogue(p, item.group, item.row_begin, item_rows, item.col_begin, width, acc,
                   acc_cols);
  } else if (staged) {
    out.store(item.row_begin, item.col_begin, acc, acc_cols, item_rows, width);
  }
}

}  // namespace

void gmm_v2(const GmmProblem& p, const Schedule& s) {
  // bf16 x bf16 runs on bf16 dot products where the CPU has them.
  if (bf16_dot_fits(p)) {
    if (const Bf16Microkernel* bf16 = select_bf16_microkernel()) {
      bf16_gmm(p, s, *bf16);
      return;
    }
  }
  const Microkernel uk = select_microkernel();
  const int64_t chunk_cols = b_chunk_cols(this_machine_model(s.threads).caches.l2, s.tiles.k,
                                          uk.nr, /*streamed_by_rows=*/!p.transpose_rhs);
  const DriverItems d{p.starts, p.group_offset, p.local_groups, p.m, p.out_cols(),
                      s.tiles.m * kRowTilesPerItem, s.tiles.n, /*row_overhead=*/0};
  for_each_group_item(d, p.output(), s.threads,
                      [&](const GroupItem& item) { run_item(p, s, uk, chunk_cols, item); });
}

}  // namespace raggemm::kernels
