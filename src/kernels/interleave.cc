// Highway implementation of interleave_rows, compiled per target like the
// microkernel. 256-bit and wider targets transpose 8x8 blocks; every other
// vector target has the 4x4 path (128-bit vectors, so EMU128 too); leftover
// rows and depth steps, and the one-lane HWY_SCALAR target, go element by
// element. The bf16 version widens each row's run as it loads it (a bf16
// value is the upper half of the f32 with the same bits), so bf16 panels need
// no f32 staging copy.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/interleave.cc"
#include <algorithm>

#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/bf16_lanes-inl.h"
#include "kernels/interleave.h"
#include "raggemm/dtype.h"

HWY_BEFORE_NAMESPACE();
namespace raggemm::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

inline float ToF32(float v) { return v; }
inline float ToF32(uint16_t bf16) { return bf16_to_f32(bf16); }

#if HWY_TARGET != HWY_SCALAR  // HWY_SCALAR has one-lane vectors: element path only
// One row's Lanes(d) values from `p`, as f32.
template <class D>
HWY_INLINE hn::Vec<D> LoadRow(D d, const float* p) {
  return hn::LoadU(d, p);
}
template <class D>
HWY_INLINE hn::Vec<D> LoadRow(D d, const uint16_t* p) {
  return LoadBf16AsF32(d, p);
}

// Interleaves 64-bit pairs of two f32 vectors (within each 128-bit block).
template <class D, class V>
HWY_INLINE V InterleaveLowerPairs(D d, V a, V b) {
  const hn::Repartition<double, D> dd;
  return hn::BitCast(d, hn::InterleaveLower(dd, hn::BitCast(dd, a), hn::BitCast(dd, b)));
}
template <class D, class V>
HWY_INLINE V InterleaveUpperPairs(D d, V a, V b) {
  const hn::Repartition<double, D> dd;
  return hn::BitCast(d, hn::InterleaveUpper(dd, hn::BitCast(dd, a), hn::BitCast(dd, b)));
}

// Rows i0..i0+3, depth p0..p0+3.
template <class T>
HWY_INLINE void Block4(const T* src, int64_t ld, int64_t p0, int width, float* dst) {
  const hn::FixedTag<float, 4> d;
  const auto r0 = LoadRow(d, src + p0);
  const auto r1 = LoadRow(d, src + ld + p0);
  const auto r2 = LoadRow(d, src + 2 * ld + p0);
  const auto r3 = LoadRow(d, src + 3 * ld + p0);
  const auto t0 = hn::InterleaveLower(d, r0, r1);  // r0_0 r1_0 r0_1 r1_1
  const auto t1 = hn::InterleaveUpper(d, r0, r1);  // r0_2 r1_2 r0_3 r1_3
  const auto t2 = hn::InterleaveLower(d, r2, r3);
  const auto t3 = hn::InterleaveUpper(d, r2, r3);
  float* out = dst + p0 * width;
  hn::StoreU(InterleaveLowerPairs(d, t0, t2), d, out);
  hn::StoreU(InterleaveUpperPairs(d, t0, t2), d, out + width);
  hn::StoreU(InterleaveLowerPairs(d, t1, t3), d, out + 2 * width);
  hn::StoreU(InterleaveUpperPairs(d, t1, t3), d, out + 3 * width);
}

#endif  // HWY_TARGET != HWY_SCALAR

#if HWY_MAX_BYTES >= 32
// Rows i0..i0+7, depth p0..p0+7.
template <class T>
HWY_INLINE void Block8(const T* src, int64_t ld, int64_t p0, int width, float* dst) {
  const hn::FixedTag<float, 8> d;
  using V = hn::Vec<decltype(d)>;
  V r[8];
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) r[j] = LoadRow(d, src + j * ld + p0);
  // Within 128-bit blocks: pairs of rows, then quads of rows.
  V t[8];
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    t[2 * j] = hn::InterleaveLower(d, r[2 * j], r[2 * j + 1]);
    t[2 * j + 1] = hn::InterleaveUpper(d, r[2 * j], r[2 * j + 1]);
  }
  // u[4h + q]: rows 4h..4h+3 at depth q (low block) and q + 4 (high block).
  V u[8];
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    u[4 * h + 0] = InterleaveLowerPairs(d, t[4 * h + 0], t[4 * h + 2]);
    u[4 * h + 1] = InterleaveUpperPairs(d, t[4 * h + 0], t[4 * h + 2]);
    u[4 * h + 2] = InterleaveLowerPairs(d, t[4 * h + 1], t[4 * h + 3]);
    u[4 * h + 3] = InterleaveUpperPairs(d, t[4 * h + 1], t[4 * h + 3]);
  }
  float* out = dst + p0 * width;
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    hn::StoreU(hn::ConcatLowerLower(d, u[4 + q], u[q]), d, out + q * width);
    hn::StoreU(hn::ConcatUpperUpper(d, u[4 + q], u[q]), d, out + (q + 4) * width);
  }
}
#endif

