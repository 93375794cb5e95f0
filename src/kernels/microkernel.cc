// Highway implementation of the f32 microkernel, compiled once per x86 target
// (AVX3, AVX2, SSE4, SSSE3) plus the portable EMU128 fallback, chosen at run
// time. The register tile is MR x (2 vectors): 12 x 32 on AVX-512 (24 of 32
// zmm registers hold accumulators), 6 x 16 on AVX2 (12 of 16 ymm), 6 x 8 on
// 128-bit targets.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/microkernel.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <algorithm>
#include <array>
#include <utility>

#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include "kernels/microkernel.h"

HWY_BEFORE_NAMESPACE();
namespace raggemm::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
constexpr size_t kMaxLanes = HWY_LANES(float);
constexpr int kMR = kMaxLanes >= 16 ? 12 : 6;

// R rows computed (R <= kMR: narrower buckets for ragged last panels, so no
// FMAs are wasted on padding rows); A advances kMR floats per step regardless.
// kPackB: B comes from its source rows (b, ldb floats apart) and is written
// packed to b_packed as it is read (the PackingMicrokernelFn contract).
// kStridedA: A is not packed but R source rows lda floats apart,
// a[i * lda + p] (the StridedAMicrokernelFn contract), and `prefetch` is
// the first of the R rows read next, fetched towards L2 a vector per row
// and run. Every vector-width run of steps first copies each row's
// run into a small row-major block, a vector load and store per row, and
// the steps broadcast from there: broadcast straight from rows whose stride
// is a multiple of 4 KiB (a 1024-float weight), the 12 lines in use at once
// fall in one L1 set of 8 or 12 ways and can evict one another before
// their 16 reads are done; the copy reads each line once.
// kOneVector: the tile is R x one vector (cols <= N), for a narrow last B
// micro-panel of the strided-A path, whose padding would otherwise cost as
// many FMAs as the valid columns (a group of 33 tokens padded to 64).
template <int R, bool kPackB, bool kStridedA = false, bool kOneVector = false>
HWY_INLINE void TileBody(int64_t kc, const float* HWY_RESTRICT a, const float* HWY_RESTRICT b,
                         float* HWY_RESTRICT c, int64_t ldc, int cols, Store store,
                         const float* prefetch, const PrefetchStream* stream, int64_t ldb,
                         float* HWY_RESTRICT b_packed, int64_t lda = 0) {
  const DF d;
  using V = hn::Vec<DF>;
  const size_t N = hn::Lanes(d);
  V acc0[R];
  V acc1[R];
  // Full unrolling lets GCC keep acc0/acc1 in registers (without it the
  // arrays live on the stack and every FMA round-trips through memory).
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
    acc0[i] = hn::Zero(d);
    if constexpr (!kOneVector) acc1[i] = hn::Zero(d);
  }
  // One step: B's two vectors at step p, times the R values ap[i * a_step].
  auto step = [&](int64_t p, const float* HWY_RESTRICT ap, size_t a_step) HWY_ATTR {
    V b0, b1;
    if constexpr (kPackB) {
      b0 = hn::LoadU(d, b + p * ldb);
      b1 = hn::LoadU(d, b + p * ldb + N);
      hn::Store(b0, d, b_packed + p * 2 * N);
      hn::Store(b1, d, b_packed + p * 2 * N + N);
    } else {
      b0 = hn::Load(d, b + p * 2 * N);
      if constexpr (!kOneVector) b1 = hn::Load(d, b + p * 2 * N + N);
    }
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      const V ai = hn::Set(d, ap[i * a_step]);
      acc0[i] = hn::MulAdd(ai, b0, acc0[i]);
      if constexpr (!kOneVector) acc1[i] = hn::MulAdd(ai, b1, acc1[i]);
    }
  };
  if constexpr (kStridedA) {
    // Runs of N steps: each row's run is copied (and the next rows' run
    // fetched) once, outside the steps, so no per-row pointer is carried
    // through them (carried, GCC kept twelve and spilled some: a stack add
    // per step). The copy is one run ahead, into the other half of a_run:
    // broadcasts of a value stored just before wait for the store.
    HWY_ALIGN float a_run[2 * R * kMaxLanes];
    const int64_t n = static_cast<int64_t>(N);
    auto copy_run = [&](int64_t p0, float* HWY_RESTRICT dst) HWY_ATTR {
      const int64_t run = std::min(n, kc - p0);
#pragma GCC unroll 16
      for (int i = 0; i < R; ++i) {
        const float* src = a + i * lda + p0;
        if (prefetch) __builtin_prefetch(prefetch + i * lda + p0, 0, 2);
        if (run == n) {
          hn::Store(hn::LoadU(d, src), d, dst + i * N);
        } else {  // the last, short run: no read past the row's kc values
          for (int64_t q = 0; q < run; ++q) dst[i * N + q] = src[q];
        }
      }
    };
    copy_run(0, a_run);
    for (int64_t p0 = 0, half = 0; p0 < kc; p0 += n, half ^= 1) {
      float* current = a_run + half * R * N;
      if (p0 + n < kc) copy_run(p0 + n, a_run + (half ^ 1) * R * N);
      const int64_t run = std::min(n, kc - p0);
      for (int64_t q = 0; q < run; ++q) step(p0 + q, current + q, N);
    }
  } else {
    const int64_t line_mask = stream ? (int64_t{1} << stream->row_shift) - 1 : 0;
    for (int64_t p = 0; p < kc; ++p) {
      if (prefetch && (p & 3) == 0) hwy::Prefetch(prefetch + p * kMR);
      if (stream) {
        // Towards L2 (prefetcht1): the chunk is larger than L1.
        const int64_t first = stream->first_line + p * stream->lines_per_step;
        const int64_t end = std::min(first + stream->lines_per_step, stream->end_line);
        for (int64_t line = first; line < end; ++line) {
          __builtin_prefetch(stream->base + (line >> stream->row_shift) * stream->row_stride +
                                 (line & line_mask) * 64,
                             0, 2);
        }
      }
      step(p, a + p * kMR, 1);
    }
  }
  if constexpr (kOneVector) {  // cols <= N: the whole vector, into C's room for it
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      float* row = c + i * ldc;
      hn::StoreU(store == Store::kAccumulate ? hn::Add(hn::LoadU(d, row), acc0[i]) : acc0[i], d,
                 row);
    }
    return;
  } else if (static_cast<size_t>(cols) == 2 * N) {
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      float* row = c + i * ldc;
      if (store == Store::kAccumulate) {
        hn::StoreU(hn::Add(hn::LoadU(d, row), acc0[i]), d, row);
        hn::StoreU(hn::Add(hn::LoadU(d, row + N), acc1[i]), d, row + N);
      } else if (store == Store::kStream &&
                 reinterpret_cast<uintptr_t>(row) % (N * sizeof(float)) == 0) {
        hn::Stream(acc0[i], d, row);
        hn::Stream(acc1[i], d, row + N);
      } else {
        hn::StoreU(acc0[i], d, row);
        hn::StoreU(acc1[i], d, row + N);
      }
    }
    return;
  }
  // Ragged right edge: spill to a buffer, then touch only the valid columns.
  HWY_ALIGN float spill[2 * kMaxLanes];
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
    hn::Store(acc0[i], d, spill);
    hn::Store(acc1[i], d, spill + N);
    float* row = c + i * ldc;
    const bool add = store == Store::kAccumulate;
    for (int j = 0; j < cols; ++j) row[j] = add ? row[j] + spill[j] : spill[j];
  }
}

