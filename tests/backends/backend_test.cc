// The backend seam (src/backends/, DESIGN.md s.5): the registry's table and
// its errors, and every public op run on the CPU backend against the same
// op run on the reference backend (selected by name through the public op:
// GmmOptions::backend), for every pass, plain and quantized operands, bf16
// outputs and accumulation, over empty groups, sum(group_sizes) < M, tiles
// that divide nothing, an expert-parallel group range and every
// empty/non-empty pattern of 3 groups. A bad backend name is refused before
// anything is written.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "backends/registry.h"
#include "raggemm/error.h"
#include "raggemm/gmm.h"
#include "raggemm/quant.h"
#include "support/gmm_case.h"

namespace raggemm {
namespace {

using testing::max_scaled_error;
using testing::random_tensor;
using testing::sizes_tensor;

TEST(BackendRegistry, ListsTheCpuKernelsThenTheReference) {
  const auto& table = backends::registered_backends();
  ASSERT_EQ(table.size(), 2u);
  EXPECT_STREQ(table[0]->name(), "cpu");
  EXPECT_STREQ(table[1]->name(), "reference");
  EXPECT_EQ(backends::find_backend("reference"), table[1]);
  EXPECT_EQ(backends::find_backend("cuda"), nullptr);
  EXPECT_EQ(&backends::default_backend(), table[0]);
}

TEST(BackendRegistry, UnknownBackendIsRefusedBeforeAnyWrite) {
  const Tensor lhs = random_tensor({6, 4}, DType::kF32, 1);
  const Tensor rhs = random_tensor({2, 4, 5}, DType::kF32, 2);
  const Tensor sizes = sizes_tensor({3, 3});
  Tensor out(DType::kF32, {6, 5});
  std::fill_n(out.as<float>(), out.numel(), 7.0f);
  GmmOptions options;
  options.backend = "cuda";
  try {
    gmm_into(lhs, rhs, sizes, out, options);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("backend"), std::string::npos) << what;
    EXPECT_NE(what.find("cuda"), std::string::npos) << what;
    EXPECT_NE(what.find("cpu, reference"), std::string::npos) << what;
  }
  for (int64_t i = 0; i < out.numel(); ++i) ASSERT_EQ(out.as<float>()[i], 7.0f);
}

// A backend that declines every spec (as a device backend declines host
// memory): the registry's choice passes over it, and naming it gives its
// reason.
class DecliningBackend final : public backends::Backend {
 public:
  const char* name() const override { return "declining"; }
  std::string unsupported(const backends::GmmSpec&) const override {
    return "operands are not in device memory";
  }
  std::vector<KernelVersion> kernel_versions() const override { return {}; }
  TuneCandidate heuristic(const GmmShape&, const kernels::MachineModel&,
                          std::optional<KernelVersion>) const override {
    return {};
  }
  std::vector<TuneCandidate> candidates(const GmmShape&, const kernels::MachineModel&, int,
                                        const backends::Measurements&) const override {
    return {};
  }
  void run(const backends::GmmSpec&, const TuneCandidate&, backends::Workspace*) const override {
    ADD_FAILURE() << "a backend that declined ran";
  }
};

std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(BackendRegistry, ADecliningBackendIsPassedOverOrRefusedWithItsReason) {
  const DecliningBackend declining;
  const backends::Backend* cpu = backends::find_backend("cpu");
  ASSERT_NE(cpu, nullptr);
  const backends::GmmSpec spec;
  EXPECT_EQ(&backends::select_backend(spec, "", {&declining, cpu}), cpu);
  const std::string named =
      error_of([&] { backends::select_backend(spec, "declining", {&declining, cpu}); });
  EXPECT_NE(named.find("declining"), std::string::npos) << named;
  EXPECT_NE(named.find("operands are not in device memory"), std::string::npos) << named;
  const std::string none = error_of([&] { backends::select_backend(spec, "", {&declining}); });
  EXPECT_NE(none.find("no backend runs this problem"), std::string::npos) << none;
  EXPECT_NE(none.find("declining: operands are not in device memory"), std::string::npos) << none;
}

// The configurations each backend offers: the CPU kernels' two generations;
// the reference's one loop nest, which no kernel setting names.
TEST(BackendRegistry, KernelVersionsAreTheBackendsConfigurations) {
  EXPECT_EQ(backends::find_backend("cpu")->kernel_versions(),
            std::vector<KernelVersion>({KernelVersion::kV1, KernelVersion::kV2}));
  EXPECT_TRUE(backends::find_backend("reference")->kernel_versions().empty());
}

struct Groups {
  std::string name;
  int64_t m;
  std::vector<int64_t> sizes;
  int64_t group_offset = 0, local_groups = -1;
};

std::vector<Groups> group_cases() {
  std::vector<Groups> cases = {
      {"uneven_with_empty", 41, {13, 0, 20, 8}},
      {"sum_less_than_m", 37, {10, 0, 15}},
      {"group_range", 40, {9, 12, 0, 11, 8}, 1, 3},
  };
  // Every empty/non-empty pattern of 3 groups.
  for (int pattern = 0; pattern < 8; ++pattern) {
    std::vector<int64_t> sizes;
    for (int g = 0; g < 3; ++g) sizes.push_back((pattern >> g) & 1 ? 7 + 3 * g : 0);
    cases.push_back({"pattern" + std::to_string(pattern), 30, sizes});
  }
  return cases;
}

int64_t rhs_groups(const Groups& c) {
  return c.local_groups < 0 ? static_cast<int64_t>(c.sizes.size()) : c.local_groups;
}

// Elements where the two backends' outputs differ in their bits: f32
// summation against f64 accumulation, so some must, or one backend ran twice.
int64_t bitwise_differences = 0;

// cpu against reference on the same call.
void expect_backends_agree(const std::function<Tensor(const std::string&)>& call,
                           int64_t contraction, const std::string& what, double eps = 1.2e-7) {
  const Tensor cpu = call("cpu");
  const Tensor ref = call("reference");
  EXPECT_LE(max_scaled_error(cpu, ref, contraction, eps), 1.0) << what;
  for (int64_t i = 0; i < cpu.numel(); ++i) {
    bitwise_differences += cpu.as<float>()[i] != ref.as<float>()[i];
  }
}

TEST(BackendSeam, PlainPassesAgreeWithTheReferenceBackend) {
  const int64_t k = 19, n = 14;
  bitwise_differences = 0;
  for (const Groups& c : group_cases()) {
    const Tensor sizes = sizes_tensor(c.sizes);
    const Tensor lhs = random_tensor({c.m, k}, DType::kF32, 3);
    const Tensor rhs = random_tensor({rhs_groups(c), k, n}, DType::kF32, 4);
    const Tensor rhs_t = random_tensor({rhs_groups(c), n, k}, DType::kF32, 5);
    const Tensor dout = random_tensor({c.m, n}, DType::kF32, 6);
    for (KernelVersion kernel : {KernelVersion::kV1, KernelVersion::kV2}) {
      const std::string where = c.name + "/" + kernel_name(kernel);
      GmmOptions o;
      o.tiles = {7, 9, 5};
      o.kernel = kernel;
      o.group_offset = c.group_offset;
      o.local_groups = c.local_groups;
      expect_backends_agree([&](const std::string& b) {
        GmmOptions with = o;
        with.backend = b;
        return gmm(lhs, rhs, sizes, with);
      }, k, "fwd " + where);
      expect_backends_agree([&](const std::string& b) {
        GmmOptions with = o;
        with.backend = b;
        with.transpose_rhs = true;
        return gmm(lhs, rhs_t, sizes, with);
      }, k, "dlhs " + where);
      if (c.local_groups < 0) {
        TgmmOptions t;
        t.tiles = {7, 9, 5};
        t.kernel = kernel;
        expect_backends_agree([&](const std::string& b) {
          TgmmOptions with = t;
          with.backend = b;
          return tgmm(lhs, dout, sizes, with);
        }, c.m, "drhs " + where);
      }
    }
  }
  EXPECT_GT(bitwise_differences, 0) << "the reference backend never ran";
}

TEST(BackendSeam, OutputStageAndQuantizedPassesAgreeWithTheReferenceBackend) {
  const int64_t k = 64, n = 16;
  for (const Groups& c : group_cases()) {
    if (c.local_groups >= 0) continue;
    const Tensor sizes = sizes_tensor(c.sizes);
    const int64_t g = static_cast<int64_t>(c.sizes.size());
    const Tensor lhs = random_tensor({c.m, k}, DType::kF32, 7);
    const Tensor weight = random_tensor({g, k, n}, DType::kF32, 8);
    const Tensor dout = random_tensor({c.m, n}, DType::kF32, 9);
    const Tensor col_scale = random_tensor({g, n}, DType::kF32, 10);
    GmmOptions staged;
    staged.kernel = KernelVersion::kV2;
    staged.tiles = {5, 32, 6};
    staged.fuse_swiglu = true;
    staged.col_scale = col_scale.view();
    expect_backends_agree([&](const std::string& b) {
      GmmOptions with = staged;
      with.backend = b;
      return gmm(lhs, weight, sizes, with);
    }, k, "swiglu " + c.name, 1e-6);
    for (QuantRecipe recipe : {QuantRecipe::kInt8, QuantRecipe::kFp8}) {
      QuantGmmOptions quant;
      quant.recipe = recipe;
      const std::string where = c.name + "/" + quant_recipe_name(recipe);
      GmmOptions fwd;
      fwd.kernel = KernelVersion::kV2;
      const QuantizedGmmOperands ops = prepare_quantized_gmm(lhs, quantize_weight(weight.view(), recipe, {}), sizes, fwd, quant);
      expect_backends_agree([&](const std::string& b) {
        GmmOptions with = fwd;
        with.backend = b;
        return run_quantized_gmm(ops, sizes, with, quant);
      }, k, "quantized fwd " + where);
      TgmmOptions t;
      t.kernel = KernelVersion::kV2;
      const QuantizedTgmmOperands tops = prepare_quantized_tgmm(lhs, dout, sizes, t, quant);
      expect_backends_agree([&](const std::string& b) {
        TgmmOptions with = t;
        with.backend = b;
        return run_quantized_tgmm(tops, sizes, with);
      }, c.m, "quantized drhs " + where);
    }
  }
}

// The reference backend writes through the same output view as the kernels:
// a bf16 output is its f32 value rounded once, and accumulate adds.
TEST(BackendSeam, ReferenceBackendWritesBf16AndAccumulates) {
  const Groups c{"uneven_with_empty", 41, {13, 0, 20, 8}};
  const Tensor sizes = sizes_tensor(c.sizes);
  const Tensor lhs = random_tensor({c.m, 12}, DType::kF32, 11);
  const Tensor dout = random_tensor({c.m, 10}, DType::kF32, 12);
  TgmmOptions o;
  o.backend = "reference";
  const Tensor f32 = tgmm(lhs, dout, sizes, o);
  o.out_dtype = DType::kBF16;
  const Tensor bf16 = tgmm(lhs, dout, sizes, o);
  for (int64_t i = 0; i < f32.numel(); ++i) {
    ASSERT_EQ(bf16.as<uint16_t>()[i], f32_to_bf16(f32.as<float>()[i])) << i;
  }
  Tensor acc(DType::kF32, f32.shape());
  std::fill_n(acc.as<float>(), acc.numel(), 1.5f);
  TgmmOptions add;
  add.backend = "reference";
  add.accumulate = true;
  tgmm_into(lhs, dout, sizes, acc, add);
  for (int64_t i = 0; i < f32.numel(); ++i) {
    ASSERT_EQ(acc.as<float>()[i], 1.5f + f32.as<float>()[i]) << i;  // group 1 is empty: 1.5 + 0
  }
}

}  // namespace
}  // namespace raggemm

