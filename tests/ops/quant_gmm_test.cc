// Quantized passes (include/raggemm/quant.h): each pass against
//  - tight: a float64 grouped matmul of exactly the operands the pass hands
//    to the kernels, dequantized (same math, up to f32 summation order);
//  - loose: the unquantized f32 result, within the quantization error the
//    formats allow (relative Frobenius: e4m3 0.07, e5m2 0.12, int8 0.02);
// for both recipes, every weight granularity, both kernel versions, empty
// groups and sum < M; and the settings that cannot work are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/group_offsets.h"
#include "raggemm/error.h"
#include "raggemm/quant.h"

namespace raggemm {
namespace {

constexpr int64_t kM = 37, kK = 70, kN = 45;

const std::vector<std::vector<int32_t>> kGroupPatterns = {
    {10, 0, 20, 5},  // sum 35 < M, an empty group inside
    {0, 0, 37, 0},   // all in one group, empty first and last
    {0, 0, 0, 0},    // all empty
    {9, 9, 9, 10},   // full
};

Tensor random_normal(const Shape& shape, uint32_t seed) {
  Tensor t(DType::kF32, shape);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] = normal(rng);
  return t;
}

Tensor sizes_tensor(const std::vector<int32_t>& sizes) {
  Tensor t(DType::kI32, {static_cast<int64_t>(sizes.size())});
  for (size_t g = 0; g < sizes.size(); ++g) t.as<int32_t>()[g] = sizes[g];
  return t;
}

std::vector<int64_t> starts_of(const std::vector<int32_t>& sizes) {
  return group_row_starts(sizes);
}

// out[i] = lhs[i] @ rhs[g] (rhs [G,K,N]) or lhs[i] @ rhs[g]^T, in float64.
std::vector<double> gmm_f64(const Tensor& lhs, const Tensor& rhs, const std::vector<int32_t>& sizes,
                            bool transpose_rhs) {
  const int64_t m = lhs.dim(0), k = lhs.dim(1);
  const int64_t n = rhs.dim(transpose_rhs ? 1 : 2);
  const int64_t rows = rhs.dim(1), cols = rhs.dim(2);
  std::vector<double> out(m * n, 0.0);
  const std::vector<int64_t> starts = starts_of(sizes);
  for (size_t g = 0; g < sizes.size(); ++g) {
    const float* w = rhs.as<float>() + g * rows * cols;
    for (int64_t i = starts[g]; i < starts[g + 1]; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p) {
          const double b = transpose_rhs ? w[j * cols + p] : w[p * cols + j];
          sum += double{lhs.as<float>()[i * k + p]} * b;
        }
        out[i * n + j] = sum;
      }
    }
  }
  return out;
}

// out[g] = lhs[rows g]^T @ dout[rows g], float64.
std::vector<double> tgmm_f64(const Tensor& lhs, const Tensor& dout,
                             const std::vector<int32_t>& sizes) {
  const int64_t k = lhs.dim(1), n = dout.dim(1);
  const std::vector<int64_t> starts = starts_of(sizes);
  std::vector<double> out(sizes.size() * k * n, 0.0);
  for (size_t g = 0; g < sizes.size(); ++g) {
    for (int64_t i = starts[g]; i < starts[g + 1]; ++i) {
      for (int64_t p = 0; p < k; ++p) {
        for (int64_t j = 0; j < n; ++j) {
          out[(g * k + p) * n + j] +=
              double{lhs.as<float>()[i * k + p]} * double{dout.as<float>()[i * n + j]};
        }
      }
    }
  }
  return out;
}

double rel_frobenius(const Tensor& got, const std::vector<double>& want) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = double{got.as<float>()[i]} - want[i];
    diff += d * d;
    norm += want[i] * want[i];
  }
  return norm == 0 ? std::sqrt(diff) : std::sqrt(diff / norm);
}

// Tight: every element within f32 rounding of a sum of that many terms.
void expect_tight(const Tensor& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(static_cast<size_t>(got.numel()), want.size()) << what;
  double scale = 0;
  for (double v : want) scale = std::max(scale, std::fabs(v));
  int failures = 0;
  for (size_t i = 0; i < want.size() && failures < 5; ++i) {
    if (std::fabs(got.as<float>()[i] - want[i]) > 2e-5 * scale + 1e-30) {
      ++failures;
      ADD_FAILURE() << what << " element " << i << ": " << got.as<float>()[i] << " vs " << want[i];
    }
  }
}

