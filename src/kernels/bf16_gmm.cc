// The bf16 dot-product paths (bf16_gmm.h). gmm: a configuration of the gmm
// driver (kernels/gmm_driver.h), work items (group, up to kRowTilesPerItem
// m-tiles of its rows, n-tile) as in gmm v2, each packing a K-block of its
// B tile once and reusing it for its m-tiles. tgmm: a configuration of the
// tgmm driver (kernels/tgmm_driver.h), one item per output tile (group,
// K-tile, N-tile) walking the group's tokens from its first row, as tgmm
// v2. Slices of the contraction (twice tiles.k, below) are rounded up to
// the kernel's packed step (a pair, or the AMX kernel's 32-k block) so no
// step straddles two slices.
#include "kernels/bf16_gmm.h"

#include <algorithm>

#include "kernels/bf16_pack.h"
#include "kernels/gmm_driver.h"
#include "kernels/swiglu_stage.h"
#include "kernels/tgmm_driver.h"

namespace raggemm::kernels {
namespace {

const uint16_t* bits(const Operand& op) { return static_cast<const uint16_t*>(op.data); }

bool plain_bf16(const Operand& op) { return op.dtype == DType::kBF16 && !op.scale.data; }

// Bytes a row of A or a column of B takes per pair of k.
constexpr int64_t kPairBytes = 2 * sizeof(uint16_t);

// Consecutive k one packed step of the kernel's layout holds: a pair, or the
// AMX kernel's block of 32.
int64_t k_step(const Bf16Microkernel& uk) {
  return uk.layout == Bf16Layout::kTileBlocks ? kAmxBlockK : 2;
}

int64_t round_up(int64_t x, int64_t step) { return (x + step - 1) / step * step; }

// The depth a slice of kc k is packed to (zeros past kc).
int64_t packed_depth(const Bf16Microkernel& uk, int64_t kc) { return round_up(kc, k_step(uk)); }

// Depth of a slice of the contraction: twice the tiles' k, which the machine
// model sized for packed f32 panels (the same bytes hold twice as many bf16),
// rounded up to the kernel's step.
int64_t slice_depth(const Bf16Microkernel& uk, int64_t tile_k) {
  return packed_depth(uk, std::max<int64_t>(2, tile_k * 2));
}

// A rows [r0, r0 + count) over k [k0, k0 + kc) of a row-major [.., K] source
// (gmm's lhs, dlhs's dout), in the kernel's A layout.
void pack_a_along_rows(const Bf16Microkernel& uk, const uint16_t* src, int64_t ld, int64_t r0,
                       int64_t count, int64_t k0, int64_t kc, uint16_t* dst) {
  if (uk.layout == Bf16Layout::kTileBlocks) {
    pack_blocks_along_rows(src, ld, r0, count, k0, kc, uk.mr, dst);
  } else {
    pack_pairs_along_rows(src, ld, r0, count, k0, kc, uk.mr, dst);
  }
}

// A = src^T over tokens [t0, t0 + kc) (zero at or past end), rows
// [c0, c0 + count): tgmm's lhs, in the kernel's A layout.
void pack_a_down_columns(const Bf16Microkernel& uk, const uint16_t* src, int64_t ld, int64_t t0,
                         int64_t kc, int64_t end, int64_t c0, int64_t count, uint16_t* dst) {
  if (uk.layout == Bf16Layout::kTileBlocks) {
    pack_blocks_down_columns(src, ld, t0, kc, end, c0, count, uk.mr, dst);
  } else {
    pack_pairs_down_columns(src, ld, t0, kc, end, c0, count, uk.mr, dst);
  }
}

// Streamed tiles of a contraction this short are bound by their stores; they
// go along the rows instead (as macro_kernel.cc's row bands).
constexpr int64_t kRowBandMaxDepth = 16;

// C[0:rows, 0:cols] (= or +=) A_packed * B_packed for tgmm's tiles.
void macro_kernel_bf16(const Bf16Microkernel& uk, int64_t kc, const uint16_t* a, int64_t rows,
                       const uint16_t* b, int64_t cols, float* c, int64_t ldc, Store store) {
  const int64_t kp = pairs_of(packed_depth(uk, kc));
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
  multiply_panels(reinterpret_cast<const char*>(a), PanelLayout{uk.mr, kPairBytes, kp}, rows,
                  reinterpret_cast<const char*>(b), PanelLayout{uk.nr, kPairBytes, kp}, cols, c,
                  ldc, [&](const char* ap, const char* bp, float* cp, int64_t ld, int h, int w) {
                    uk.run(kp, reinterpret_cast<const uint16_t*>(ap),
                           reinterpret_cast<const uint16_t*>(bp), cp, ld, h, w, store);
                  });
}

// Columns of B packed and multiplied at a time by an item of one m-tile (a
// small group): the packed chunk stays in L2 instead of a whole k-slice of
// B being packed past it and read back (as gmm v2's small items).
constexpr int64_t kChunkCols = 128;

// The bf16 configuration of the gmm driver (kernels/gmm_driver.h): steps of
// the kernel's layout (pairs of k, or 32-k blocks), the bf16 dot
// microkernel from the registry, f32 accumulation in place
// for an f32 output (else in the chunk's f32 block, which the output's store
// stage writes once). An item of one m-tile walks its columns in chunks of
// kChunkCols with its A packed once over all of K; a larger item takes its
// columns in one chunk and packs A per m-tile and K-block.
struct Bf16GmmPolicy {
  using Acc = float;
  static constexpr bool kKOuter = false;
  const GmmProblem& p;
  const Bf16Microkernel& uk;
  OutputView out;
  int mr, nr;
  int k_group;
  int64_t a_step_bytes, b_step_bytes;  // a row / column per step: its k as bf16
  int64_t k, n, kc, tm, tn;

