#include "kernels/pack.h"

#include <algorithm>
#include <cstring>

#include "kernels/decode.h"
#include "kernels/decode_fp8.h"
#include "kernels/interleave.h"
#include "kernels/row_panels.h"
#include "kernels/widen.h"
#include "kernels/workspace.h"

namespace raggemm::kernels {

namespace {

// Rows [r, r + rows) x columns [c0, c0 + count) of `src` as contiguous f32:
// the data itself for plain f32, else decoded into a per-thread scratch block.
// Returns the first row; *ld receives the row stride.
const float* f32_rows(const Operand& src, int64_t r, int64_t rows, int64_t c0, int64_t count,
                      int64_t* ld) {
  if (src.dtype == DType::kF32 && !src.scale.data) {
    *ld = src.ld;
    return static_cast<const float*>(src.data) + r * src.ld + c0;
  }
  float* block = workspace(Slot::kDecoded, rows * count);
  for (int64_t i = 0; i < rows; ++i) decode_span(src, r + i, c0, count, block + i * count, 1);
  *ld = count;
  return block;
}

// Whether an fp8 operand's rows decode with one scale or per-column scales
// one apart (what decode_fp8_panels takes).
bool fp8_rows_decode_in_place(const Operand& src) {
  if (src.dtype != DType::kF8E4M3 && src.dtype != DType::kF8E5M2) return false;
  const OperandScale& s = src.scale;
  return !s.data || s.col_stride == 0 || (s.col_block == 1 && s.col_stride == 1);
}

// Packs rows [r, r + rows) of `src` (depth along columns [c0, c0 + kc)) into
// panels of `width` rows each.
// f32 and unscaled bf16 rows are interleaved straight from the source (bf16
// widened in the same pass: staging bf16 rows in f32 first held bf16 dlhs at
// 2048 x 768, 32 groups, to 1.01x f32's speed, against 1.07x without).
// Other operands go through a staging block, in depth chunks small enough
// for the block to stay in L1 between decoding and interleaving (32 rows x
// 256 x 4 bytes = 32 KiB; a whole 1024-deep dlhs panel staged at once
// spilled to L2, and bf16 dlhs ran at 0.87x f32).
constexpr int64_t kDecodeDepthChunk = 256;

// B's column panels: full panels of `width`, then the remainder.
struct FullPanels {
  int64_t count = 0;
  int64_t total = 0;
  int width = 1;
  int64_t first_row(int64_t panel) const { return panel * width; }
  int rows(int64_t panel) const {
    return static_cast<int>(std::min<int64_t>(width, total - panel * width));
  }
};

FullPanels full_panels(int64_t total, int width) {
  return {(total + width - 1) / width, total, width};
}

// Panel p holds split.rows(p) rows from split.first_row(p) on, in a slot of
// `width` rows (RowPanels for A, FullPanels for B).
template <class Split>
void pack_row_panels(const Operand& src, int64_t r, const Split& split, int64_t c0, int64_t kc,
                     int width, float* dst) {
  const bool plain_f32 = src.dtype == DType::kF32 && !src.scale.data;
  const bool plain_bf16 = src.dtype == DType::kBF16 && !src.scale.data;
  const int64_t chunk = plain_f32 ? std::max<int64_t>(kc, 1) : kDecodeDepthChunk;
  for (int64_t panel = 0; panel < split.count; ++panel) {
    const int height = split.rows(panel);
    const int64_t first = r + split.first_row(panel);
    float* panel_dst = dst + panel * width * kc;
    if (plain_bf16) {
      const uint16_t* rows_bf16 = static_cast<const uint16_t*>(src.data) + first * src.ld + c0;
      interleave_rows_bf16(rows_bf16, src.ld, height, kc, width, panel_dst);
      continue;
    }
    for (int64_t d = 0; d < kc; d += chunk) {
      const int64_t depth = std::min(chunk, kc - d);
      int64_t ld = 0;
      const float* block = f32_rows(src, first, height, c0 + d, depth, &ld);
      interleave_rows(block, ld, height, depth, width, panel_dst + d * width);
    }
  }
}

}  // namespace

void pack_a(const Operand& src, int64_t r0, int64_t rows, int64_t k0, int64_t kc, int mr,
            float* dst) {
  pack_row_panels(src, r0, row_panels(rows, mr), k0, kc, mr, dst);
}

// Each token row's run of `rows` values goes into the panels, mr values per
// panel: the f32 source is copied straight from the row; any other type is
// decoded a whole run at a time into a line (L1) and copied from there. (A
// decode per panel, mr values a call, never reached the vector decoders'
// blocks: callgrind, tgmm M = 512, K = N = 256, 16 groups, outside the
// microkernel's 11.0M instructions, fp8 took 2.85M with the line against
// about 8.9M at 393fd2e (the old decoder and per-row panels included);
// bf16 2.4M against 4.7M.)
void pack_a_transposed(const Operand& src, int64_t t0, int64_t kc, int64_t c0, int64_t rows,
                       int64_t valid_begin, int64_t valid_end, int mr, float* dst) {
  const RowPanels split = row_panels(rows, mr);
  const bool plain_f32 = src.dtype == DType::kF32 && !src.scale.data;
  float* line = plain_f32 ? nullptr : scratch_line(rows);
  for (int64_t p = 0; p < kc; ++p) {
    const int64_t t = t0 + p;
    const bool valid = t >= valid_begin && t < valid_end;
    const float* row = nullptr;
    if (valid && plain_f32) {
      row = static_cast<const float*>(src.data) + t * src.ld + c0;
    } else if (valid) {
      decode_span(src, t, c0, rows, line, 1);
      row = line;
    }
    for (int64_t panel = 0; panel < split.count; ++panel) {
      float* out = dst + panel * mr * kc + p * mr;
      const int64_t count = row ? split.rows(panel) : 0;
      if (count > 0) std::memcpy(out, row + split.first_row(panel), sizeof(float) * count);
      std::fill(out + count, out + mr, 0.0f);
    }
  }
}

void pack_b(const Operand& src, bool transposed, int64_t k0, int64_t kc, int64_t n0,
            int64_t cols, int nr, float* dst) {
  const int64_t panels = (cols + nr - 1) / nr;
  const int64_t padded = panels * nr;
  if (!transposed && src.dtype == DType::kBF16 && !src.scale.data) {
    // bf16 widens in the same pass that lays out the panels (at 128 groups
    // of 32 rows, staging each row in f32 first cost 0.83x f32's speed).
    widen_bf16_panels(static_cast<const uint16_t*>(src.data) + k0 * src.ld + n0, src.ld, kc, cols,
                      nr, dst);
    return;
  }
  if (!transposed && fp8_rows_decode_in_place(src)) {
    // fp8 decodes straight into the panels: no staging row to copy. Rows
    // sharing their scales (a block of row_block rows) go in one call.
    const OperandScale& s = src.scale;
    const uint8_t* codes = static_cast<const uint8_t*>(src.data);
    const bool one_scale_for_all_rows = !s.data || s.row_stride == 0;
    for (int64_t p = 0; p < kc;) {
      const int64_t row = k0 + p;
      const int64_t rows =
          one_scale_for_all_rows ? kc - p : std::min(kc - p, s.row_block - row % s.row_block);
      const float* row_scales = s.data ? s.data + (row / s.row_block) * s.row_stride : nullptr;
      const bool per_column = row_scales && s.col_stride != 0;
      decode_fp8_panels(src.dtype, codes + row * src.ld + n0, src.ld, rows, cols, nr, nr * kc,
                        row_scales && !per_column ? row_scales[0] : 1.0f,
                        per_column ? row_scales + n0 : nullptr, dst + p * nr);
      p += rows;
    }
    return;
  }
  if (!transposed) {
    const bool plain_f32 = src.dtype == DType::kF32 && !src.scale.data;
    float* line = plain_f32 ? nullptr : scratch_line(padded);
    for (int64_t p = 0; p < kc; ++p) {
      const float* row;
      if (plain_f32 && cols == padded) {
        row = static_cast<const float*>(src.data) + (k0 + p) * src.ld + n0;
      } else {
        if (!line) line = scratch_line(padded);
        decode_span(src, k0 + p, n0, cols, line, 1);
        std::fill(line + cols, line + padded, 0.0f);
        row = line;
      }
      for (int64_t panel = 0; panel < panels; ++panel) {
        std::memcpy(dst + panel * nr * kc + p * nr, row + panel * nr, sizeof(float) * nr);
      }
    }
    return;
  }
  // Transposed source: each source row is one packed column j.
  pack_row_panels(src, n0, full_panels(cols, nr), k0, kc, nr, dst);
}

}  // namespace raggemm::kernels
