// The microkernel contract (kernels/microkernel.h, bf16_microkernel.h,
// docs/kernels.md), called directly on hand-packed panels, on every
// Highway target this CPU runs and every bf16 kernel:
//  - each element of C[0:rows, 0:cols] is the in-order chain over k of the
//    contract's multiply-adds, bit for bit, for every rows <= MR, several
//    cols <= NR (ragged) and depths (0, 1, odd, long);
//  - kOverwrite, kAccumulate (C + acc) and kStream give those values;
//  - nothing outside rows x cols is written (C has a wider ldc and
//    sentinels), and the prefetch hints change nothing.
// The int8 kernels have their own direct test (int8_microkernel_test.cc).
#include <gtest/gtest.h>
#include <hwy/cache_control.h>
#include <hwy/targets.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/bf16_microkernel.h"
#include "kernels/microkernel.h"
#include "kernels/microkernel_registry.h"
#include "raggemm/dtype.h"

namespace raggemm::kernels {
namespace {

template <class T>
struct Aligned {
  explicit Aligned(size_t count)
      : data(static_cast<T*>(std::aligned_alloc(64, (count * sizeof(T) + 63) / 64 * 64 + 64))) {}
  ~Aligned() { std::free(data); }
  T* data;
};

uint32_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof(b));
  return b;
}

constexpr float kSentinel = -12345.0f;