  Bf16GmmPolicy(const GmmProblem& problem, const Schedule& s, const Bf16Microkernel& kernel)
      : p(problem),
        uk(kernel),
        out(problem.output()),
        mr(kernel.mr),
        nr(kernel.nr),
        k_group(static_cast<int>(k_step(kernel))),
        a_step_bytes(k_group * static_cast<int64_t>(sizeof(uint16_t))),
        b_step_bytes(a_step_bytes),
        k(problem.k),
        n(problem.n),
        kc(slice_depth(kernel, s.tiles.k)),
        tm(whole_panels(s.tiles.m, kernel.mr)),
        tn(whole_panels(s.tiles.n, kernel.nr)) {}

  int64_t chunk_cols(const GroupItem& item) const {
    return item.rows() <= tm ? kChunkCols : item.cols();
  }
  bool pack_a_whole_k(int64_t chunks) const { return chunks > 1; }
  bool accumulates_in_place() const { return out.direct(); }
  float* out_at(int64_t row, int64_t col) const { return out.f32_at(row, col); }

  void pack_a(int64_t r0, int64_t rows, int64_t k0, int64_t depth, char* dst) const {
    pack_a_along_rows(uk, bits(p.lhs), p.lhs.ld, r0, rows, k0, depth,
                      reinterpret_cast<uint16_t*>(dst));
  }

  void pack_b(const GroupItem& item, int64_t k0, int64_t depth, int64_t c0, int64_t cols,
              char* dst) const {
    const Operand rhs = p.rhs.group(item.group);
    uint16_t* packed = reinterpret_cast<uint16_t*>(dst);
    const int64_t padded = packed_depth(uk, depth);  // zero pairs past K
    if (p.transpose_rhs) {  // rhs [N, K]: pairs along its rows
      pack_pairs_along_rows(bits(rhs), rhs.ld, c0, cols, k0, depth, nr, packed, padded);
    } else {  // rhs [K, N]: pairs down its columns
      pack_pairs_down_columns(bits(rhs), rhs.ld, k0, padded, k, c0, cols, nr, packed);
    }
  }