namespace raggemm {
namespace {

// Issue 20 item 2: one gmm() and one tgmm() take plain or quantized
// operands. Quantized operands compute through their own scales (the
// result is the f32 op on their dequantized values, up to summation
// order); options.quantize runs a recipe's pass and is the same call as the
// quantized_* functions, bit for bit.
TEST(QuantizedOperands, GmmAndTgmmTakeQuantizedTensors) {
  const std::vector<int64_t> sizes_list = {13, 0, 20, 8};
  const Tensor sizes = sizes_tensor(sizes_list);
  const Tensor lhs = random_tensor({45, 64}, DType::kF32, 21);
  const Tensor weight = random_tensor({4, 64, 24}, DType::kF32, 22);
  const Tensor dout = random_tensor({45, 24}, DType::kF32, 23);
  for (QuantType type : {QuantType::kInt8, QuantType::kFp8E4M3, QuantType::kFp8E5M2}) {
    SCOPED_TRACE(quant_type_name(type));
    const QuantizedTensor q_lhs = quantize(lhs, type, Granularity::channel({0}));
    const QuantizedTensor q_weight = quantize(weight, type, Granularity::channel({0, 2}));
    const QuantizedTensor q_dout = quantize(dout, type, Granularity::channel({1}));
    GmmOptions o;
    o.kernel = KernelVersion::kV2;
    const Tensor got = gmm(q_lhs, q_weight, sizes, o);
    const Tensor want = gmm(dequantize(q_lhs), dequantize(q_weight), sizes, o);
    EXPECT_LE(max_scaled_error(got, want, 64), 1.0);
    // Mixed: a plain lhs against a quantized weight.
    EXPECT_LE(max_scaled_error(gmm(lhs, q_weight, sizes, o), gmm(lhs, dequantize(q_weight), sizes, o), 64), 1.0);
    TgmmOptions t;
    t.kernel = KernelVersion::kV2;
    const Tensor got_t = tgmm(q_lhs, q_dout, sizes, t);
    const Tensor want_t = tgmm(dequantize(q_lhs), dequantize(q_dout), sizes, t);
    EXPECT_LE(max_scaled_error(got_t, want_t, 45), 1.0);
  }
}

TEST(QuantizedOperands, OptionsQuantizeIsTheRecipePassBitForBit) {
  const Tensor sizes = sizes_tensor({13, 0, 20, 8});
  const Tensor lhs = random_tensor({45, 64}, DType::kF32, 24);
  const Tensor weight = random_tensor({4, 64, 24}, DType::kF32, 25);
  const Tensor dout = random_tensor({45, 24}, DType::kF32, 26);
  for (QuantRecipe recipe : {QuantRecipe::kInt8, QuantRecipe::kFp8}) {
    QuantGmmOptions quant;
    quant.recipe = recipe;
    GmmOptions o;
    o.kernel = KernelVersion::kV2;
    GmmOptions with = o;
    with.quantize = quant;
    const Tensor a = gmm(lhs, weight, sizes, with);
    const Tensor b = quantized_gmm(lhs, quantize_weight(weight, recipe, {}), sizes, o, quant);
    ASSERT_EQ(std::memcmp(a.data(), b.data(), a.nbytes()), 0) << quant_recipe_name(recipe);
    Tensor into(DType::kF32, a.shape());
    gmm_into(lhs, weight, sizes, into, with);
    ASSERT_EQ(std::memcmp(into.data(), a.data(), a.nbytes()), 0);
    TgmmOptions t;
    t.kernel = KernelVersion::kV2;
    t.quantize = quant;
    const Tensor c = tgmm(lhs, dout, sizes, t);
    TgmmOptions plain = t;
    plain.quantize.reset();
    const Tensor d = run_quantized_tgmm(prepare_quantized_tgmm(lhs, dout, sizes, plain, quant), sizes, plain);
    ASSERT_EQ(std::memcmp(c.data(), d.data(), c.nbytes()), 0) << quant_recipe_name(recipe);
  }
}

TEST(QuantizedOperands, OptionsQuantizeRefusesAQuantizedLhs) {
  const Tensor sizes = sizes_tensor({3, 3});
  const Tensor lhs = random_tensor({6, 32}, DType::kF32, 27);
  const Tensor weight = random_tensor({2, 32, 8}, DType::kF32, 28);
  const QuantizedTensor q_lhs = quantize(lhs, QuantType::kFp8E4M3, Granularity::channel({0}));
  GmmOptions o;
  o.quantize = QuantGmmOptions{};
  try {
    gmm(q_lhs, weight, sizes, o);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lhs"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace raggemm