template <int R>
HWY_NOINLINE void Tile(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int cols,
                       Store store, const float* prefetch, const PrefetchStream* stream) {
  TileBody<R, false>(kc, a, b, c, ldc, cols, store, prefetch, stream, 0, nullptr);
}

using TileFn = void (*)(int64_t, const float*, const float*, float*, int64_t, int, Store,
                       const float*, const PrefetchStream*);

// Tile<R> for R = 1..kMR, indexed by R - 1.
template <size_t... I>
constexpr std::array<TileFn, kMR> TilesByRows(std::index_sequence<I...>) {
  return {&Tile<static_cast<int>(I) + 1>...};
}

void Run(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int rows, int cols,
         Store store, const float* prefetch, const PrefetchStream* stream) {
  static constexpr std::array<TileFn, kMR> kByRows = TilesByRows(std::make_index_sequence<kMR>());
  kByRows[rows - 1](kc, a, b, c, ldc, cols, store, prefetch, stream);
}

template <int R>
HWY_NOINLINE void PackingTile(int64_t kc, const float* a, const float* b_src, int64_t ldb,
                              float* b_packed, float* c, int64_t ldc, Store store,
                              const float* prefetch, const PrefetchStream* stream) {
  TileBody<R, true>(kc, a, b_src, c, ldc, static_cast<int>(2 * hn::Lanes(DF())), store, prefetch,
                    stream, ldb, b_packed);
}

using PackingTileFn = void (*)(int64_t, const float*, const float*, int64_t, float*, float*,
                              int64_t, Store, const float*, const PrefetchStream*);

// PackingTile<R> for R = 1..kMR, indexed by R - 1.
template <size_t... I>
constexpr std::array<PackingTileFn, kMR> PackingTilesByRows(std::index_sequence<I...>) {
  return {&PackingTile<static_cast<int>(I) + 1>...};
}