// Runs `run` (one microkernel call on c), then checks every element of the
// c_rows x ldc block: outside rows x cols still the sentinel, inside
// handed to check(i, j, e) (e: its index).
template <class Run, class Check>
void run_and_check_tile(const float* c, int c_rows, int64_t ldc, int rows, int cols,
                        const Run& run, const Check& check) {
  run();
  hwy::FlushStream();
  for (int i = 0; i < c_rows; ++i) {
    for (int64_t j = 0; j < ldc; ++j) {
      const size_t e = static_cast<size_t>(i * ldc + j);
      if (i >= rows || j >= cols) {
        ASSERT_EQ(c[e], kSentinel) << "wrote outside the tile at (" << i << "," << j << ") rows "
                                   << rows << " cols " << cols;
        continue;
      }
      check(i, j, e);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

// Highway's 128-bit x86 targets and the portable one have no FMA
// instruction: their multiply-add rounds twice (see the report of issue 20).
bool fused(int64_t target) { return target == HWY_AVX2 || target == HWY_AVX3; }

void check_f32_kernel(const Microkernel& uk, bool fma) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t kc : {0, 1, 5, 64}) {
    for (int rows = 1; rows <= uk.mr; ++rows) {
      for (int cols : {1, uk.nr / 2 - 1, uk.nr / 2, uk.nr / 2 + 3, uk.nr - 1, uk.nr}) {
        if (cols < 1 || cols > uk.nr) continue;
        Aligned<float> a(static_cast<size_t>(kc * uk.mr) + 1), b(static_cast<size_t>(kc * uk.nr) + 1);
        for (int64_t p = 0; p < kc; ++p) {
          for (int i = 0; i < uk.mr; ++i) a.data[p * uk.mr + i] = i < rows ? normal(rng) : 0.0f;
          for (int j = 0; j < uk.nr; ++j) b.data[p * uk.nr + j] = j < cols ? normal(rng) : 0.0f;
        }
        const int64_t ldc = uk.nr + 5;
        const int c_rows = uk.mr + 1;
        for (Store store : {Store::kOverwrite, Store::kAccumulate, Store::kStream}) {
          Aligned<float> c(static_cast<size_t>(c_rows * ldc));
          std::vector<float> before(static_cast<size_t>(c_rows * ldc));
          for (size_t e = 0; e < before.size(); ++e) {
            before[e] = e % ldc < static_cast<size_t>(cols) && e / ldc < static_cast<size_t>(rows)
                            ? normal(rng)
                            : kSentinel;
            c.data[e] = before[e];
          }
          PrefetchStream stream;
          stream.base = reinterpret_cast<const char*>(b.data);
          stream.end_line = 1;
          uk.run(kc, a.data, b.data, c.data, ldc, rows, cols, store, a.data, &stream);
          hwy::FlushStream();
          for (int i = 0; i < c_rows; ++i) {
            for (int64_t j = 0; j < ldc; ++j) {
              const size_t e = static_cast<size_t>(i * ldc + j);
              if (i >= rows || j >= cols) {
                ASSERT_EQ(c.data[e], kSentinel) << uk.target << " wrote outside the tile at (" << i
                                                << "," << j << ") rows " << rows << " cols " << cols;
                continue;
              }
              float acc = 0.0f;
              for (int64_t p = 0; p < kc; ++p) {
                const float x = a.data[p * uk.mr + i], y = b.data[p * uk.nr + j];
                acc = fma ? std::fma(x, y, acc) : x * y + acc;
              }
              const float want = store == Store::kAccumulate ? before[e] + acc : acc;
              ASSERT_EQ(bits(c.data[e]), bits(want))
                  << uk.target << " (" << i << "," << j << ") kc " << kc << " rows " << rows
                  << " cols " << cols << " store " << static_cast<int>(store) << ": "
                  << c.data[e] << " vs " << want;
            }
          }
        }
      }
    }
  }
}

// check(uk, target) on the f32 microkernel of every Highway target this CPU
// runs (at least two: the best one and the portable one).
template <class Check>
void on_every_f32_target(const Check& check) {
  const int64_t targets = microkernel_targets();
  int tested = 0;
  for (int64_t bit = 1; bit != 0 && bit <= targets; bit <<= 1) {
    if (!(targets & bit)) continue;
    hwy::SetSupportedTargetsForTest(bit);
    const Microkernel uk = select_microkernel();
    SCOPED_TRACE(uk.target);
    check(uk, bit);
    ++tested;
    if (::testing::Test::HasFatalFailure()) break;
  }
  hwy::SetSupportedTargetsForTest(0);
  EXPECT_GE(tested, 2);
}

TEST(MicrokernelContract, F32EveryTargetEveryEdgeEveryStore) {
  on_every_f32_target([](const Microkernel& uk, int64_t target) {
    EXPECT_EQ(uk.nr % 2, 0);
    check_f32_kernel(uk, fused(target));
  });
}

// run_packing_b: B read from source rows (a row stride wider than NR, the
// block starting off a vector boundary) gives C the bits run gives on the
// packed panel, for every rows and store, and leaves exactly that panel in
// b_packed (nothing past it written).
void check_packing_kernel(const Microkernel& uk) {
  ASSERT_NE(uk.run_packing_b, nullptr) << uk.target;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t kc : {0, 1, 7, 64}) {
    const int64_t ldb = 3 * uk.nr + 5, offset = 3;  // source not vector-aligned
    std::vector<float> source(static_cast<size_t>(std::max<int64_t>(kc, 1) * ldb + offset));
    for (float& x : source) x = normal(rng);
    Aligned<float> packed_ref(static_cast<size_t>(kc * uk.nr) + 1);
    for (int64_t p = 0; p < kc; ++p) {
      for (int j = 0; j < uk.nr; ++j) {
        packed_ref.data[p * uk.nr + j] = source[static_cast<size_t>(offset + p * ldb + j)];
      }
    }
    for (int rows = 1; rows <= uk.mr; ++rows) {
      Aligned<float> a(static_cast<size_t>(kc * uk.mr) + 1);
      for (int64_t e = 0; e < kc * uk.mr; ++e) a.data[e] = normal(rng);
      for (Store store : {Store::kOverwrite, Store::kAccumulate, Store::kStream}) {
        const int64_t ldc = uk.nr + 5;
        const size_t c_size = static_cast<size_t>((uk.mr + 1) * ldc);
        Aligned<float> want(c_size), got(c_size);
        for (size_t e = 0; e < c_size; ++e) want.data[e] = got.data[e] = normal(rng);
        uk.run(kc, a.data, packed_ref.data, want.data, ldc, rows, uk.nr, store, nullptr, nullptr);
        Aligned<float> packed(static_cast<size_t>(kc * uk.nr) + 1);
        packed.data[kc * uk.nr] = kSentinel;
        uk.run_packing_b(kc, a.data, source.data() + offset, ldb, packed.data, got.data, ldc, rows,
                         store, nullptr, nullptr);
        hwy::FlushStream();
        for (size_t e = 0; e < c_size; ++e) {
          ASSERT_EQ(bits(got.data[e]), bits(want.data[e]))
              << uk.target << " C element " << e << " kc " << kc << " rows " << rows
              << " store " << static_cast<int>(store);
        }
        for (int64_t e = 0; e < kc * uk.nr; ++e) {
          ASSERT_EQ(bits(packed.data[e]), bits(packed_ref.data[e]))
              << uk.target << " packed element " << e << " kc " << kc;
        }
        ASSERT_EQ(packed.data[kc * uk.nr], kSentinel) << "wrote past the packed panel";
      }
    }
  }
}

