// The bf16 x bf16 dot-product path (kernels/bf16_microkernel.h, bf16_gmm.h)
// through the public ops, v2, all three passes:
//  - each bf16 microkernel this CPU runs against an f64 reference, within
//    the rounding bound of the kernel's defined numerics;
//  - the AVX512_BF16 kernel against its scalar twin, bit for bit (which
//    also pins the hardware to the numerics docs/kernels.md defines); the
//    AMX_BF16 kernel, whose hardware rounding has no scalar twin, within the
//    same bound and independent of the thread count;
//  - the forced widening path ("WIDEN") against the f32 kernels run on the
//    widened values, bit for bit (it is today's path);
// over empty groups, sum(group_sizes) < M, tiles that divide nothing, odd
// contractions and every empty/non-empty pattern of up to 6 groups.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/bf16_dot_choice.h"
#include "kernels/microkernel_registry.h"
#include "raggemm/dtype.h"
#include "support/gmm_case.h"

namespace raggemm {
namespace {

using testing::poisoned;
using testing::sizes_tensor;

enum class Pass { kFwd, kDlhs, kDrhs };
const char* pass_name(Pass pass) {
  return pass == Pass::kFwd ? "fwd" : pass == Pass::kDlhs ? "dlhs" : "drhs";
}

struct Case {
  std::string name;
  int64_t m, k, n;
  std::vector<int64_t> sizes;
  Tiles tiles;
};

std::vector<Case> cases() {
  return {
      {"dividing", 64, 32, 64, {16, 16, 16, 16}, {24, 16, 32}},
      {"non_dividing", 67, 37, 45, {20, 0, 31, 9}, {16, 8, 16}},
      {"smaller_than_register_tile", 29, 13, 19, {7, 0, 11, 5}, {1, 1, 1}},
      {"odd_tiles_odd_depth", 40, 21, 35, {13, 13, 0, 13}, {5, 3, 7}},
      {"larger_than_dims", 23, 9, 11, {10, 0, 13}, {512, 512, 512}},
      {"sum_less_than_m", 50, 17, 23, {10, 0, 15}, {8, 8, 8}},
      {"m_zero", 0, 8, 8, {0, 0}, {4, 4, 4}},
      {"k_one", 30, 1, 33, {12, 18}, {8, 4, 16}},
      {"all_empty", 12, 6, 10, {0, 0, 0}, {4, 4, 4}},
      {"one_row_groups", 9, 20, 40, {1, 1, 1, 1, 1, 1, 1, 1}, {4, 8, 16}},
      {"skewed", 257, 65, 70, {200, 1, 0, 50, 6}, {64, 32, 64}},
      {"default_tiles", 300, 300, 280, {150, 0, 100, 30}, {0, 0, 0}},
      {"odd_groups_straddle_pairs", 96, 41, 36, {5, 17, 33, 41}, {32, 15, 16}},
  };
}

// bf16 values of every magnitude class the numerics treat apart: N(0,1),
// a few huge and tiny normals, and subnormals (read as zero by vdpbf16ps).
Tensor bf16_tensor(Shape shape, uint32_t seed, bool extremes) {
  Tensor t(DType::kBF16, shape);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, 19);
  for (int64_t i = 0; i < t.numel(); ++i) {
    float v = normal(rng);
    if (extremes) {
      const int kind = pick(rng);
      if (kind == 0) v *= 1e-38f;  // subnormal in f32 and bf16
      if (kind == 1) v *= 1e-20f;  // products near or below f32's normal range
      if (kind == 2) v *= 1e15f;  // products up to about 1e31: no overflow
    }
    t.as<uint16_t>()[i] = f32_to_bf16(v);
  }
  return t;
}

Tensor widened(const Tensor& t) {
  Tensor f(DType::kF32, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) f.as<float>()[i] = bf16_to_f32(t.as<uint16_t>()[i]);
  return f;
}

struct Operands {
  Tensor a, b;  // fwd: lhs [M,K], rhs [G,K,N]; dlhs: dout [M,N], rhs [G,K,N]; drhs: lhs, dout
};

Operands operands(const Case& c, Pass pass, bool extremes) {
  const int64_t g = static_cast<int64_t>(c.sizes.size());
  if (pass == Pass::kFwd) {
    return {bf16_tensor({c.m, c.k}, 1, extremes), bf16_tensor({g, c.k, c.n}, 2, extremes)};
  }
  if (pass == Pass::kDlhs) {
    return {bf16_tensor({c.m, c.n}, 3, extremes), bf16_tensor({g, c.k, c.n}, 4, extremes)};
  }
  return {bf16_tensor({c.m, c.k}, 5, extremes), bf16_tensor({c.m, c.n}, 6, extremes)};
}

// Runs one v2 pass with the bf16 microkernel `forced` ("" for automatic).
Tensor run(const Case& c, Pass pass, const Operands& x, const std::string& forced,
           int threads = 2) {
  EXPECT_TRUE(kernels::force_bf16_microkernel(forced)) << forced;
  const Tensor gs = sizes_tensor(c.sizes);
  const int64_t g = static_cast<int64_t>(c.sizes.size());
  Tensor out;
  if (pass == Pass::kDrhs) {
    TgmmOptions o;
    o.kernel = KernelVersion::kV2;
    o.tiles = c.tiles;
    o.threads = threads;
    out = poisoned({g, c.k, c.n});
    tgmm_into(x.a, x.b, gs, out, o);
  } else {
    GmmOptions o;
    o.kernel = KernelVersion::kV2;
    o.tiles = c.tiles;
    o.threads = threads;
    o.transpose_rhs = pass == Pass::kDlhs;
    out = poisoned({c.m, pass == Pass::kDlhs ? c.k : c.n});
    gmm_into(x.a, x.b, gs, out, o);
  }
  kernels::force_bf16_microkernel("");
  return out;
}

// The f64 reference of the defined numerics (inputs whose value is
// subnormal read as zero), with sum |a_k * b_k| per element for the bound.
struct Reference {
  std::vector<double> value, magnitude;
  int64_t contraction = 0;
};

Reference reference(const Case& c, Pass pass, const Operands& x) {
  const std::vector<int64_t> starts = testing::starts_of(c.sizes);
  const int64_t groups = static_cast<int64_t>(c.sizes.size());
  // Inputs as the defined numerics read them: subnormals are zero.
  auto value = [](uint16_t bits) {
    const double v = bf16_to_f32(bits);
    return std::fabs(v) < std::numeric_limits<float>::min() ? 0.0 : v;
  };
  auto a = [&](int64_t i) { return value(x.a.as<uint16_t>()[i]); };
  auto b = [&](int64_t i) { return value(x.b.as<uint16_t>()[i]); };
  Reference r;
  if (pass == Pass::kDrhs) {  // out[g, kk, j] = sum_t lhs[t, kk] dout[t, j]
    r.value.assign(groups * c.k * c.n, 0.0);
    r.magnitude = r.value;
    r.contraction = c.m;
    for (int64_t g = 0; g < groups; ++g) {
      for (int64_t t = starts[g]; t < starts[g + 1]; ++t) {
        for (int64_t kk = 0; kk < c.k; ++kk) {
          for (int64_t j = 0; j < c.n; ++j) {
            const double prod = a(t * c.k + kk) * b(t * c.n + j);
            r.value[(g * c.k + kk) * c.n + j] += prod;
            r.magnitude[(g * c.k + kk) * c.n + j] += std::fabs(prod);
          }
        }
      }
    }
    return r;
  }
  const bool dlhs = pass == Pass::kDlhs;
  const int64_t depth = dlhs ? c.n : c.k;
  const int64_t cols = dlhs ? c.k : c.n;
  r.value.assign(c.m * cols, 0.0);
  r.magnitude = r.value;
  r.contraction = depth;
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t i = starts[g]; i < starts[g + 1]; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        for (int64_t p = 0; p < depth; ++p) {
          // fwd: rhs[g, p, j]; dlhs: rhs[g, j, p] (rhs [G,K,N] contracted over N).
          const double w = b(g * c.k * c.n + (dlhs ? j * c.n + p : p * c.n + j));
          const double prod = a(i * depth + p) * w;
          r.value[i * cols + j] += prod;
          r.magnitude[i * cols + j] += std::fabs(prod);
        }
      }
    }
  }
  return r;
}