  void multiply(int64_t steps, const char* a, const char* b, float* c, int64_t ldc, int rows,
                int cols, bool accumulate) const {
    uk.run(steps * k_group / 2, reinterpret_cast<const uint16_t*>(a),
           reinterpret_cast<const uint16_t*>(b), c, ldc, rows, cols,
           accumulate ? Store::kAccumulate : Store::kOverwrite);
  }

  void finish(const GroupItem& item, int64_t c0, int64_t cols, const float* acc,
              int64_t ldc) const {
    const int64_t rows = item.rows();
    if (k == 0) {  // empty contraction: the product is zero
      out.zero(item.row_begin, c0, rows, cols);
    } else if (acc) {
      out.store(item.row_begin, c0, acc, ldc, rows, cols);
    }
    apply_swiglu_stage(p, item.row_begin, rows, c0, cols);
  }
};

// The bf16 configuration of the tgmm driver (kernels/tgmm_driver.h), v2's
// slices from each group's first row: pairs (or the AMX kernel's 32-k
// blocks) of tokens, the bf16 dot microkernel from the registry.
struct Bf16TgmmPolicy {
  using Packed = uint16_t;
  const TgmmProblem& p;
  const Bf16Microkernel& uk;
  int mr;
  int64_t kc_max;

  Bf16TgmmPolicy(const TgmmProblem& problem, const Schedule& s, const Bf16Microkernel& kernel)
      : p(problem), uk(kernel), mr(kernel.mr), kc_max(slice_depth(kernel, s.tiles.k)) {}

  int64_t packed_a_size(int64_t rows) const { return bf16_packed_size(rows, kc_max, uk.mr); }
  int64_t packed_b_size(int64_t cols) const { return bf16_packed_size(cols, kc_max, uk.nr); }

  // A slice starts at or past the group's first token
  // (TgmmSlicing::kFromGroupStart), so only its end masks; a slice that
  // ends inside a step reads zeros past it.
  void pack_a(int64_t t0, int64_t kc, int64_t /*begin*/, int64_t end, int64_t row0, int64_t rows,
              uint16_t* dst) const {
    pack_a_down_columns(uk, bits(p.lhs), p.lhs.ld, t0, kc, end, row0, rows, dst);
  }
  void pack_b(int64_t t0, int64_t kc, int64_t end, int64_t col0, int64_t cols,
              uint16_t* dst) const {
    pack_pairs_down_columns(bits(p.dout), p.dout.ld, t0, packed_depth(uk, kc), end, col0, cols,
                            uk.nr, dst);
  }

  void multiply(int64_t kc, const uint16_t* a, int64_t rows, const uint16_t* b, int64_t cols,
                float* c, int64_t ldc, Store store) const {
    macro_kernel_bf16(uk, kc, a, rows, b, cols, c, ldc, store);
  }

  void zero_tile(float* c, int64_t rows, int64_t cols, int64_t ldc, bool /*read_back*/) const {
    kernels::zero_tile(c, rows, cols, ldc);
  }
};

}  // namespace

bool bf16_dot_fits(const GmmProblem& p) {
  return plain_bf16(p.lhs) && plain_bf16(p.rhs.base) && !p.epilogue.active();
}

bool bf16_dot_fits(const TgmmProblem& p) { return plain_bf16(p.lhs) && plain_bf16(p.dout); }

void bf16_gmm(const GmmProblem& p, const Schedule& s, const Bf16Microkernel& uk) {
  const Bf16GmmPolicy policy(p, s, uk);
  DriverItems d{p.starts, p.group_offset, p.local_groups, p.m, p.n};
  d.rows_per_item = policy.tm * kRowTilesPerItem;
  d.col_step = policy.tn;
  d.row_overhead = 8;  // the B slice is packed whatever the rows: a few rows still cost it
  zero_swiglu_stage_uncovered(p);
  run_driver(policy, d, p.output(), s.threads);
}

void bf16_tgmm(const TgmmProblem& p, const Schedule& s, const Bf16Microkernel& uk) {
  run_tgmm(p, s, Bf16TgmmPolicy(p, s, uk), TgmmSlicing::kFromGroupStart);
}

}  // namespace raggemm::kernels
