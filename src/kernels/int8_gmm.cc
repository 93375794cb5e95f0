// Driver of the int8 forward gmm (int8_gmm.h): group-aligned work items
// (group, up to kRowTilesPerItem m-tiles, n-tile) and per-thread buffers
// shared with gmm v2 (group_items.h, workspace.h). An item packs
// its whole B tile (K x tn codes, in k-quads) once with the column sums the
// biased-A kernels need, then for each m-tile packs A and runs the
// microkernel over k-slices into an i32 tile, and finally applies
// (acc - 128 * colsum) * row_scale * col_scale.
#include "kernels/int8_gmm.h"

#include <algorithm>
#include <cstring>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "kernels/group_items.h"
#include "kernels/parallel.h"
#include "kernels/workspace.h"

namespace raggemm::kernels {
namespace {

int64_t quads(int64_t k) { return (k + 3) / 4; }

// Tile n rounded to whole micro-panels so only the last panel is ragged.
int64_t tile_columns(const Schedule& s, const Int8Microkernel& uk) {
  return whole_panels(s.tiles.n, uk.nr);
}

// out[j * 4 + t] = rows[t][j] for j below a multiple of 16 of `cols`, with
// SSE2 byte/word unpacks (x86-64 baseline); returns how many columns it did.
int64_t interleave_quads(const int8_t* const rows[4], int64_t cols, int8_t* out) {
#if defined(__SSE2__)
  int64_t j = 0;
  for (; j + 16 <= cols; j += 16) {
    auto load = [&](int t) {
      return _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[t] + j));
    };
    const __m128i r0 = load(0), r1 = load(1), r2 = load(2), r3 = load(3);
    const __m128i pairs01_lo = _mm_unpacklo_epi8(r0, r1), pairs01_hi = _mm_unpackhi_epi8(r0, r1);
    const __m128i pairs23_lo = _mm_unpacklo_epi8(r2, r3), pairs23_hi = _mm_unpackhi_epi8(r2, r3);
    __m128i* dst = reinterpret_cast<__m128i*>(out + j * 4);
    _mm_storeu_si128(dst + 0, _mm_unpacklo_epi16(pairs01_lo, pairs23_lo));
    _mm_storeu_si128(dst + 1, _mm_unpackhi_epi16(pairs01_lo, pairs23_lo));
    _mm_storeu_si128(dst + 2, _mm_unpacklo_epi16(pairs01_hi, pairs23_hi));
    _mm_storeu_si128(dst + 3, _mm_unpackhi_epi16(pairs01_hi, pairs23_hi));
  }
  return j;
#else
  (void)rows;
  (void)cols;
  (void)out;
  return 0;
#endif
}

// B panels for columns [c0, c0 + width) of a [K, N] row-major matrix: panel
// q holds columns c0 + q*nr .. in the quad layout, over all of K. Loops run
// over contiguous bytes without divisions: packing reads every weight byte
// once per item, so it must stay cheap. Quads go outermost, so the source
// is read 4 whole row spans at a time (panel by panel, each row gave up
// half a line and jumped N bytes: the hardware prefetcher did not keep up),
// with the rows kAheadQuads quads ahead prefetched.
void pack_b(const int8_t* b, int64_t k, int64_t n, int64_t c0, int64_t width, int nr, int8_t* dst) {
  constexpr int64_t kAheadQuads = 4;
  const int64_t kq = quads(k);
  const int64_t panels = (width + nr - 1) / nr;
  static const int8_t kZeros[64] = {};  // >= any nr
  for (int64_t p = 0; p < kq; ++p) {
    for (int64_t kk = 4 * (p + kAheadQuads); kk < std::min(k, 4 * (p + kAheadQuads + 1)); ++kk) {
      const int8_t* ahead = b + kk * n + c0;
      for (int64_t j = 0; j < width; j += 64) __builtin_prefetch(ahead + j);
      __builtin_prefetch(ahead + width - 1);
    }
    const int8_t* rows[4];
    for (int t = 0; t < 4; ++t) {
      const int64_t kk = 4 * p + t;
      rows[t] = kk < k ? b + kk * n + c0 : kZeros;
    }
    for (int64_t q = 0; q < panels; ++q) {
      const int64_t cols = std::min<int64_t>(nr, width - q * nr);
      const int8_t* panel_rows[4];
      for (int t = 0; t < 4; ++t) panel_rows[t] = rows[t] == kZeros ? kZeros : rows[t] + q * nr;
      int8_t* out = dst + (q * kq + p) * nr * 4;
      int64_t j = interleave_quads(panel_rows, cols, out);
      for (; j < cols; ++j) {
        out[j * 4 + 0] = panel_rows[0][j];
        out[j * 4 + 1] = panel_rows[1][j];
        out[j * 4 + 2] = panel_rows[2][j];
        out[j * 4 + 3] = panel_rows[3][j];
      }
      if (cols < nr) std::memset(out + cols * 4, 0, static_cast<size_t>((nr - cols) * 4));
    }
  }
}

