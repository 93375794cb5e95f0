// Each int8 microkernel this CPU runs, alone, at the ends of the int8 range:
// codes are -128..127 on both operands (docs/quantization.md), and every
// kernel must give the exact integer sum there. -128 x -128 is the case a
// vpmaddubsw scheme gets wrong (its sign trick negates -128 to -128, and a
// pair of 128 * 128 products saturates at 2^15 - 1).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/microkernel_registry.h"

namespace raggemm::kernels {
namespace {

// A [rows, k] and B [k, cols] (row-major codes) through one kernel call per
// (mr, nr) tile, packed as int8_microkernel.h lays panels out, the biased-A
// correction applied as int8_gmm does. C: [rows, cols] int32.
std::vector<int32_t> run_tiles(const Int8Microkernel& uk, const std::vector<int8_t>& a,
                               const std::vector<int8_t>& b, int rows, int k, int cols) {
  const int kq = (k + 3) / 4;
  const size_t a_bytes = static_cast<size_t>(kq) * uk.mr * 4 * (uk.a_int16 ? 2 : 1);
  std::vector<int32_t> c(static_cast<size_t>(rows) * cols, 0);
  for (int j0 = 0; j0 < cols; j0 += uk.nr) {
    const int tile_cols = std::min(uk.nr, cols - j0);
    std::vector<int8_t> bp(static_cast<size_t>(kq) * uk.nr * 4 + 64, 0);
    std::vector<int32_t> column_sums(uk.nr, 0);
    for (int p = 0; p < kq; ++p) {
      for (int j = 0; j < tile_cols; ++j) {
        for (int t = 0; t < 4; ++t) {
          const int kk = 4 * p + t;
          const int8_t v = kk < k ? b[static_cast<size_t>(kk) * cols + j0 + j] : 0;
          bp[(static_cast<size_t>(p) * uk.nr + j) * 4 + t] = v;
          column_sums[j] += v;
        }
      }
    }
    for (int i0 = 0; i0 < rows; i0 += uk.mr) {
      const int tile_rows = std::min(uk.mr, rows - i0);
      std::vector<uint8_t> ap(a_bytes + 64, 0);
      for (int p = 0; p < kq; ++p) {
        for (int i = 0; i < tile_rows; ++i) {
          for (int t = 0; t < 4; ++t) {
            const int kk = 4 * p + t;
            const int8_t v = kk < k ? a[static_cast<size_t>(i0 + i) * k + kk] : 0;
            const size_t at = (static_cast<size_t>(p) * uk.mr + i) * 4 + t;
            if (uk.a_int16) {
              const int16_t word = v;
              std::memcpy(ap.data() + 2 * at, &word, 2);
            } else {
              ap[at] = uk.biased_a ? static_cast<uint8_t>(v + 128) : static_cast<uint8_t>(v);
            }
          }
        }
      }
      // Accumulate onto a non-zero C in two k-slices, as the driver does.
      std::vector<int32_t> tile(static_cast<size_t>(uk.mr) * uk.nr, 7);
      const int half = kq / 2;
      const size_t a_quad = static_cast<size_t>(uk.mr) * 4 * (uk.a_int16 ? 2 : 1);
      uk.run(half, ap.data(), bp.data(), tile.data(), uk.nr, tile_rows, tile_cols, false);
      uk.run(kq - half, ap.data() + half * a_quad, bp.data() + static_cast<size_t>(half) * uk.nr * 4,
             tile.data(), uk.nr, tile_rows, tile_cols, half > 0);
      for (int i = 0; i < tile_rows; ++i) {
        for (int j = 0; j < tile_cols; ++j) {
          const int32_t correction = uk.biased_a ? 128 * column_sums[j] : 0;
          c[static_cast<size_t>(i0 + i) * cols + j0 + j] =
              tile[static_cast<size_t>(i) * uk.nr + j] - correction;
        }
      }
    }
  }
  return c;
}

std::vector<int32_t> exact(const std::vector<int8_t>& a, const std::vector<int8_t>& b, int rows,
                           int k, int cols) {
  std::vector<int32_t> c(static_cast<size_t>(rows) * cols, 0);
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < cols; ++j) {
      int64_t sum = 0;
      for (int kk = 0; kk < k; ++kk) {
        sum += int64_t{a[static_cast<size_t>(i) * k + kk]} * b[static_cast<size_t>(kk) * cols + j];
      }
      c[static_cast<size_t>(i) * cols + j] = static_cast<int32_t>(sum);
    }
  }
  return c;
}

void expect_every_kernel_exact(const std::vector<int8_t>& a, const std::vector<int8_t>& b,
                               int rows, int k, int cols, const char* what) {
  const std::vector<int32_t> want = exact(a, b, rows, k, cols);
  for (const Int8Microkernel& uk : int8_microkernels()) {
    const std::vector<int32_t> got = run_tiles(uk, a, b, rows, k, cols);
    int reported = 0;
    for (size_t e = 0; e < want.size() && reported < 5; ++e) {
      if (got[e] != want[e]) {
        ++reported;
        ADD_FAILURE() << uk.target << " " << what << ": C(" << e / cols << "," << e % cols
                      << ") = " << got[e] << ", exact " << want[e];
      }
    }
  }
}

// Rows of A and columns of B run through all 16 quads over {-128, 127}, so
// every pairing of -128/127 in every quad position meets every other; K
// runs to 1026 (257 quads, the last ragged), so sums reach about +-2^24.
TEST(Int8Microkernel, ExtremesEveryCombinationEveryKernel) {
  const int rows = 16, cols = 16 + 3;  // a ragged last column panel too
  for (int k : {4, 7, 1026}) {
    std::vector<int8_t> a(static_cast<size_t>(rows) * k), b(static_cast<size_t>(k) * cols);
    for (int i = 0; i < rows; ++i) {
      for (int kk = 0; kk < k; ++kk) a[static_cast<size_t>(i) * k + kk] = (i >> (kk % 4)) & 1 ? 127 : -128;
    }
    for (int kk = 0; kk < k; ++kk) {
      for (int j = 0; j < cols; ++j) {
        b[static_cast<size_t>(kk) * cols + j] = ((j % 16) >> (kk % 4)) & 1 ? 127 : -128;
      }
    }
    expect_every_kernel_exact(a, b, rows, k, cols, ("patterns, k=" + std::to_string(k)).c_str());
  }
  // Uniform extremes: all four (a, b) in {-128, 127}^2 over a long K.
  for (int va : {-128, 127}) {
    for (int vb : {-128, 127}) {
      const int r = 13, k = 1024, c = 35;
      std::vector<int8_t> a(static_cast<size_t>(r) * k, static_cast<int8_t>(va));
      std::vector<int8_t> b(static_cast<size_t>(k) * c, static_cast<int8_t>(vb));
      expect_every_kernel_exact(a, b, r, k, c,
                                ("all " + std::to_string(va) + " x " + std::to_string(vb)).c_str());
    }
  }
}

TEST(Int8Microkernel, RandomCodesFullRangeEveryKernel) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> code(-128, 127);
  const int rows = 29, k = 131, cols = 70;
  std::vector<int8_t> a(static_cast<size_t>(rows) * k), b(static_cast<size_t>(k) * cols);
  for (auto& v : a) v = static_cast<int8_t>(code(rng));
  for (auto& v : b) v = static_cast<int8_t>(code(rng));
  expect_every_kernel_exact(a, b, rows, k, cols, "random");
}

}  // namespace
}  // namespace raggemm::kernels