// The codes of a quantized tensor with its scales (true) or alone (false).
Tensor decoded(const QuantizedTensor& q, bool with_scales) {
  if (with_scales) return dequantize(q);
  Tensor ones(DType::kF32, q.scales.shape());
  std::fill(ones.as<float>(), ones.as<float>() + ones.numel(), 1.0f);
  return dequantize(q.values, ones, q.type, q.granularity);
}

double loose_bound(QuantType type) {
  switch (type) {
    case QuantType::kFp8E4M3:
      return 0.07;
    case QuantType::kFp8E5M2:
      return 0.12;
    case QuantType::kInt8:
      return 0.02;
  }
  return 0;
}

struct PassCase {
  QuantRecipe recipe;
  KernelVersion kernel;
  RhsScaling scaling;
  int64_t lhs_k_block;
};

std::string name_of(const PassCase& c) {
  return std::string(quant_recipe_name(c.recipe)) + "_" + kernel_name(c.kernel) + "_" +
         (c.scaling.block() ? "block" + std::to_string(c.scaling.block_size) : "channel") +
         (c.lhs_k_block ? "_lhsblock" + std::to_string(c.lhs_k_block) : "");
}

std::vector<PassCase> pass_cases() {
  std::vector<PassCase> cases;
  for (QuantRecipe recipe : {QuantRecipe::kFp8, QuantRecipe::kInt8}) {
    for (KernelVersion kernel : {KernelVersion::kV1, KernelVersion::kV2}) {
      cases.push_back({recipe, kernel, RhsScaling{}, 0});
      if (kernel == KernelVersion::kV2) {
        cases.push_back({recipe, kernel, RhsScaling{32}, 0});
        cases.push_back({recipe, kernel, RhsScaling{64}, 32});
        cases.push_back({recipe, kernel, RhsScaling{}, 32});
      }
    }
  }
  return cases;
}

// The cases a pass can run at all, so that every instantiated test asserts:
// lhs K-blocks are a forward setting, and drhs has no weight to scale.
bool runs_in_dlhs(const PassCase& c) { return c.lhs_k_block == 0; }
bool runs_in_drhs(const PassCase& c) { return c.lhs_k_block == 0 && !c.scaling.block(); }

std::vector<PassCase> pass_cases_where(bool (*runs)(const PassCase&)) {
  std::vector<PassCase> kept;
  for (const PassCase& c : pass_cases()) {
    if (runs(c)) kept.push_back(c);
  }
  return kept;
}

class QuantForwardTest : public ::testing::TestWithParam<PassCase> {};
class QuantGradLhsTest : public ::testing::TestWithParam<PassCase> {};
class QuantGradRhsTest : public ::testing::TestWithParam<PassCase> {};

TEST_P(QuantForwardTest, MatchesDequantizedReferenceAndF32) {
  const PassCase& c = GetParam();
  Tensor lhs = random_normal({kM, kK}, 1);
  Tensor weight = random_normal({4, kK, kN}, 2);
  GmmOptions options;
  options.kernel = c.kernel;
  QuantGmmOptions quant{c.recipe, c.scaling, c.lhs_k_block};
  const QuantizedTensor qw = quantize_weight(weight, c.recipe, c.scaling);
  EXPECT_EQ(
      qw.scales.shape(),
      (Shape{4, c.scaling.block() ? (kK + c.scaling.block_size - 1) / c.scaling.block_size : 1,
             kN}));
  for (const auto& sizes : kGroupPatterns) {
    Tensor gs = sizes_tensor(sizes);
    const QuantizedGmmOperands ops = prepare_quantized_gmm(lhs, qw, gs, options, quant);
    EXPECT_EQ(ops.lhs.type, recipe_operand_type(c.recipe));
    EXPECT_TRUE(ops.rhs_scales_in_kernel);
    Tensor out = run_quantized_gmm(ops, gs, options, quant);
    expect_tight(out, gmm_f64(decoded(ops.lhs, true), decoded(ops.rhs, true), sizes, false),
                 name_of(c) + " fwd tight");
    const std::vector<double> exact = gmm_f64(lhs, weight, sizes, false);
    if (starts_of(sizes).back() > 0) {
      EXPECT_LE(rel_frobenius(out, exact), loose_bound(recipe_operand_type(c.recipe)))
          << name_of(c);
    }
    // The one-call API computes the same.
    Tensor again = quantized_gmm(lhs, weight, gs, options, quant);
    EXPECT_EQ(std::memcmp(again.data(), out.data(), out.nbytes()), 0) << name_of(c);
    // Rows past sum(group_sizes) are zero.
    for (int64_t i = starts_of(sizes).back() * kN; i < kM * kN; ++i) {
      ASSERT_EQ(out.as<float>()[i], 0.0f) << name_of(c);
    }
  }
}