// Column sums of packed B panels, for the biased-A correction, computed by
// the microkernel itself: one A row of ones (as unsigned bytes) times B.
void column_sums_of(const Int8Microkernel& uk, const int8_t* packed_b, int64_t kq, int64_t panels,
                    uint8_t* ones_panel, int32_t* sums) {
  std::memset(ones_panel, 0, static_cast<size_t>(kq * uk.mr * 4));
  for (int64_t p = 0; p < kq; ++p) std::memset(ones_panel + p * uk.mr * 4, 1, 4);
  for (int64_t q = 0; q < panels; ++q) {
    uk.run(kq, ones_panel, packed_b + q * kq * uk.nr * 4, sums + q * uk.nr, uk.nr, 1, uk.nr, false);
  }
}

// A micro-panels for rows [r0, r0 + rows) over all of K (biased: + 128, as
// a xor of the sign bit). Rows past `rows` and k past K are zero.
void pack_a(const int8_t* a, int64_t k, int64_t r0, int64_t rows, int mr, bool biased,
            uint8_t* dst) {
  const int64_t kq = quads(k);
  const int64_t panels = (rows + mr - 1) / mr;
  const uint32_t bias = biased ? 0x80808080u : 0u;
  const int64_t whole_quads = k / 4;
  for (int64_t i = 0; i < panels * mr; ++i) {
    uint8_t* out = dst + (i / mr) * kq * mr * 4 + (i % mr) * 4;
    const int64_t stride = static_cast<int64_t>(mr) * 4;
    if (i >= rows) {
      for (int64_t p = 0; p < kq; ++p) std::memset(out + p * stride, 0, 4);
      continue;
    }
    const uint8_t* row = reinterpret_cast<const uint8_t*>(a + (r0 + i) * k);
    for (int64_t p = 0; p < whole_quads; ++p) {
      uint32_t quad;
      std::memcpy(&quad, row + 4 * p, 4);
      quad ^= bias;
      std::memcpy(out + p * stride, &quad, 4);
    }
    if (whole_quads < kq) {  // the ragged last quad; its padding must add nothing (B is 0 there)
      uint8_t tail[4] = {0, 0, 0, 0};
      for (int64_t kk = whole_quads * 4; kk < k; ++kk) {
        tail[kk - whole_quads * 4] = static_cast<uint8_t>(row[kk] ^ (bias & 0xff));
      }
      std::memcpy(out + whole_quads * stride, tail, 4);
    }
  }
}

// The same panels with int16 codes (kernels with a_int16): sign-extended
// here once per item, so the kernel broadcasts a row's quad with one load.
void pack_a_int16(const int8_t* a, int64_t k, int64_t r0, int64_t rows, int mr, int16_t* dst) {
  const int64_t kq = quads(k);
  const int64_t panels = (rows + mr - 1) / mr;
  const int64_t stride = static_cast<int64_t>(mr) * 4;
  for (int64_t i = 0; i < panels * mr; ++i) {
    int16_t* out = dst + (i / mr) * kq * stride + (i % mr) * 4;
    if (i >= rows) {
      for (int64_t p = 0; p < kq; ++p) std::memset(out + p * stride, 0, 4 * sizeof(int16_t));
      continue;
    }
    const int8_t* row = a + (r0 + i) * k;
    int64_t kk = 0;
    for (int64_t p = 0; p < kq; ++p, kk += 4) {
      int16_t* quad = out + p * stride;
      for (int t = 0; t < 4; ++t) quad[t] = kk + t < k ? row[kk + t] : int16_t{0};
    }
  }
}