// The stated bound (docs/kernels.md): every output element is a chain of at
// most 2L roundings (L steps of the contraction, at most one add per
// slice), each of relative size u = 2^-24, over a sum of magnitudes S, plus
// what flushing subnormal partial sums to zero moves, under 2^-126 per
// step: |out - ref| <= gamma_2L * S + 2L * 2^-126, ref with subnormal
// inputs read as zero.
void expect_within_bound(const Tensor& out, const Reference& r, const std::string& what) {
  const double u = std::ldexp(1.0, -24);
  const double steps = 2.0 * static_cast<double>(std::max<int64_t>(r.contraction, 1));
  const double gamma = steps * u / (1.0 - steps * u);
  const double flush = steps * std::ldexp(1.0, -126);
  ASSERT_EQ(static_cast<size_t>(out.numel()), r.value.size()) << what;
  for (size_t i = 0; i < r.value.size(); ++i) {
    const double got = out.as<float>()[i];
    ASSERT_FALSE(std::isnan(got)) << what << " element " << i << " never written";
    ASSERT_LE(std::fabs(got - r.value[i]), gamma * r.magnitude[i] + flush)
        << what << " element " << i << " ref " << r.value[i];
  }
}

bool bitwise_equal(const Tensor& x, const Tensor& y) {
  return x.nbytes() == y.nbytes() && std::memcmp(x.data(), y.data(), x.nbytes()) == 0;
}

