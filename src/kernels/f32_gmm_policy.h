// The f32 microkernel's configuration of the gmm driver (gmm_driver.h), run
// by gmm v2 (gmm_v2.cc) and, with v1's masked tiles, by gmm v1 (gmm_v1.cc),
// and the choices it makes from the problem and the machine model: the
// column chunk a small item streams B in by, where that chunk lies in the
// source, and when an item accumulates in a staging block.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/dlhs_weight_rows.h"
#include "kernels/epilogue.h"
#include "kernels/gmm_driver.h"
#include "kernels/gmm_kernel.h"
#include "kernels/macro_kernel.h"
#include "kernels/pack.h"
#include "kernels/swiglu_stage.h"

namespace raggemm::kernels {

// Columns of B a chunked item packs and multiplies at a time (an eighth of
// L2 for a kc-deep chunk), whole nr panels; a power of two of them when the
// chunk is streamed in by rows of a [K,N] weight (b_chunk_source).
int64_t b_chunk_cols(int64_t l2_bytes, int64_t kc, int nr, bool streamed_by_rows);

// Where the chunk of B at (k0, c0) lies in the rhs source, for streaming it
// in ahead of its packing; none when it is not whole lines in rows of a
// power-of-two number of lines.
NextSource b_chunk_source(const GmmProblem& p, const Operand& rhs, int64_t k0, int64_t kc,
                          int64_t c0, int64_t cols);

// Whether output rows `row_floats` apart alias in L1's sets, and the row
// stride of a staging block `width` floats wide that avoids it.
bool rows_alias(int64_t row_floats);
int64_t staging_ld(int64_t width);

// Whether the weight's chunks can be packed by the microkernel calls of
// their first A micro-panel (Microkernel::run_packing_b) rather than before
// them: a plain f32 [K,N] weight, each group's as its base's.
bool weight_packable_in_microkernel(const GmmProblem& p, const Microkernel& uk);

// The f32 microkernel's configuration of the gmm driver (gmm_driver.h, K-blocks
// outer), which decodes, widens and dequantizes every operand type into f32
// panels (fp8, bf16 on a CPU without bf16 dot products, scaled operands).
//
// An item of one m-tile (a small group) takes B by chunks of columns, each
// streamed into cache while the previous chunk is multiplied, so DRAM and the
// FMAs work at once: packing a whole K-block of B first is one memory-bound
// burst before any FMA (at 128 groups of 32 rows the two halves took 18 ms
// each, back to back). A plain f32 [K,N] weight's chunk is then packed by the
// microkernel calls of the first A micro-panel (weight_packable_in_microkernel).
// dlhs packs its B block the same way, chunk by chunk with the first m-tile,
// and the later m-tiles reuse the packed block. Same-run A/B,
// docs/performance.md.
struct F32GmmPolicy {
  using Acc = float;
  static constexpr bool kKOuter = true;
  const GmmProblem& p;
  const Microkernel& uk;
  OutputView out;
  int64_t k, kc, tm;
  int64_t small_chunk;  // a chunked item's columns per chunk (b_chunk_cols)
  int depth;            // A micro-panels prefetched ahead (input_buffer_count - 1)
  // Whether a deferrable chunk is packed by the microkernel: asked for, and
  // the weight allows it (b_packing_choice.h decides the asking).
  bool b_in_microkernel;
  // Items of at most this many rows run dlhs from the weight's rows
  // (dlhs_weight_rows.h); 0: none (v1, and problems it cannot take).
  int64_t weight_rows_max_rows = 0;

  F32GmmPolicy(const GmmProblem& problem, const Schedule& s, const Microkernel& kernel,
               int64_t chunk_cols, bool b_packed_in_microkernel = false)
      : p(problem),
        uk(kernel),
        out(problem.output()),
        k(problem.k),
        kc(s.tiles.k),
        tm(s.tiles.m),
        small_chunk(chunk_cols),
        depth(s.input_buffer_count - 1),
        b_in_microkernel(b_packed_in_microkernel &&
                         weight_packable_in_microkernel(problem, kernel)) {}

  bool ran_item_itself(const GroupItem& item) const {
    if (item.rows() > weight_rows_max_rows) return false;
    run_dlhs_weight_rows_item(p, uk, kc, item);
    return true;
  }

  bool swiglu() const { return p.epilogue.swiglu; }
  bool one_tile(const GroupItem& item) const { return item.rows() <= tm; }
  bool chunked(const GroupItem& item) const {
    return !swiglu() && item.cols() > small_chunk && (one_tile(item) || p.transpose_rhs);
  }
  int64_t chunk_cols(const GroupItem& item) const {
    return chunked(item) ? small_chunk : item.cols();
  }

