// The int8 forward gmm (int8_gmm.h) as a configuration of the gmm driver
// (kernels/gmm_driver.h): its packing in k-quads, the int8 microkernel from
// the registry, i32 accumulation, and an output stage applying
// (acc - 128 * colsum) * row_scale * col_scale. An item packs its A rows
// once over all of K; each chunk of tn columns packs B per K-block with the
// column sums the biased-A kernels need.
#include "kernels/int8_gmm.h"

#include <algorithm>
#include <cstring>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "kernels/gmm_driver.h"
#include "kernels/swiglu_stage.h"

namespace raggemm::kernels {
namespace {

int64_t quads(int64_t k) { return (k + 3) / 4; }

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

// B panels for columns [c0, c0 + width) of a [K, N] row-major matrix over
// k [k0, k0 + kc) (k0 a multiple of 4): panel q holds columns c0 + q*nr ..
// in the quad layout. Loops run over contiguous bytes without divisions:
// packing reads every weight byte once per item, so it must stay cheap.
// Quads go outermost, so the source is read 4 whole row spans at a time
// (panel by panel, each row gave up half a line and jumped N bytes: the
// hardware prefetcher did not keep up), with the rows kAheadQuads quads
// ahead prefetched (past the block too, up to K: the next block's first).
void pack_b(const int8_t* b, int64_t k, int64_t n, int64_t k0, int64_t kc, int64_t c0,
            int64_t width, int nr, int8_t* dst) {
  constexpr int64_t kAheadQuads = 4;
  const int64_t kq = quads(kc);
  const int64_t panels = (width + nr - 1) / nr;
  const int64_t k_end = k0 + kc;
  static const int8_t kZeros[64] = {};  // >= any nr
  for (int64_t p = 0; p < kq; ++p) {
    const int64_t ahead = k0 + 4 * (p + kAheadQuads);
    for (int64_t kk = ahead; kk < std::min(k, ahead + 4); ++kk) {
      const int8_t* row = b + kk * n + c0;
      for (int64_t j = 0; j < width; j += 64) __builtin_prefetch(row + j);
      __builtin_prefetch(row + width - 1);
    }
    const int8_t* rows[4];
    for (int t = 0; t < 4; ++t) {
      const int64_t kk = k0 + 4 * p + t;
      rows[t] = kk < k_end ? b + kk * n + c0 : kZeros;
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
// With `accumulate` the sums of this K-block add onto the previous ones'.
void column_sums_of(const Int8Microkernel& uk, const int8_t* packed_b, int64_t kq, int64_t panels,
                    uint8_t* ones_panel, int32_t* sums, bool accumulate) {
  std::memset(ones_panel, 0, static_cast<size_t>(kq * uk.mr * 4));
  for (int64_t p = 0; p < kq; ++p) std::memset(ones_panel + p * uk.mr * 4, 1, 4);
  for (int64_t q = 0; q < panels; ++q) {
    uk.run(kq, ones_panel, packed_b + q * kq * uk.nr * 4, sums + q * uk.nr, uk.nr, 1, uk.nr,
           accumulate);
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

// The int8 configuration of the gmm driver (kernels/gmm_driver.h): A packed
// once per item over all of K (biased or widened as the kernel wants), B
// per chunk and K-block with its column sums, i32 sums in the item's
// accumulator block, and the output stage
// (acc - 128 * colsum) * row_scale * col_scale.
struct Int8Policy {
  using Acc = int32_t;
  static constexpr bool kKOuter = false;
  const Int8GmmProblem& p;
  const Int8Microkernel& uk;
  int mr, nr;
  int k_group = 4;
  int64_t a_step_bytes, b_step_bytes;
  int64_t k, n, kc, tm, tn;

  Int8Policy(const Int8GmmProblem& problem, const Schedule& s, const Int8Microkernel& kernel)
      : p(problem),
        uk(kernel),
        mr(kernel.mr),
        nr(kernel.nr),
        a_step_bytes(4 * (kernel.a_int16 ? 2 : 1)),
        b_step_bytes(4),
        k(problem.k),
        n(problem.n),
        kc(4 * std::max<int64_t>(1, s.tiles.k / 4)),
        tm(whole_panels(s.tiles.m, kernel.mr)),
        tn(whole_panels(s.tiles.n, kernel.nr)) {}

  int64_t chunk_cols(const GroupItem&) const { return tn; }
  bool pack_a_whole_k(int64_t /*chunks*/) const { return true; }
  bool accumulates_in_place() const { return false; }
  int32_t* out_at(int64_t, int64_t) const { return nullptr; }
  bool corrected() const { return uk.biased_a && k > 0; }
  // Per thread: the chunk's column sums (for the biased-A correction), then
  // room for its correction and column scales (one size, so it never moves).
  int32_t* column_sums() const { return workspace_as<int32_t>(Slot::kColumnSums, 3 * tn); }

  void pack_a(int64_t r0, int64_t rows, int64_t /*k0*/, int64_t /*kc*/, char* dst) const {
    if (uk.a_int16) {
      pack_a_int16(p.lhs, k, r0, rows, mr, reinterpret_cast<int16_t*>(dst));
    } else {
      kernels::pack_a(p.lhs, k, r0, rows, mr, uk.biased_a, reinterpret_cast<uint8_t*>(dst));
    }
  }

  void pack_b(const GroupItem& item, int64_t k0, int64_t depth, int64_t c0, int64_t cols,
              char* dst) const {
    int8_t* packed = reinterpret_cast<int8_t*>(dst);
    kernels::pack_b(p.rhs + item.group * p.rhs_group_stride, k, n, k0, depth, c0, cols, nr, packed);
    if (corrected()) {
      const int64_t kq = quads(depth);
      column_sums_of(uk, packed, kq, (cols + nr - 1) / nr,
                     workspace_as<uint8_t>(Slot::kLine, kq * mr * 4), column_sums(), k0 > 0);
    }
  }

  void multiply(int64_t kq, const char* a, const char* b, int32_t* c, int64_t ldc, int rows,
                int cols, bool accumulate) const {
    uk.run(kq, reinterpret_cast<const uint8_t*>(a), reinterpret_cast<const int8_t*>(b), c, ldc,
           rows, cols, accumulate);
  }

  // Output stage: exact integer sums, then both scales (then, for a bf16
  // output, one rounding of that f32 value).
  void finish(const GroupItem& item, int64_t c0, int64_t width, int32_t* acc, int64_t ldc) const {
    const int64_t rows = item.rows();
    if (k == 0) std::fill(acc, acc + rows * ldc, 0);
    const int32_t* sums = column_sums();
    const float* col_scale = p.col_scale + item.group * p.col_scale_group_stride;
    int32_t* correction = column_sums() + tn;
    float* col_scales = reinterpret_cast<float*>(correction + tn);
    for (int64_t j = 0; j < width; ++j) {
      correction[j] = corrected() ? 128 * sums[j] : 0;
      col_scales[j] = col_scale[(c0 + j) * p.col_scale_stride];
    }
    const OutputView out = p.output();
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t row = item.row_begin + i;
      const float row_scale = p.row_scale[row];
      const int32_t* acc_row = acc + i * ldc;
      auto value = [&](int64_t j) {
        return static_cast<float>(acc_row[j] - correction[j]) * row_scale * col_scales[j];
      };
      if (p.accumulate) {
        for (int64_t j = 0; j < width; ++j) out.store_value(row, c0 + j, value(j));
      } else if (p.out) {
        float* dst = p.out + row * n + c0;
        for (int64_t j = 0; j < width; ++j) dst[j] = value(j);
      } else {
        uint16_t* dst = p.out_bf16 + row * n + c0;
        for (int64_t j = 0; j < width; ++j) dst[j] = core::bf16_bits_of(value(j));
      }
    }
    apply_swiglu_stage(p.swiglu_stage, p.out, n, item.row_begin, rows, c0, width);
  }
};

}  // namespace

bool int8_gmm_available() { return std::string(select_int8_microkernel().target) != "SCALAR"; }

void int8_gmm(const Int8GmmProblem& p, const Schedule& s, const Int8Microkernel* kernel) {
  const Int8Policy policy(p, s, kernel ? *kernel : select_int8_microkernel());
  // Items: (group, up to kRowTilesPerItem m-tiles of its rows), over all
  // columns, so each item packs its A rows once. When that gives too few
  // items to keep the threads busy, columns are split into n-tiles as well.
  DriverItems d{p.starts, p.group_offset, p.local_groups, p.m, p.n};
  d.rows_per_item = policy.tm * kRowTilesPerItem;
  const int64_t row_items =
      group_row_ranges(p.starts, p.group_offset, p.local_groups, d.rows_per_item);
  d.col_step = row_items >= 4 * static_cast<int64_t>(s.threads) ? p.n : policy.tn;
  d.row_overhead = 8;  // the B tile is packed whatever the rows: a few rows still cost it
  zero_swiglu_stage_uncovered(p.swiglu_stage, p.starts, p.group_offset, p.local_groups, p.m, p.n);
  run_driver(policy, d, p.output(), s.threads);
}

}  // namespace raggemm::kernels