bool has_avx512_bf16() {
  for (const auto& kernel : kernels::bf16_microkernels()) {
    if (std::string(kernel.target) == "AVX512_BF16") return true;
  }
  return false;
}

std::vector<std::string> dot_kernels() {
  std::vector<std::string> names;
  for (const auto& kernel : kernels::bf16_microkernels()) names.push_back(kernel.target);
  return names;
}

TEST(Bf16Dot, EveryKernelWithinBoundOfF64Reference) {
  for (const Case& c : cases()) {
    for (Pass pass : {Pass::kFwd, Pass::kDlhs, Pass::kDrhs}) {
      for (bool extremes : {false, true}) {
        const Operands x = operands(c, pass, extremes);
        const Reference r = reference(c, pass, x);
        for (const std::string& kernel : dot_kernels()) {
          expect_within_bound(run(c, pass, x, kernel), r,
                              c.name + " " + pass_name(pass) + " " + kernel +
                                  (extremes ? " extremes" : ""));
          if (::testing::Test::HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST(Bf16Dot, Avx512MatchesScalarTwinBitwise) {
  if (!has_avx512_bf16()) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  for (const Case& c : cases()) {
    for (Pass pass : {Pass::kFwd, Pass::kDlhs, Pass::kDrhs}) {
      for (bool extremes : {false, true}) {
        const Operands x = operands(c, pass, extremes);
        EXPECT_TRUE(bitwise_equal(run(c, pass, x, "AVX512_BF16"), run(c, pass, x, "SCALAR")))
            << c.name << " " << pass_name(pass) << (extremes ? " extremes" : "");
      }
    }
  }
}

// The automatic choice runs the first SIMD dot kernel (AMX_BF16, then
// AVX512_BF16) that measured clearly faster than the f32 microkernel here;
// else bf16 widens.
TEST(Bf16Dot, AutomaticChoiceFollowsTheMeasuredRates) {
  kernels::force_bf16_microkernel("");
  const kernels::Bf16Microkernel* chosen = kernels::select_bf16_microkernel();
  const kernels::Bf16Microkernel* candidate = kernels::bf16_dot_candidate();
  std::vector<const kernels::Bf16Microkernel*> simd;
  for (const auto& kernel : kernels::bf16_microkernels()) {
    if (std::string(kernel.target) != "SCALAR") simd.push_back(&kernel);
  }
  if (simd.empty()) {
    EXPECT_EQ(candidate, nullptr);
    EXPECT_EQ(chosen, nullptr);
    return;
  }
  ASSERT_NE(candidate, nullptr);
  EXPECT_EQ(candidate, simd.front());
  const kernels::Bf16Microkernel* want = nullptr;
  for (const kernels::Bf16Microkernel* kernel : simd) {
    const kernels::Bf16DotRates& rates = kernels::bf16_dot_rates(*kernel);
    EXPECT_STREQ(rates.dot_target, kernel->target);
    EXPECT_GT(rates.dot_gflops, 0);
    EXPECT_GT(rates.f32_gflops, 0);
    EXPECT_EQ(rates.dot_chosen, kernels::bf16_dot_pays_off(rates.dot_gflops, rates.f32_gflops));
    if (rates.dot_chosen && want == nullptr) want = kernel;
    std::printf("%s %.0f GFLOP/s, f32 %.0f\n", kernel->target, rates.dot_gflops, rates.f32_gflops);
  }
  EXPECT_EQ(chosen, want);
  EXPECT_EQ(kernels::selected_microkernel(kernels::ComputeType::kBf16Dot),
            want ? want->target : "WIDEN");
  // The answer is measured once: asking again does not flip it.
  EXPECT_EQ(kernels::select_bf16_microkernel(), chosen);
  // Forcing overrides the measurement either way.
  for (const kernels::Bf16Microkernel* kernel : simd) {
    ASSERT_TRUE(kernels::force_bf16_microkernel(kernel->target));
    EXPECT_EQ(kernels::select_bf16_microkernel(), kernel);
  }
  ASSERT_TRUE(kernels::force_bf16_microkernel("WIDEN"));
  EXPECT_EQ(kernels::select_bf16_microkernel(), nullptr);
  kernels::force_bf16_microkernel("");
  EXPECT_FALSE(kernels::force_bf16_microkernel("NO_SUCH_KERNEL"));
}

// The rule: the dot kernel needs a clear margin; a tie widens.
TEST(Bf16Dot, DotKernelNeedsAClearMarginOverF32) {
  EXPECT_TRUE(kernels::bf16_dot_pays_off(200, 100));  // a Zen 5-like 2x
  EXPECT_TRUE(kernels::bf16_dot_pays_off(115, 100));
  EXPECT_FALSE(kernels::bf16_dot_pays_off(114, 100));
  EXPECT_FALSE(kernels::bf16_dot_pays_off(100, 100));
  EXPECT_FALSE(kernels::bf16_dot_pays_off(58, 100));  // the Intel Xeon measured
}

// Forced off, bf16 x bf16 is today's widening path: the f32 kernels on the
// widened values, bit for bit.
TEST(Bf16Dot, ForcedWideningEqualsF32OnWidenedValuesBitwise) {
  for (const Case& c : cases()) {
    for (Pass pass : {Pass::kFwd, Pass::kDlhs, Pass::kDrhs}) {
      const Operands x = operands(c, pass, false);
      const Operands wide{widened(x.a), widened(x.b)};
      EXPECT_TRUE(bitwise_equal(run(c, pass, x, "WIDEN"), run(c, pass, wide, "")))
          << c.name << " " << pass_name(pass);
    }
  }
}

// Every empty/non-empty pattern of G = 1..6 groups, padding rows past the
// groups, tiles that divide nothing: every kernel within the bound, and
// AVX512_BF16 == its scalar twin.
TEST(Bf16Dot, AllEmptyNonEmptyPatterns) {
  for (int groups = 1; groups <= 6; ++groups) {
    for (int mask = 0; mask < (1 << groups); ++mask) {
      std::vector<int64_t> sizes(groups, 0);
      int64_t total = 0;
      for (int g = 0; g < groups; ++g) {
        if (mask & (1 << g)) sizes[g] = 1 + (g * 7 + mask) % 5;
        total += sizes[g];
      }
      const Case c{"G" + std::to_string(groups) + "_mask" + std::to_string(mask), total + 3, 7, 9,
                   sizes, {4, 3, 5}};
      for (Pass pass : {Pass::kFwd, Pass::kDlhs, Pass::kDrhs}) {
        const Operands x = operands(c, pass, false);
        const Reference r = reference(c, pass, x);
        for (const std::string& kernel : dot_kernels()) {
          expect_within_bound(run(c, pass, x, kernel, 1), r,
                              c.name + " " + pass_name(pass) + " " + kernel);
        }
        if (has_avx512_bf16()) {
          EXPECT_TRUE(bitwise_equal(run(c, pass, x, "AVX512_BF16", 1), run(c, pass, x, "SCALAR", 1)))
              << c.name << " " << pass_name(pass);
        }
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
}

// Results do not depend on the thread count, nor, for one k tile, on the m
// and n tiles, bit for bit, on every kernel and the automatic choice.
TEST(Bf16Dot, OneAndThreeThreadsBitwiseEqual) {
  const Case c{"threads", 360, 150, 130, {180, 0, 3, 97, 1, 60}, {48, 64, 64}};
  Case retiled = c;
  retiled.tiles = {17, 64, 40};
  std::vector<std::string> kernels = dot_kernels();
  kernels.push_back("");
  for (const std::string& kernel : kernels) {
    for (Pass pass : {Pass::kFwd, Pass::kDlhs, Pass::kDrhs}) {
      const Operands x = operands(c, pass, false);
      const Tensor one = run(c, pass, x, kernel, 1);
      EXPECT_TRUE(bitwise_equal(one, run(c, pass, x, kernel, 3))) << pass_name(pass) << " " << kernel;
      EXPECT_TRUE(bitwise_equal(one, run(retiled, pass, x, kernel, 2)))
          << pass_name(pass) << " " << kernel << " retiled";
    }
  }
}

}  // namespace
}  // namespace raggemm