  // A bf16 output, an accumulated one and the epilogue's inputs accumulate in
  // the f32 item block; so does a one-tile item whose rows alias in L1.
  int64_t acc_ld(const GroupItem& item) const {
    const int64_t w = item.cols();
    if (chunked(item) && one_tile(item)) {
      const bool staged = p.epilogue.active() || !out.direct() || rows_alias(p.out_cols());
      return staged ? staging_ld(w) : 0;
    }
    const bool staged = p.epilogue.active() || !out.direct();
    return staged ? (swiglu() ? 2 * w : w) : 0;
  }
  float* out_at(int64_t row, int64_t col) const { return out.f32_at(row, col); }
  int64_t out_ld() const { return p.out_cols(); }

  int64_t a_bytes(int64_t rows, int64_t depth_k) const {
    return packed_size(rows, depth_k, uk.mr) * int64_t{sizeof(float)};
  }
  // With swiglu a block holds the gate columns' panels, then the up ones'.
  int64_t b_bytes(int64_t cols, int64_t depth_k) const {
    return (swiglu() ? 2 : 1) * b_offset(cols, depth_k);
  }
  int64_t b_offset(int64_t c0, int64_t depth_k) const {
    return packed_size(c0, 1, uk.nr) * depth_k * int64_t{sizeof(float)};
  }

  void pack_a(int64_t r0, int64_t rows, int64_t k0, int64_t depth_k, char* dst) const {
    kernels::pack_a(p.lhs, r0, rows, k0, depth_k, uk.mr, reinterpret_cast<float*>(dst));
  }

  // A deferrable chunk of a plain f32 [K,N] weight is left to the microkernel
  // (the returned source) where this machine packs it faster so; every other
  // block is packed here.
  BSource pack_b(const GroupItem& item, int64_t k0, int64_t depth_k, int64_t c0, int64_t cols,
                 char* dst, bool deferrable) const {
    const Operand rhs = p.rhs.group(item.group);
    float* packed = reinterpret_cast<float*>(dst);
    if (deferrable && b_in_microkernel && cols % uk.nr == 0) {  // whole micro-panels
      return {static_cast<const float*>(rhs.data) + k0 * rhs.ld + c0, rhs.ld, packed};
    }
    kernels::pack_b(rhs, p.transpose_rhs, k0, depth_k, c0, cols, uk.nr, packed);
    if (swiglu()) {
      kernels::pack_b(rhs, p.transpose_rhs, k0, depth_k, p.n / 2 + c0, cols, uk.nr,
                      reinterpret_cast<float*>(dst + b_offset(cols, depth_k)));
    }
    return {};
  }

  NextSource next_source(const GroupItem& item, int64_t k0, int64_t depth_k, int64_t c0,
                         int64_t cols) const {
    return b_chunk_source(p, p.rhs.group(item.group), k0, depth_k, c0, cols);
  }

  void multiply_block(const GroupItem& item, int64_t depth_k, const char* a, int64_t rows,
                      const char* b, int64_t cols, float* c, int64_t ldc, bool accumulate,
                      const NextSource& next, const BSource& unpacked) const {
    const float* packed_a = reinterpret_cast<const float*>(a);
    macro_kernel(uk, depth_k, packed_a, rows, reinterpret_cast<const float*>(b), cols, c, ldc,
                 accumulate, depth, next, /*stream_stores=*/false, unpacked);
    if (swiglu()) {  // the up half, packed and accumulated beside the gate half
      const int64_t w = item.cols();
      macro_kernel(uk, depth_k, packed_a, rows,
                   reinterpret_cast<const float*>(b + b_offset(w, depth_k)), w, c + w, ldc,
                   accumulate, depth);
    }
  }

  void finish(const GroupItem& item, int64_t c0, int64_t cols, float* acc, int64_t ldc) const {
    const int64_t rows = item.rows();
    if (k == 0) {  // empty contraction: the product is zero
      if (acc) {
        for (int64_t r = 0; r < rows; ++r) std::fill_n(acc + r * ldc, ldc, 0.0f);
      } else {
        out.zero(item.row_begin, c0, rows, cols);
      }
    }
    if (p.epilogue.active()) {
      apply_epilogue(p, item.group, item.row_begin, rows, c0, cols, acc, ldc);
    } else if (acc) {
      out.store(item.row_begin, c0, acc, ldc, rows, cols);
    }
    apply_swiglu_stage(p, item.row_begin, rows, c0, cols);
  }
};

// gmm v2 on the f32 microkernel `uk`, with the small items' B chunks packed
// inside the microkernel or by pack_b (gmm_v2 asks b_packing_choice.h which;
// the probe and the tests choose), and dlhs's small items from the weight's
// rows where the problem allows it (dlhs_weight_rows.h; the tests run both
// ways).
void gmm_v2_f32(const GmmProblem& p, const Schedule& s, const Microkernel& uk,
                bool b_in_microkernel, bool dlhs_from_weight_rows = true);

}  // namespace raggemm::kernels