TEST(MicrokernelContract, PackingBFromSourceRowsMatchesPackThenRunEveryTarget) {
  on_every_f32_target([](const Microkernel& uk, int64_t) { check_packing_kernel(uk); });
}

// run_strided_a: A read from source rows lda floats apart (off a vector
// boundary; the last row ends at the end of its allocation, so a read past
// a row's kc values is out of bounds under ASan) gives C the bits run gives
// on the packed A panel, for every rows, store and B width: a tile of one
// vector writes that whole vector of C and nothing past it, one of two
// vectors writes exactly nr columns.
void check_strided_a_kernel(const Microkernel& uk) {
  ASSERT_NE(uk.run_strided_a, nullptr) << uk.target;
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int lanes = uk.nr / 2;
  for (int64_t kc : std::vector<int64_t>{0, 1, 7, lanes + 1, 64}) {
    for (int rows = 1; rows <= uk.mr; ++rows) {
      const int64_t lda = kc + 21, offset = 3;
      std::vector<float> source(static_cast<size_t>(offset + (rows - 1) * lda + kc));
      for (float& x : source) x = normal(rng);
      Aligned<float> a(static_cast<size_t>(kc * uk.mr) + 1), b(static_cast<size_t>(kc * uk.nr) + 1);
      for (int64_t p = 0; p < kc; ++p) {
        for (int i = 0; i < uk.mr; ++i) {
          a.data[p * uk.mr + i] = i < rows ? source[static_cast<size_t>(offset + i * lda + p)] : 0;
        }
        for (int j = 0; j < uk.nr; ++j) b.data[p * uk.nr + j] = normal(rng);
      }
      for (int cols : {1, lanes - 1, lanes, lanes + 1, uk.nr}) {
        if (cols < 1) continue;
        const int written = cols <= lanes ? lanes : uk.nr;
        for (Store store : {Store::kOverwrite, Store::kAccumulate, Store::kStream}) {
          const int64_t ldc = uk.nr + 5;
          const size_t c_size = static_cast<size_t>((uk.mr + 1) * ldc);
          Aligned<float> want(c_size), got(c_size);
          for (size_t e = 0; e < c_size; ++e) {
            const bool inside = e / ldc < static_cast<size_t>(rows) && e % ldc < size_t(written);
            want.data[e] = got.data[e] = inside ? normal(rng) : kSentinel;
          }
          uk.run(kc, a.data, b.data, want.data, ldc, rows, written, store, nullptr, nullptr);
          const float* next = source.data() + offset;  // a prefetch hint only
          uk.run_strided_a(kc, source.data() + offset, lda, b.data, got.data, ldc, rows, cols,
                           store, next);
          hwy::FlushStream();
          for (size_t e = 0; e < c_size; ++e) {
            ASSERT_EQ(bits(got.data[e]), bits(want.data[e]))
                << uk.target << " C element " << e << " kc " << kc << " rows " << rows << " cols "
                << cols << " store " << static_cast<int>(store);
          }
        }
      }
    }
  }
}

