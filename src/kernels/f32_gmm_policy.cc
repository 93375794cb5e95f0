// The f32 configuration's choices (f32_gmm_policy.h), with the measurements
// behind them.
#include "kernels/f32_gmm_policy.h"

#include <algorithm>

namespace raggemm::kernels {

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

// Whether the weight's chunks can be packed by the microkernel calls of
// their first A micro-panel (Microkernel::run_packing_b) rather than by
// pack_b before them: a plain f32 [K,N] weight (the chunk then in whole
// micro-panels, F32GmmPolicy::pack_b). With one m-tile, B
// is read once per chunk and a separate packing pass ran with no FMA in
// flight: one Zen 3 core, a 32 x 64 x 256 block with its B in L3, 95 GFLOP/s
// for the FMAs alone and 72 with pack_b before them. Whether it then is
// depends on the CPU, measured (b_packing_choice.h).
bool weight_packable_in_microkernel(const GmmProblem& p, const Microkernel& uk) {
  return uk.run_packing_b && !p.transpose_rhs && p.rhs.base.dtype == DType::kF32 &&
         !p.rhs.base.scale.data;
}

}  // namespace raggemm::kernels