void run_item(const Int8GmmProblem& p, const Schedule& s, const Int8Microkernel& uk,
              const GroupItem& item) {
  const int64_t kq = quads(p.k);
  const int64_t tm = s.tiles.m;
  const int64_t tn = std::min(item.col_end - item.col_begin, tile_columns(s, uk));
  const int64_t kc_quads = std::max<int64_t>(1, s.tiles.k / 4);
  const int64_t item_rows = item.row_end - item.row_begin;
  const int64_t a_panels_item = (item_rows + uk.mr - 1) / uk.mr;
  const int64_t b_panels_max = (tn + uk.nr - 1) / uk.nr;
  // A for all of the item's rows, packed once and reused for every n-tile.
  const int64_t a_code_bytes = uk.a_int16 ? 2 : 1;
  uint8_t* packed_a =
      workspace_as<uint8_t>(Slot::kPackedA, a_panels_item * kq * uk.mr * 4 * a_code_bytes);
  if (uk.a_int16) {
    pack_a_int16(p.lhs, p.k, item.row_begin, item_rows, uk.mr, reinterpret_cast<int16_t*>(packed_a));
  } else {
    pack_a(p.lhs, p.k, item.row_begin, item_rows, uk.mr, uk.biased_a, packed_a);
  }
  int8_t* packed_b = workspace_as<int8_t>(Slot::kPackedB, b_panels_max * kq * uk.nr * 4);
  int32_t* column_sums = workspace_as<int32_t>(Slot::kColumnSums, 3 * b_panels_max * uk.nr);
  int32_t* correction = column_sums + b_panels_max * uk.nr;
  float* col_scales = reinterpret_cast<float*>(correction + b_panels_max * uk.nr);
  int32_t* acc = workspace_as<int32_t>(Slot::kAccumulator, std::min(tm, item_rows) * tn);
  const int8_t* rhs = p.rhs + item.group * p.rhs_group_stride;
  const float* group_col_scale = p.col_scale + item.group * p.col_scale_group_stride;

  for (int64_t c0 = item.col_begin; c0 < item.col_end; c0 += tn) {
    const int64_t width = std::min(tn, item.col_end - c0);
    const int64_t b_panels = (width + uk.nr - 1) / uk.nr;
    pack_b(rhs, p.k, p.n, c0, width, uk.nr, packed_b);
    if (uk.biased_a && kq > 0) {
      column_sums_of(uk, packed_b, kq, b_panels, workspace_as<uint8_t>(Slot::kLine, kq * uk.mr * 4),
                     column_sums);
    }
    for (int64_t j = 0; j < width; ++j) {
      correction[j] = uk.biased_a && kq > 0 ? 128 * column_sums[j] : 0;
      col_scales[j] = group_col_scale[(c0 + j) * p.col_scale_stride];
    }
    for (int64_t r0 = item.row_begin; r0 < item.row_end; r0 += tm) {
      const int64_t rows = std::min(tm, item.row_end - r0);
      const int64_t first_panel = (r0 - item.row_begin) / uk.mr;  // tm is a multiple of mr
      const int64_t a_panels = (rows + uk.mr - 1) / uk.mr;
      if (kq == 0) std::fill(acc, acc + rows * width, 0);
      for (int64_t q0 = 0; q0 < kq; q0 += kc_quads) {
        const int64_t qc = std::min(kc_quads, kq - q0);
        const bool accumulate = q0 > 0;
        // B micro-panel outer, A micro-panels inner: the B panel stays in L1.
        for (int64_t jb = 0; jb < b_panels; ++jb) {
          const int cols = static_cast<int>(std::min<int64_t>(uk.nr, width - jb * uk.nr));
          const int8_t* b = packed_b + (jb * kq + q0) * uk.nr * 4;
          for (int64_t ib = 0; ib < a_panels; ++ib) {
            const int prows = static_cast<int>(std::min<int64_t>(uk.mr, rows - ib * uk.mr));
            const uint8_t* a =
                packed_a + ((first_panel + ib) * kq + q0) * uk.mr * 4 * a_code_bytes;
            uk.run(qc, a, b, acc + ib * uk.mr * width + jb * uk.nr, width, prows, cols, accumulate);
          }
        }
      }
      // Output stage: exact integer sums, then both scales (then, for a
      // bf16 output, one rounding of that f32 value).
      for (int64_t i = 0; i < rows; ++i) {
        const float row_scale = p.row_scale[r0 + i];
        const int32_t* sums = acc + i * width;
        auto value = [&](int64_t j) {
          return static_cast<float>(sums[j] - correction[j]) * row_scale * col_scales[j];
        };
        if (p.accumulate) {
          const OutputView out = p.output();
          for (int64_t j = 0; j < width; ++j) out.store_value(r0 + i, c0 + j, value(j));
        } else if (p.out) {
          float* out = p.out + (r0 + i) * p.n + c0;
          for (int64_t j = 0; j < width; ++j) out[j] = value(j);
        } else {
          uint16_t* out = p.out_bf16 + (r0 + i) * p.n + c0;
          for (int64_t j = 0; j < width; ++j) out[j] = core::bf16_bits_of(value(j));
        }
      }
    }
  }
}

}  // namespace

bool int8_gmm_available() { return std::string(select_int8_microkernel().target) != "SCALAR"; }

void int8_gmm(const Int8GmmProblem& p, const Schedule& s, const Int8Microkernel* kernel) {
  const Int8Microkernel& uk = kernel ? *kernel : select_int8_microkernel();
  zero_uncovered_rows(p.starts, p.group_offset, p.local_groups, p.m, p.output(), p.n);
  // Items: (group, up to kRowTilesPerItem m-tiles of its rows), over all
  // columns, so each item packs its A rows once. When that gives too few
  // items to keep the threads busy, columns are split into n-tiles as well.
  Schedule schedule = s;
  schedule.tiles.m = whole_panels(s.tiles.m, uk.mr);
  const int64_t rows_per_item = schedule.tiles.m * kRowTilesPerItem;
  const int64_t row_items =
      group_row_ranges(p.starts, p.group_offset, p.local_groups, rows_per_item);
  const int64_t col_step =
      row_items >= 4 * static_cast<int64_t>(s.threads) ? p.n : tile_columns(schedule, uk);
  // The B tile is packed whatever the rows: a few rows still cost it.
  const auto [items, costs] = group_items(p.starts, p.group_offset, p.local_groups, rows_per_item,
                                          p.n, col_step, /*row_overhead=*/8);
  parallel_items(costs, s.threads, [&](int64_t i) { run_item(p, schedule, uk, items[i]); });
}

}  // namespace raggemm::kernels