TEST_P(QuantGradLhsTest, MatchesDequantizedReferenceAndF32) {
  const PassCase& c = GetParam();
  Tensor dout = random_normal({kM, kN}, 3);
  Tensor weight = random_normal({4, kK, kN}, 4);
  GmmOptions options;
  options.kernel = c.kernel;
  options.transpose_rhs = true;
  QuantGmmOptions quant{c.recipe, c.scaling, 0};
  const QuantizedTensor qw = quantize_weight(weight, c.recipe, c.scaling);
  for (const auto& sizes : kGroupPatterns) {
    Tensor gs = sizes_tensor(sizes);
    const QuantizedGmmOperands ops = prepare_quantized_gmm(dout, qw, gs, options, quant);
    EXPECT_EQ(ops.lhs.type, recipe_gradient_type(c.recipe));
    // Channel scales lie on the contracted N: folded into dout.
    EXPECT_EQ(ops.rhs_scales_in_kernel, c.scaling.block());
    Tensor out = run_quantized_gmm(ops, gs, options, quant);
    ASSERT_EQ(out.shape(), (Shape{kM, kK}));
    expect_tight(
        out,
        gmm_f64(decoded(ops.lhs, true), decoded(ops.rhs, ops.rhs_scales_in_kernel), sizes, true),
        name_of(c) + " dlhs tight");
    if (starts_of(sizes).back() > 0) {
      EXPECT_LE(rel_frobenius(out, gmm_f64(dout, weight, sizes, true)),
                loose_bound(recipe_gradient_type(c.recipe)))
          << name_of(c);
    }
  }
}