void RunPackingB(int64_t kc, const float* a, const float* b_src, int64_t ldb, float* b_packed,
                 float* c, int64_t ldc, int rows, Store store, const float* prefetch,
                 const PrefetchStream* stream) {
  static constexpr std::array<PackingTileFn, kMR> kByRows =
      PackingTilesByRows(std::make_index_sequence<kMR>());
  kByRows[rows - 1](kc, a, b_src, ldb, b_packed, c, ldc, store, prefetch, stream);
}

template <int R, bool kOneVector>
HWY_NOINLINE void StridedATile(int64_t kc, const float* a, int64_t lda, const float* b, float* c,
                               int64_t ldc, Store store, const float* prefetch) {
  const int vectors = kOneVector ? 1 : 2;
  TileBody<R, false, true, kOneVector>(kc, a, b, c, ldc,
                                       static_cast<int>(vectors * hn::Lanes(DF())), store,
                                       prefetch, nullptr, 0, nullptr, lda);
}

using StridedATileFn = void (*)(int64_t, const float*, int64_t, const float*, float*, int64_t,
                                Store, const float*);

// StridedATile<R, kOneVector> for R = 1..kMR, indexed by R - 1.
template <bool kOneVector, size_t... I>
constexpr std::array<StridedATileFn, kMR> StridedATilesByRows(std::index_sequence<I...>) {
  return {&StridedATile<static_cast<int>(I) + 1, kOneVector>...};
}

void RunStridedA(int64_t kc, const float* a, int64_t lda, const float* b, float* c, int64_t ldc,
                 int rows, int cols, Store store, const float* prefetch) {
  static constexpr std::array<StridedATileFn, kMR> kTwo =
      StridedATilesByRows<false>(std::make_index_sequence<kMR>());
  static constexpr std::array<StridedATileFn, kMR> kOne =
      StridedATilesByRows<true>(std::make_index_sequence<kMR>());
  const bool one = static_cast<size_t>(cols) <= hn::Lanes(DF());
  (one ? kOne : kTwo)[rows - 1](kc, a, lda, b, c, ldc, store, prefetch);
}

Microkernel Describe() {
  const DF d;
  Microkernel kernel;
  kernel.mr = kMR;
  kernel.nr = static_cast<int>(2 * hn::Lanes(d));
  kernel.target = hwy::TargetName(HWY_TARGET);
  kernel.run = &Run;
  kernel.run_packing_b = &RunPackingB;
  kernel.run_strided_a = &RunStridedA;
  return kernel;
}

// The target this copy was compiled for: dispatched, it says which target
// Highway's dispatch runs on now (forced targets included).
int64_t Target() { return HWY_TARGET; }

}  // namespace HWY_NAMESPACE
}  // namespace raggemm::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace raggemm::kernels {

HWY_EXPORT(Describe);
HWY_EXPORT(Target);

Microkernel select_microkernel() { return HWY_DYNAMIC_DISPATCH(Describe)(); }

int64_t dispatched_target() { return HWY_DYNAMIC_DISPATCH(Target)(); }

// Each compiled copy's description, called only for targets the CPU has
// (the copy is compiled for its target's instructions).
Microkernel microkernel_of_target(int64_t target) {
#define RAGGEMM_DESCRIBE_TARGET(TARGET, NS) \
  if ((HWY_TARGETS & TARGET) && target == TARGET) return NS::Describe();
#if HWY_TARGETS & HWY_AVX3_DL
  RAGGEMM_DESCRIBE_TARGET(HWY_AVX3_DL, N_AVX3_DL)
#endif
#if HWY_TARGETS & HWY_AVX3
  RAGGEMM_DESCRIBE_TARGET(HWY_AVX3, N_AVX3)
#endif
#if HWY_TARGETS & HWY_AVX2
  RAGGEMM_DESCRIBE_TARGET(HWY_AVX2, N_AVX2)
#endif
#if HWY_TARGETS & HWY_SSE4
  RAGGEMM_DESCRIBE_TARGET(HWY_SSE4, N_SSE4)
#endif
#if HWY_TARGETS & HWY_SSSE3
  RAGGEMM_DESCRIBE_TARGET(HWY_SSSE3, N_SSSE3)
#endif
#if HWY_TARGETS & HWY_EMU128
  RAGGEMM_DESCRIBE_TARGET(HWY_EMU128, N_EMU128)
#endif
#if HWY_TARGETS & HWY_SCALAR
  RAGGEMM_DESCRIBE_TARGET(HWY_SCALAR, N_SCALAR)
#endif
#undef RAGGEMM_DESCRIBE_TARGET
  return Microkernel{};
}

int64_t compiled_targets() { return HWY_TARGETS; }

int64_t microkernel_targets() { return HWY_TARGETS & hwy::SupportedTargets(); }

const char* target_name(int64_t target) { return hwy::TargetName(target); }

}  // namespace raggemm::kernels
#endif  // HWY_ONCE