// Interleaves depth [p, p + span) of every row, span a multiple of kBlock:
// each row block's run of `span` values is read before the next block's.
template <int kBlock, class T>
HWY_INLINE void InterleaveSpan(const T* src, int64_t ld, int rows, int64_t p, int64_t span,
                               int width, float* dst) {
  int i = 0;
#if HWY_MAX_BYTES >= 32
  for (; i + 8 <= rows; i += 8) {
    for (int64_t q = p; q < p + span; q += 8) Block8(src + i * ld, ld, q, width, dst + i);
  }
  for (; i + 4 <= rows; i += 4) {
    for (int64_t q = p; q < p + span; q += 4) Block4(src + i * ld, ld, q, width, dst + i);
  }
#elif HWY_TARGET != HWY_SCALAR
  for (; i + 4 <= rows; i += 4) {
    for (int64_t q = p; q < p + span; q += 4) Block4(src + i * ld, ld, q, width, dst + i);
  }
#endif
  for (; i < rows; ++i) {
    for (int64_t q = p; q < p + span; ++q) dst[q * width + i] = ToF32(src[i * ld + q]);
  }
}

template <class T>
void InterleaveRowsOf(const T* src, int64_t ld, int rows, int64_t depth, int width, float* dst) {
#if HWY_MAX_BYTES >= 32
  constexpr int kBlock = 8;
#elif HWY_TARGET != HWY_SCALAR
  constexpr int kBlock = 4;
#else
  constexpr int kBlock = 1;
#endif
  // Depth outer, rows inner: each step reads one run of every row (all row
  // streams in flight at once) and writes `span` contiguous panel lines. A
  // run is a whole 64-byte line of the source row (16 f32, 32 bf16 values)
  // where the depth allows, so every line fetched is consumed in one visit:
  // with runs of 8 f32 (half lines) a 32-row dlhs panel came back for the
  // other half of each of its 32 lines after touching all the others.
  // Same-run A/B, see docs/performance.md (December 2026).
  constexpr int64_t kLine = std::max<int64_t>(kBlock, 64 / sizeof(T)) / kBlock * kBlock;
  int64_t p = 0;
  for (; p + kLine <= depth; p += kLine) InterleaveSpan<kBlock>(src, ld, rows, p, kLine, width, dst);
  for (; p + kBlock <= depth; p += kBlock) {
    InterleaveSpan<kBlock>(src, ld, rows, p, kBlock, width, dst);
  }
  for (; p < depth; ++p) {
    for (int i = 0; i < rows; ++i) dst[p * width + i] = ToF32(src[i * ld + p]);
  }
  if (rows < width) {
    for (int64_t q = 0; q < depth; ++q) {
      for (int i = rows; i < width; ++i) dst[q * width + i] = 0.0f;
    }
  }
}

void InterleaveRows(const float* src, int64_t ld, int rows, int64_t depth, int width,
                    float* dst) {
  InterleaveRowsOf(src, ld, rows, depth, width, dst);
}

void InterleaveRowsBf16(const uint16_t* src, int64_t ld, int rows, int64_t depth, int width,
                        float* dst) {
  InterleaveRowsOf(src, ld, rows, depth, width, dst);
}

}  // namespace HWY_NAMESPACE
}  // namespace raggemm::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace raggemm::kernels {

HWY_EXPORT(InterleaveRows);
HWY_EXPORT(InterleaveRowsBf16);

void interleave_rows(const float* src, int64_t ld, int rows, int64_t depth, int width,
                     float* dst) {
  HWY_DYNAMIC_DISPATCH(InterleaveRows)(src, ld, rows, depth, width, dst);
}

void interleave_rows_bf16(const uint16_t* src, int64_t ld, int rows, int64_t depth, int width,
                          float* dst) {
  HWY_DYNAMIC_DISPATCH(InterleaveRowsBf16)(src, ld, rows, depth, width, dst);
}

}  // namespace raggemm::kernels
#endif  // HWY_ONCE