TEST_P(QuantGradRhsTest, MatchesDequantizedReferenceAndF32) {
  const PassCase& c = GetParam();
  Tensor lhs = random_normal({kM, kK}, 5);
  Tensor dout = random_normal({kM, kN}, 6);
  TgmmOptions options;
  options.kernel = c.kernel;
  QuantGmmOptions quant{c.recipe, {}, 0};
  for (const auto& sizes : kGroupPatterns) {
    Tensor gs = sizes_tensor(sizes);
    const QuantizedTgmmOperands ops = prepare_quantized_tgmm(lhs, dout, gs, options, quant);
    EXPECT_EQ(ops.lhs.type, recipe_operand_type(c.recipe));
    EXPECT_EQ(ops.dout.type, recipe_gradient_type(c.recipe));
    EXPECT_EQ(ops.dout.scales.shape(), (Shape{1, kN}));
    Tensor out = run_quantized_tgmm(ops, gs, options);
    ASSERT_EQ(out.shape(), (Shape{4, kK, kN}));
    expect_tight(
        out, tgmm_f64(decoded(ops.lhs, ops.lhs_scales_in_kernel), decoded(ops.dout, true), sizes),
        name_of(c) + " drhs tight");
    const std::vector<double> exact = tgmm_f64(lhs, dout, sizes);
    // Empty groups give zero slices.
    const std::vector<int64_t> starts = starts_of(sizes);
    for (size_t g = 0; g < sizes.size(); ++g) {
      if (sizes[g] != 0) continue;
      for (int64_t i = 0; i < kK * kN; ++i) ASSERT_EQ(out.as<float>()[g * kK * kN + i], 0.0f);
    }
    if (starts.back() > 0) {
      // int8 drhs quantizes dout per column over all tokens after folding
      // the lhs row scales, which spreads magnitudes: allow the e4m3 bound.
      const double bound = c.recipe == QuantRecipe::kInt8 ? 0.05 : 0.12;
      EXPECT_LE(rel_frobenius(out, exact), bound) << name_of(c);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Recipes, QuantForwardTest, ::testing::ValuesIn(pass_cases()),
                         [](const auto& info) { return name_of(info.param); });
INSTANTIATE_TEST_SUITE_P(Recipes, QuantGradLhsTest,
                         ::testing::ValuesIn(pass_cases_where(runs_in_dlhs)),
                         [](const auto& info) { return name_of(info.param); });
INSTANTIATE_TEST_SUITE_P(Recipes, QuantGradRhsTest,
                         ::testing::ValuesIn(pass_cases_where(runs_in_drhs)),
                         [](const auto& info) { return name_of(info.param); });

// Weights quantized elsewhere, with any granularity the kernels' scale
// operands express: per tensor, per expert, per expert and column, blocks.
TEST(QuantPass, PreQuantizedWeightsOfEveryGranularity) {
  Tensor lhs = random_normal({kM, kK}, 21);
  Tensor dout = random_normal({kM, kN}, 22);
  Tensor weight = random_normal({4, kK, kN}, 23);
  Tensor gs = sizes_tensor(kGroupPatterns[0]);
  for (QuantRecipe recipe : {QuantRecipe::kFp8, QuantRecipe::kInt8}) {
    for (const char* spec : {"per_tensor", "channel:0", "channel:0,2", "channel:0,2+block:1:32"}) {
      const Granularity granularity = parse_granularity(spec, "g");
      const QuantizedTensor qw = quantize(weight, recipe_operand_type(recipe), granularity);
      for (bool transpose : {false, true}) {
        GmmOptions options;
        options.kernel = KernelVersion::kV2;
        options.transpose_rhs = transpose;
        const QuantGmmOptions quant{recipe, {}, 0};
        const Tensor& input = transpose ? dout : lhs;
        const QuantizedGmmOperands ops = prepare_quantized_gmm(input, qw, gs, options, quant);
        Tensor out = run_quantized_gmm(ops, gs, options, quant);
        const std::string what =
            std::string(quant_recipe_name(recipe)) + " " + spec + (transpose ? " dlhs" : " fwd");
        expect_tight(out,
                     gmm_f64(decoded(ops.lhs, true), decoded(ops.rhs, ops.rhs_scales_in_kernel),
                             kGroupPatterns[0], transpose),
                     what);
        const QuantType type =
            transpose ? recipe_gradient_type(recipe) : recipe_operand_type(recipe);
        // int8 per tensor is looser than per channel (see docs/quantization.md).
        const double bound = type == QuantType::kInt8 ? 0.03 : loose_bound(type);
        EXPECT_LE(rel_frobenius(out, gmm_f64(input, weight, kGroupPatterns[0], transpose)), bound)
            << what;
      }
    }
  }
}

TEST(QuantPass, HybridPlanRunsEveryPass) {
  // fwd v2 (block-wise weight), dlhs v1 (channel), drhs v2.
  Tensor lhs = random_normal({kM, kK}, 7);
  Tensor weight = random_normal({4, kK, kN}, 8);
  Tensor dout = random_normal({kM, kN}, 9);
  Tensor gs = sizes_tensor(kGroupPatterns[0]);
  GmmOptions fwd;
  fwd.kernel = KernelVersion::kV2;
  Tensor y = quantized_gmm(lhs, weight, gs, fwd, {QuantRecipe::kFp8, RhsScaling{64}, 0});
  GmmOptions dlhs;
  dlhs.kernel = KernelVersion::kV1;
  dlhs.transpose_rhs = true;
  Tensor dx = quantized_gmm(dout, weight, gs, dlhs, {QuantRecipe::kFp8, {}, 0});
  TgmmOptions drhs;
  drhs.kernel = KernelVersion::kV2;
  Tensor dw = quantized_tgmm(lhs, dout, gs, drhs, {QuantRecipe::kFp8, {}, 0});
  EXPECT_LE(rel_frobenius(y, gmm_f64(lhs, weight, kGroupPatterns[0], false)), 0.07);
  EXPECT_LE(rel_frobenius(dx, gmm_f64(dout, weight, kGroupPatterns[0], true)), 0.12);
  EXPECT_LE(rel_frobenius(dw, tgmm_f64(lhs, dout, kGroupPatterns[0])), 0.12);
}

TEST(QuantPass, ExpertParallelLocalGroups) {
  Tensor lhs = random_normal({kM, kK}, 10);
  Tensor weight = random_normal({2, kK, kN}, 11);  // groups 1..2 of 4
  const std::vector<int32_t> sizes = {10, 8, 12, 7};
  Tensor gs = sizes_tensor(sizes);
  for (QuantRecipe recipe : {QuantRecipe::kFp8, QuantRecipe::kInt8}) {
    GmmOptions options;
    options.kernel = KernelVersion::kV2;
    options.group_offset = 1;
    options.local_groups = 2;
    Tensor out = quantized_gmm(lhs, weight, gs, options, {recipe, {}, 0});
    // Reference: the weight of groups 0 and 3 is zero, so their rows are.
    Tensor full(DType::kF32, {4, kK, kN});
    std::copy_n(weight.as<float>(), weight.numel(), full.as<float>() + kK * kN);
    EXPECT_LE(rel_frobenius(out, gmm_f64(lhs, full, sizes, false)),
              loose_bound(recipe_operand_type(recipe)));
    for (int64_t i = 0; i < 10 * kN; ++i) ASSERT_EQ(out.as<float>()[i], 0.0f);
  }
}

struct RefusalCase {
  const char* what;
  KernelVersion kernel;
  RhsScaling scaling;
  int64_t lhs_k_block;
  Tiles tiles;
  bool transpose_rhs;
  const char* argument;
};

TEST(QuantPass, RefusesSettingsThatCannotWork) {
  Tensor lhs = random_normal({kM, kK}, 12);
  Tensor dout = random_normal({kM, kN}, 12);
  Tensor weight = random_normal({4, kK, kN}, 13);
  Tensor gs = sizes_tensor(kGroupPatterns[0]);
  const RefusalCase cases[] = {
      {"block-wise weight scales with v1",
       KernelVersion::kV1,
       RhsScaling{32},
       0,
       {},
       false,
       "kernel"},
      {"block-wise weight scales with v1 in dlhs",
       KernelVersion::kV1,
       RhsScaling{32},
       0,
       {},
       true,
       "kernel"},
      {"lhs K-blocks with v1", KernelVersion::kV1, RhsScaling{}, 32, {}, false, "kernel"},
      {"lhs K-blocks in dlhs", KernelVersion::kV2, RhsScaling{}, 32, {}, true, "lhs_k_block"},
      {"block 32 does not divide tile k 48",
       KernelVersion::kV2,
       RhsScaling{32},
       0,
       {8, 48, 16},
       false,
       "tiles"},
      {"lhs block 64 does not divide tile k 32",
       KernelVersion::kV2,
       RhsScaling{},
       64,
       {8, 32, 16},
       false,
       "tiles"},
      {"lhs block outside 32..512", KernelVersion::kV2, RhsScaling{}, 16, {}, false, "lhs_k_block"},
      {"weight block outside 32..512",
       KernelVersion::kV2,
       RhsScaling{1024},
       0,
       {},
       false,
       "rhs_scales"},
  };
  for (const RefusalCase& c : cases) {
    GmmOptions options;
    options.kernel = c.kernel;
    options.tiles = c.tiles;
    options.transpose_rhs = c.transpose_rhs;
    try {
      quantized_gmm(c.transpose_rhs ? dout : lhs, weight, gs, options,
                    {QuantRecipe::kFp8, c.scaling, c.lhs_k_block});
      ADD_FAILURE() << "accepted: " << c.what;
    } catch (const Error& error) {
      EXPECT_EQ(error.argument(), c.argument) << c.what << ": " << error.what();
    }
  }
  // A weight of the wrong type for the recipe.
  QuantizedTensor int8_weight = quantize_weight(weight, QuantRecipe::kInt8, {});
  EXPECT_THROW(quantized_gmm(lhs, int8_weight, gs, {}, {QuantRecipe::kFp8, {}, 0}), Error);
  // Block 32 with an explicit tile k of 64 is fine.
  GmmOptions ok;
  ok.kernel = KernelVersion::kV2;
  ok.tiles = {8, 64, 16};
  EXPECT_NO_THROW(quantized_gmm(lhs, weight, gs, ok, {QuantRecipe::kFp8, RhsScaling{32}, 0}));
}

}  // namespace
}  // namespace raggemm
