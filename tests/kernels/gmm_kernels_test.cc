// Both kernel generations against the f64 reference, for all three passes,
// through the public ops: shapes, tile classes, group patterns, dtypes,
// thread counts, Highway targets and the v2 output stage; and tgmm's
// summation order of each generation, bit for bit.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/microkernel.h"
#include "support/gmm_case.h"

namespace raggemm {
namespace {

using testing::max_scaled_error;
using testing::poisoned;
using testing::random_tensor;
using testing::sizes_tensor;

enum class Pass { kFwd, kDlhs, kDrhs };

struct Case {
  std::string name;
  int64_t m, k, n;
  std::vector<int64_t> sizes;
  Tiles tiles;
};

// Rows of gmm output past sum(sizes) must be exact zeros.
bool rows_past_sum_are_zero(const Tensor& out, const std::vector<int64_t>& sizes) {
  int64_t sum = 0;
  for (int64_t s : sizes) sum += s;
  const int64_t cols = out.dim(1);
  for (int64_t i = sum * cols; i < out.numel(); ++i) {
    if (out.as<float>()[i] != 0.0f) return false;
  }
  return true;
}

// Runs one pass with the given kernel and dtype, compares with the reference.
void check_pass(const Case& c, Pass pass, KernelVersion kernel, DType dtype, int threads = 2) {
  SCOPED_TRACE(c.name + " pass=" + std::to_string(static_cast<int>(pass)) + " kernel=" +
               kernel_name(kernel) + " dtype=" + dtype_name(dtype));
  const Tensor gs = sizes_tensor(c.sizes);
  const int64_t groups = static_cast<int64_t>(c.sizes.size());
  if (pass == Pass::kDrhs) {
    const Tensor lhs = random_tensor({c.m, c.k}, dtype, 11);
    const Tensor dout = random_tensor({c.m, c.n}, dtype, 12);
    TgmmOptions o;
    o.kernel = kernel;
    o.tiles = c.tiles;
    o.threads = threads;
    const Tensor out = poisoned({groups, c.k, c.n});
    tgmm_into(lhs, dout, gs, out, o);
    const Tensor ref = testing::reference_tgmm(lhs, dout, c.sizes, o);
    EXPECT_LE(max_scaled_error(out, ref, c.m), 1.0);
    for (int64_t g = 0; g < groups; ++g) {
      if (c.sizes[g] != 0) continue;
      for (int64_t i = 0; i < c.k * c.n; ++i) {
        ASSERT_EQ(out.as<float>()[g * c.k * c.n + i], 0.0f) << "empty group " << g;
      }
    }
    return;
  }
  GmmOptions o;
  o.kernel = kernel;
  o.tiles = c.tiles;
  o.threads = threads;
  o.transpose_rhs = pass == Pass::kDlhs;
  // dlhs: dout [M, N] @ rhs[g]^T with rhs [G, K, N] -> out [M, K]: the
  // contraction is N and the transposed rhs is read as [G, K_out, N].
  const int64_t contracted = pass == Pass::kDlhs ? c.n : c.k;
  const int64_t out_cols = pass == Pass::kDlhs ? c.k : c.n;
  const Tensor lhs = random_tensor({c.m, contracted}, dtype, 21);
  const Tensor rhs = pass == Pass::kDlhs ? random_tensor({groups, out_cols, contracted}, dtype, 22)
                                         : random_tensor({groups, contracted, out_cols}, dtype, 22);
  const Tensor out = poisoned({c.m, out_cols});
  gmm_into(lhs, rhs, gs, out, o);
  const Tensor ref = testing::reference_gmm(lhs, rhs, c.sizes, o);
  EXPECT_LE(max_scaled_error(out, ref, contracted), 1.0);
  EXPECT_TRUE(rows_past_sum_are_zero(out, c.sizes));
}

std::vector<Case> shape_cases() {
  return {
      {"dividing", 64, 32, 48, {16, 16, 16, 16}, {16, 16, 16}},
      {"non_dividing", 67, 37, 45, {20, 0, 31, 9}, {16, 8, 16}},
      {"smaller_than_register_tile", 29, 13, 19, {7, 0, 11, 5}, {1, 1, 1}},
      {"odd_small_tiles", 40, 21, 35, {13, 13, 0, 13}, {5, 3, 7}},
      {"larger_than_dims", 23, 9, 11, {10, 0, 13}, {512, 512, 512}},
      {"sum_less_than_m", 50, 17, 23, {10, 0, 15}, {8, 8, 8}},
      {"m_zero", 0, 8, 8, {0, 0}, {4, 4, 4}},
      {"k_one", 30, 1, 33, {12, 18}, {8, 4, 16}},
      {"single_group", 41, 19, 27, {41}, {12, 8, 32}},
      {"all_empty", 12, 6, 10, {0, 0, 0}, {4, 4, 4}},
      {"one_row_groups", 9, 20, 40, {1, 1, 1, 1, 1, 1, 1, 1}, {4, 8, 16}},
      {"skewed", 257, 65, 70, {200, 1, 0, 50, 6}, {64, 32, 64}},
      {"default_tiles", 300, 300, 280, {150, 0, 100, 30}, {0, 0, 0}},
      {"straddling", 96, 40, 36, {5, 17, 33, 41}, {32, 16, 16}},
      // v2 items of one m-tile and more than 128 columns go by column
      // chunks (128, 128 and a ragged 44) with the next chunk streamed in:
      // fwd here, over three k-slices...
      {"column_chunks", 100, 70, 300, {40, 0, 17, 33}, {64, 32, 300}},
      // ...and dlhs here (260 output columns), slices of whole rows.
      {"column_chunks_dlhs", 90, 260, 96, {30, 0, 45, 15}, {48, 96, 300}},
      // Depth slices longer than the staging chunk of decoded (bf16) panels
      // (256): packing goes by chunks 256, 256 and a ragged rest (fwd k 600;
      // dlhs contracts 530), and B panels end ragged (530 columns).
      {"deep_decode_chunks", 70, 600, 530, {30, 0, 25, 10}, {24, 600, 600}},
      // Output rows 2 KiB apart (512 f32 columns, fwd n and dlhs k): v2's
      // one-m-tile items accumulate in a staging block with padded rows over
      // four k-slices, then copy it out.
      {"aliasing_rows", 80, 512, 512, {30, 0, 20, 9}, {32, 128, 512}},
      // dlhs contracting 1100 (whole rows): B chunks take an eighth of L2
      // (29 columns on a 1 MiB L2: one or two register panels), so 100
      // output columns go in several chunks and a ragged one, both in the
      // one-m-tile items (groups 13 and 5) and while the first m-tile of a
      // multi-tile item (50 rows, three m-tiles; 40 rows, two) packs the
      // block chunk by chunk for the later m-tiles; rows past the groups.
      {"narrow_chunks_dlhs", 120, 100, 1100, {50, 0, 13, 40, 5}, {24, 1100, 100}},
      // The same in slices of 512, 512 and a ragged 76 (chunks of 64
      // columns on a 1 MiB L2), each slice accumulated onto the last.
      {"chunked_dlhs_slices", 120, 100, 1100, {50, 0, 13, 40, 5}, {24, 512, 100}},
  };
}

using KernelParam = std::tuple<Case, KernelVersion, DType, Pass>;

std::string case_name(const ::testing::TestParamInfo<KernelParam>& info) {
  static const char* const kPasses[] = {"fwd", "dlhs", "drhs"};
  return std::get<0>(info.param).name + "_" + kernel_name(std::get<1>(info.param)) + "_" +
         dtype_name(std::get<2>(info.param)) + "_" +
         kPasses[static_cast<int>(std::get<3>(info.param))];
}

class KernelTest
    : public ::testing::TestWithParam<std::tuple<Case, KernelVersion, DType, Pass>> {};

TEST_P(KernelTest, MatchesReference) {
  const auto& [c, kernel, dtype, pass] = GetParam();
  check_pass(c, pass, kernel, dtype);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, KernelTest,
    ::testing::Combine(::testing::ValuesIn(shape_cases()),
                       ::testing::Values(KernelVersion::kV1, KernelVersion::kV2),
                       ::testing::Values(DType::kF32, DType::kBF16),
                       ::testing::Values(Pass::kFwd, Pass::kDlhs, Pass::kDrhs)),
    case_name);

// Every empty/non-empty pattern of G groups, G = 1..8, with a few padding rows
// past the groups and tiles that straddle groups and divide nothing.
TEST(KernelPatterns, AllEmptyNonEmptyPatterns) {
  for (int groups = 1; groups <= 8; ++groups) {
    for (int mask = 0; mask < (1 << groups); ++mask) {
      std::vector<int64_t> sizes(groups, 0);
      int64_t total = 0;
      for (int g = 0; g < groups; ++g) {
        if (mask & (1 << g)) sizes[g] = 1 + (g * 7 + mask) % 5;
        total += sizes[g];
      }
      Case c{"G" + std::to_string(groups) + "_mask" + std::to_string(mask), total + 3, 7, 9,
             sizes, {4, 3, 5}};
      for (KernelVersion kernel : {KernelVersion::kV1, KernelVersion::kV2}) {
        for (Pass pass : {Pass::kFwd, Pass::kDlhs, Pass::kDrhs}) {
          check_pass(c, pass, kernel, DType::kF32, 1);
          if (::testing::Test::HasFailure()) return;
        }
      }
    }
  }
}

// Results must not depend on the thread count, bit for bit.
TEST(KernelDeterminism, OneAndTwoThreadsBitwiseEqual) {
  const std::vector<int64_t> sizes = {180, 0, 3, 97, 1, 60};
  const Tensor gs = sizes_tensor(sizes);
  const Tensor lhs = random_tensor({360, 150}, DType::kF32, 1);
  const Tensor rhs = random_tensor({6, 150, 130}, DType::kF32, 2);
  const Tensor rhs_t = random_tensor({6, 130, 150}, DType::kF32, 3);
  const Tensor dout = random_tensor({360, 130}, DType::kF32, 4);
  for (KernelVersion kernel : {KernelVersion::kV1, KernelVersion::kV2}) {
    for (Tiles tiles : {Tiles{48, 64, 64}, Tiles{17, 23, 29}, Tiles{}}) {
      std::vector<Tensor> runs[3];
      for (int threads : {1, 2, 3}) {
        GmmOptions o;
        o.kernel = kernel;
        o.tiles = tiles;
        o.threads = threads;
        GmmOptions ot = o;
        ot.transpose_rhs = true;
        TgmmOptions to;
        to.kernel = kernel;
        to.tiles = tiles;
        to.threads = threads;
        runs[0].push_back(gmm(lhs, rhs, gs, o));
        runs[1].push_back(gmm(lhs, rhs_t, gs, ot));
        runs[2].push_back(tgmm(lhs, dout, gs, to));
      }
      for (auto& pass : runs) {
        for (size_t t = 1; t < pass.size(); ++t) {
          ASSERT_EQ(pass[0].nbytes(), pass[t].nbytes());
          EXPECT_EQ(0, std::memcmp(pass[0].data(), pass[t].data(), pass[0].nbytes()))
              << "kernel " << kernel_name(kernel) << " threads " << t + 1;
        }
      }
    }
  }
}

// Each Highway target this CPU can run, forced in turn: the portable
// fallback (EMU128) and every x86 target compute the same contract.
TEST(KernelTargets, EveryRunnableTargetMatchesReference) {
  const int64_t targets = kernels::microkernel_targets();
  int tested = 0;
  for (int64_t bit = 1; bit != 0 && bit <= targets; bit <<= 1) {
    if (!(targets & bit)) continue;
    hwy::SetSupportedTargetsForTest(bit);
    const kernels::Microkernel uk = kernels::select_microkernel();
    EXPECT_STREQ(uk.target, kernels::target_name(bit));
    SCOPED_TRACE(uk.target);
    for (const Case& c : shape_cases()) {
      if (c.m * c.k * c.n > 200000) continue;  // the big reference runs once, above
      for (KernelVersion kernel : {KernelVersion::kV1, KernelVersion::kV2}) {
        for (Pass pass : {Pass::kFwd, Pass::kDlhs, Pass::kDrhs}) {
          check_pass(c, pass, kernel, DType::kF32);
          // bf16 widening and the interleaving packers are per target too.
          check_pass(c, pass, kernel, DType::kBF16);
        }
      }
    }
    ++tested;
  }
  hwy::SetSupportedTargetsForTest(0);
  EXPECT_GE(tested, 2) << "expected at least the fallback and one SIMD target";
}

// v2 output stage: SwiGLU of gate|up halves, per-row and per-column scales,
// bias, per group, against the reference's f64 output stage.
TEST(KernelEpilogue, FusedSwigluScalesAndBias) {
  const std::vector<int64_t> sizes = {13, 0, 29, 7};
  const Tensor gs = sizes_tensor(sizes);
  const int64_t m = 55, k = 33, n = 2 * 21;
  const Tensor lhs = random_tensor({m, k}, DType::kF32, 5);
  const Tensor rhs = random_tensor({4, k, n}, DType::kF32, 6);
  const Tensor row_scale = random_tensor({m}, DType::kF32, 7);
  const Tensor col_scale = random_tensor({4, n}, DType::kF32, 8);
  const Tensor col_bias = random_tensor({n}, DType::kF32, 9);
  for (bool swiglu : {false, true}) {
    for (Tiles tiles : {Tiles{8, 16, 8}, Tiles{64, 64, 64}, Tiles{5, 7, 3}}) {
      GmmOptions o;
      o.kernel = KernelVersion::kV2;
      o.tiles = tiles;
      o.fuse_swiglu = swiglu;
      o.row_scale = row_scale.view();
      o.col_scale = col_scale.view();
      o.col_bias = col_bias.view();
      const Tensor out = gmm(lhs, rhs, gs, o);
      const Tensor ref = testing::reference_gmm(lhs, rhs, sizes, o);
      EXPECT_EQ(out.dim(1), swiglu ? n / 2 : n);
      EXPECT_LE(max_scaled_error(out, ref, 4 * k), 1.0) << "swiglu " << swiglu;
      EXPECT_TRUE(rows_past_sum_are_zero(out, sizes));
    }
  }
}

// The output stage on a v2 one-m-tile item whose staging block has padded
// rows (512 output columns, rows 2 KiB apart).
TEST(KernelEpilogue, ScalesAndBiasThroughPaddedStaging) {
  const std::vector<int64_t> sizes = {30, 0, 20, 9};
  const Tensor gs = sizes_tensor(sizes);
  const int64_t m = 64, k = 48, n = 512;
  const Tensor lhs = random_tensor({m, k}, DType::kF32, 15);
  const Tensor rhs = random_tensor({4, k, n}, DType::kF32, 16);
  const Tensor row_scale = random_tensor({m}, DType::kF32, 17);
  const Tensor col_scale = random_tensor({4, n}, DType::kF32, 18);
  const Tensor col_bias = random_tensor({n}, DType::kF32, 19);
  GmmOptions o;
  o.kernel = KernelVersion::kV2;
  o.tiles = Tiles{32, 16, 512};
  o.row_scale = row_scale.view();
  o.col_scale = col_scale.view();
  o.col_bias = col_bias.view();
  const Tensor out = poisoned({m, n});
  gmm_into(lhs, rhs, gs, out, o);
  const Tensor ref = testing::reference_gmm(lhs, rhs, sizes, o);
  EXPECT_LE(max_scaled_error(out, ref, 4 * k), 1.0);
  EXPECT_TRUE(rows_past_sum_are_zero(out, sizes));
}

// Whether the dispatched microkernel's multiply-add is fused: targets with
// FMA compute fma(a, b, acc), the others (SSSE3, SSE4, the portable
// fallback) round a * b first. Probed on a two-step product whose second
// step tells them apart: -1 * 1 + (1 + 2^-12)^2 is 2^-11 + 2^-24 fused,
// 2^-11 not.
bool microkernel_fuses_multiply_add() {
  const kernels::Microkernel uk = kernels::select_microkernel();
  alignas(64) float a[2 * 64] = {}, b[2 * 64] = {};
  const float x = 1.0f + 0x1p-12f;
  a[0] = -1.0f, a[uk.mr] = x;
  b[0] = 1.0f, b[uk.nr] = x;
  float c = 0.0f;
  uk.run(2, a, b, &c, 1, 1, 1, kernels::Store::kOverwrite, nullptr, nullptr);
  return c == std::fma(x, x, -1.0f);
}

// tgmm's summation order, rebuilt from the microkernel's contract
// (kernels/microkernel.h: acc = 0, acc += a * b over a call's k in order,
// then C = acc or C + acc): each group's tokens go in slices of `tile_k`, a
// slice's partial from zero, the first slice written and each later one
// added. v1's slices are the global token tiles [t * tile_k,
// (t + 1) * tile_k) that touch the group (the other groups' tokens are
// masked to zero, and adding 0 * b leaves acc as it is, so leaving them out
// is the same); v2's start at the group's first row.
std::vector<float> tgmm_in_slices(const Tensor& lhs, const Tensor& dout,
                                  const std::vector<int64_t>& sizes, int64_t tile_k,
                                  bool global_token_tiles, bool fused) {
  const int64_t k = lhs.dim(1), n = dout.dim(1);
  auto value = [](const Tensor& t, int64_t i) {
    return t.dtype() == DType::kF32 ? t.as<float>()[i] : bf16_to_f32(t.as<uint16_t>()[i]);
  };
  auto multiply_add = [fused](float a, float b, float acc) {
    if (fused) return std::fma(a, b, acc);
    const volatile float product = a * b;  // rounded, never contracted into an fma
    return product + acc;
  };
  std::vector<float> out(sizes.size() * k * n);
  int64_t begin = 0;
  for (size_t g = 0; g < sizes.size(); ++g) {
    const int64_t end = begin + sizes[g];
    float* c = out.data() + g * k * n;
    const int64_t first = global_token_tiles ? begin / tile_k * tile_k : begin;
    for (int64_t t0 = first; t0 < end; t0 += tile_k) {
      const int64_t lo = std::max(t0, begin), hi = std::min(t0 + tile_k, end);
      for (int64_t i = 0; i < k; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          float acc = 0.0f;
          for (int64_t p = lo; p < hi; ++p) {
            acc = multiply_add(value(lhs, p * k + i), value(dout, p * n + j), acc);
          }
          c[i * n + j] = t0 == first ? acc : c[i * n + j] + acc;
        }
      }
    }
    begin = end;
  }
  return out;
}

// v1's bits are those of its token tiles over the global rows, and v2's
// those of its slices from each group's first row, on every target. Groups
// start inside token tiles here (rows 13, 53, 82 of tiles of 16), where
// the two orders round differently: the test checks that they do, so that
// v1 summing in v2's slices (or v2 in v1's) fails it. v1 widens bf16 and
// runs the f32 microkernel, so its bf16 bits follow the same order.
TEST(KernelSummationOrder, TgmmV1SumsGlobalTokenTilesAndV2SlicesFromTheGroupStart) {
  const std::vector<int64_t> sizes = {13, 0, 40, 29, 9};  // 91 of 100 rows
  const Tensor gs = sizes_tensor(sizes);
  const int64_t m = 100, k = 24, n = 40, tile_k = 16;
  const int64_t targets = kernels::microkernel_targets();
  for (int64_t bit = 1; bit != 0 && bit <= targets; bit <<= 1) {
    if (!(targets & bit)) continue;
    hwy::SetSupportedTargetsForTest(bit);
    SCOPED_TRACE(kernels::select_microkernel().target);
    const bool fused = microkernel_fuses_multiply_add();
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      const Tensor lhs = random_tensor({m, k}, dtype, 41);
      const Tensor dout = random_tensor({m, n}, dtype, 42);
      const std::vector<float> v1_order = tgmm_in_slices(lhs, dout, sizes, tile_k, true, fused);
      const std::vector<float> v2_order = tgmm_in_slices(lhs, dout, sizes, tile_k, false, fused);
      if (dtype == DType::kF32) {
        ASSERT_NE(0, std::memcmp(v1_order.data(), v2_order.data(), sizeof(float) * v1_order.size()))
            << "the case does not tell the two orders apart";
      }
      for (KernelVersion kernel : {KernelVersion::kV1, KernelVersion::kV2}) {
        // v2 runs bf16 x bf16 on the bf16 dot kernels where the CPU has them.
        if (kernel == KernelVersion::kV2 && dtype == DType::kBF16) continue;
        const std::vector<float>& expected = kernel == KernelVersion::kV1 ? v1_order : v2_order;
        for (Tiles tiles : {Tiles{16, tile_k, 16}, Tiles{10, tile_k, 12}}) {
          TgmmOptions o;
          o.kernel = kernel;
          o.tiles = tiles;
          o.threads = 2;
          const Tensor out = tgmm(lhs, dout, gs, o);
          ASSERT_EQ(out.nbytes(), sizeof(float) * expected.size());
          EXPECT_EQ(0, std::memcmp(out.data(), expected.data(), out.nbytes()))
              << kernel_name(kernel) << " " << dtype_name(dtype) << " tiles " << tiles.m << ","
              << tiles.n;
        }
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

// Expert parallelism: rhs holds a slice of the experts.
TEST(KernelLocalExperts, GroupOffsetComputesOnlyLocalGroups) {
  const std::vector<int64_t> sizes = {9, 4, 0, 12, 6};
  const Tensor gs = sizes_tensor(sizes);
  const Tensor lhs = random_tensor({35, 16}, DType::kF32, 31);
  const Tensor rhs = random_tensor({2, 16, 20}, DType::kF32, 32);
  const Tensor dout = random_tensor({35, 20}, DType::kF32, 33);
  for (KernelVersion kernel : {KernelVersion::kV1, KernelVersion::kV2}) {
    for (int64_t offset : {0, 1, 2, 3}) {
      GmmOptions o;
      o.kernel = kernel;
      o.tiles = {8, 8, 8};
      o.group_offset = offset;
      o.local_groups = 2;
      const Tensor out = gmm(lhs, rhs, gs, o);
      EXPECT_LE(max_scaled_error(out, testing::reference_gmm(lhs, rhs, sizes, o), 16), 1.0);
      TgmmOptions to;
      to.kernel = kernel;
      to.tiles = {8, 8, 8};
      to.group_offset = offset;
      to.local_groups = 2;
      const Tensor dw = tgmm(lhs, dout, gs, to);
      EXPECT_EQ(dw.dim(0), 2);
      EXPECT_LE(max_scaled_error(dw, testing::reference_tgmm(lhs, dout, sizes, to), 35), 1.0);
    }
  }
}

}  // namespace
}  // namespace raggemm