TEST(MicrokernelContract, StridedAFromSourceRowsMatchesPackThenRunEveryTarget) {
  on_every_f32_target([](const Microkernel& uk, int64_t) { check_strided_a_kernel(uk); });
}

// bf16: normal-range inputs, so no subnormal arises and daz/ftz are moot:
// the chain is acc = fma(A(2p+1), B(2p+1), acc); acc = fma(A(2p), B(2p), acc).
TEST(MicrokernelContract, Bf16EveryKernelEveryEdgeEveryStore) {
  std::mt19937 rng(4);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  ASSERT_FALSE(bf16_microkernels().empty());
  for (const Bf16Microkernel& uk : bf16_microkernels()) {
    if (uk.layout != Bf16Layout::kPairs) continue;  // Bf16TileBlocksKernelEveryEdgeEveryStore
    SCOPED_TRACE(uk.target);
    for (int64_t kp : {0, 1, 3, 40}) {
      for (int rows = 1; rows <= uk.mr; ++rows) {
        for (int cols : {1, uk.nr / 2, uk.nr - 3, uk.nr}) {
          if (cols < 1 || cols > uk.nr) continue;
          Aligned<uint16_t> a(static_cast<size_t>(kp * uk.mr * 2) + 1),
              b(static_cast<size_t>(kp * uk.nr * 2) + 1);
          for (int64_t p = 0; p < kp; ++p) {
            for (int t = 0; t < 2; ++t) {
              for (int i = 0; i < uk.mr; ++i) {
                a.data[(p * uk.mr + i) * 2 + t] = i < rows ? f32_to_bf16(normal(rng)) : 0;
              }
              for (int j = 0; j < uk.nr; ++j) {
                b.data[(p * uk.nr + j) * 2 + t] = j < cols ? f32_to_bf16(normal(rng)) : 0;
              }
            }
          }
          const int64_t ldc = uk.nr + 3;
          const int c_rows = uk.mr + 2;
          for (Store store : {Store::kOverwrite, Store::kAccumulate, Store::kStream}) {
            Aligned<float> c(static_cast<size_t>(c_rows * ldc));
            std::vector<float> before(static_cast<size_t>(c_rows * ldc));
            for (size_t e = 0; e < before.size(); ++e) {
              before[e] = e % ldc < static_cast<size_t>(cols) && e / ldc < static_cast<size_t>(rows)
                              ? normal(rng)
                              : kSentinel;
              c.data[e] = before[e];
            }
            run_and_check_tile(
                c.data, c_rows, ldc, rows, cols,
                [&] { uk.run(kp, a.data, b.data, c.data, ldc, rows, cols, store); },
                [&](int i, int64_t j, size_t e) {
                  float acc = 0.0f;
                  for (int64_t p = 0; p < kp; ++p) {
                    for (int t : {1, 0}) {
                      acc = std::fma(bf16_to_f32(a.data[(p * uk.mr + i) * 2 + t]),
                                     bf16_to_f32(b.data[(p * uk.nr + j) * 2 + t]), acc);
                    }
                  }
                  const float want = store == Store::kAccumulate ? before[e] + acc : acc;
                  ASSERT_EQ(bits(c.data[e]), bits(want))
                      << "(" << i << "," << j << ") kp " << kp << " rows " << rows << " cols "
                      << cols << " store " << static_cast<int>(store);
                });
            if (::testing::Test::HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

// The AMX kernel's layout (Bf16Layout::kTileBlocks): 32-k blocks of A rows,
// pairs of B columns. Its rounding is the hardware's (bf16_microkernel.h),
// so each overwritten element is held to the f64 value of the same inputs
// within one rounding per product and add; an accumulated one is C + that
// value, bit for bit (one f32 add); and every element has the bits the full
// 32 x 32 tile gives for the same panels: a ragged tile only writes less,
// it does not compute differently. Nothing outside rows x cols is written.
TEST(MicrokernelContract, Bf16TileBlocksKernelEveryEdgeEveryStore) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  bool ran = false;
  for (const Bf16Microkernel& uk : bf16_microkernels()) {
    if (uk.layout != Bf16Layout::kTileBlocks) continue;
    ran = true;
    SCOPED_TRACE(uk.target);
    constexpr int kB = kAmxBlockK;
    for (int64_t kp : {0, 16, 48}) {
      Aligned<uint16_t> a(static_cast<size_t>(kp * uk.mr * 2)), b(static_cast<size_t>(kp * uk.nr * 2));
      for (int64_t e = 0; e < kp * uk.mr * 2; ++e) a.data[e] = f32_to_bf16(normal(rng));
      for (int64_t e = 0; e < kp * uk.nr * 2; ++e) b.data[e] = f32_to_bf16(normal(rng));
      auto a_at = [&](int i, int64_t k) {
        return static_cast<double>(bf16_to_f32(a.data[((k / kB) * uk.mr + i) * kB + k % kB]));
      };
      auto b_at = [&](int64_t k, int j) {
        return static_cast<double>(bf16_to_f32(b.data[((k / 2) * uk.nr + j) * 2 + k % 2]));
      };
      const int64_t ldc = uk.nr + 3;
      const int c_rows = uk.mr + 2;
      // The overwritten full tile: acc, what an accumulated C adds.
      Aligned<float> overwritten(static_cast<size_t>(c_rows * ldc));
      uk.run(kp, a.data, b.data, overwritten.data, ldc, uk.mr, uk.nr, Store::kOverwrite);
      for (Store store : {Store::kOverwrite, Store::kAccumulate, Store::kStream}) {
        std::vector<float> before(static_cast<size_t>(c_rows * ldc));
        for (float& v : before) v = normal(rng);
        // The full tile's values, the reference for every ragged one.
        Aligned<float> full(before.size());
        std::copy(before.begin(), before.end(), full.data);
        uk.run(kp, a.data, b.data, full.data, ldc, uk.mr, uk.nr, store);
        hwy::FlushStream();
        for (int rows : {1, 15, 16, 17, uk.mr - 1, uk.mr}) {
          for (int cols : {1, 15, 16, 17, uk.nr - 3, uk.nr}) {
            if (rows > uk.mr || cols > uk.nr) continue;
            Aligned<float> c(before.size());
            for (size_t e = 0; e < before.size(); ++e) {
              const bool inside = e % ldc < static_cast<size_t>(cols) && e / ldc < static_cast<size_t>(rows);
              c.data[e] = inside ? before[e] : kSentinel;
            }
            run_and_check_tile(
                c.data, c_rows, ldc, rows, cols,
                [&] { uk.run(kp, a.data, b.data, c.data, ldc, rows, cols, store); },
                [&](int i, int64_t j, size_t e) {
                  ASSERT_EQ(bits(c.data[e]), bits(full.data[e]))
                      << "(" << i << "," << j << ") kp " << kp << " rows " << rows << " cols "
                      << cols;
                  if (rows != uk.mr || cols != uk.nr) return;
                  if (store == Store::kAccumulate) {
                    ASSERT_EQ(bits(c.data[e]), bits(before[e] + overwritten.data[e]))
                        << "(" << i << "," << j << ") kp " << kp << ": not C + acc";
                    return;
                  }
                  double want = 0.0, magnitude = 0.0;
                  for (int64_t k = 0; k < 2 * kp; ++k) {
                    want += a_at(i, k) * b_at(k, static_cast<int>(j));
                    magnitude += std::fabs(a_at(i, k) * b_at(k, static_cast<int>(j)));
                  }
                  const double steps = 2.0 * static_cast<double>(kp) * 2 + 1;
                  const double u = std::ldexp(1.0, -24);
                  ASSERT_LE(std::fabs(c.data[e] - want), steps * u * magnitude)
                      << "(" << i << "," << j << ") kp " << kp << " store "
                      << static_cast<int>(store);
                });
            if (::testing::Test::HasFatalFailure()) return;
          }
        }
      }
    }
  }
  if (!ran) GTEST_SKIP() << "no kernel of the AMX layout runs on this CPU";
}

}  // namespace
}  // namespace raggemm::kernels
