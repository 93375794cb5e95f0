// The case table (bench/cases/case_table.h) as parameterized tests: one
// test per case, named by its id, run against the f64 reference with the
// case's tolerance (bench/cases/case_check.h); refused cases must be refused
// with the op's error and nothing written; cases the API cannot express are
// reported as skipped with the reason. Plus checks on the table itself: ids
// unique, every axis value present, every forced ISA really engaged.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "backends/registry.h"
#include "cases/case_backend.h"
#include "cases/case_check.h"
#include "cases/case_table.h"
#include "kernels/bf16_microkernel.h"
#include "kernels/int8_microkernel.h"
#include "kernels/microkernel.h"
#include "kernels/microkernel_registry.h"
#include "raggemm/error.h"

namespace raggemm::cases {

// gtest prints a parameter on failure: the id, not the bytes.
void PrintTo(const Case& c, std::ostream* os) { *os << c.id(); }

namespace {

class CaseTable : public ::testing::TestWithParam<Case> {};

TEST_P(CaseTable, MatchesReference) {
  const Case& c = GetParam();
  SCOPED_TRACE(c.id());
  if (c.expect == Expect::kNotExpressible) {
    GTEST_SKIP() << c.id() << " not expressible: " << c.refusal;
  }
  IsaScope scope(c.isa);
  ASSERT_TRUE(scope.ok()) << c.isa.name;
  const CaseInputs in = make_inputs(c);
  BackendRun run(c, in, 2);
  if (c.expect == Expect::kRefused) {
    try {
      run.run();
      ADD_FAILURE() << c.id() << ": expected the op to refuse (" << c.refusal << ")";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.refusal), std::string::npos)
          << "error \"" << e.what() << "\" does not say \"" << c.refusal << "\"";
    }
    for (int64_t i = 0; i < run.out().numel(); ++i) {
      ASSERT_TRUE(std::isnan(run.out().as<float>()[i])) << "a refused op wrote element " << i;
    }
    return;
  }
  run.run();
  RecordProperty("path", engaged_path(c));
  const CaseCheck check = check_case(c, in, run);
  EXPECT_TRUE(check.ok) << c.id() << " [" << engaged_path(c) << "]: " << check.detail;
}

INSTANTIATE_TEST_SUITE_P(Table, CaseTable, ::testing::ValuesIn(case_table()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.test_name();
                         });

TEST(CaseTableShape, IdsAreUnique) {
  std::set<std::string> names;
  for (const Case& c : case_table()) {
    EXPECT_TRUE(names.insert(c.test_name()).second) << "duplicate " << c.id();
  }
}

// Every value of every axis appears among the cases that run.
TEST(CaseTableShape, EveryAxisValueRuns) {
  std::set<std::string> passes, storages, backends, isas, epilogues, patterns;
  int refused = 0, masks = 0;
  for (const Case& c : case_table()) {
    if (c.expect == Expect::kRefused) ++refused;
    if (c.expect != Expect::kRuns) continue;
    passes.insert(pass_name(c.pass));
    storages.insert(c.storage.name);
    backends.insert(c.backend);
    isas.insert(c.isa.name);
    epilogues.insert(epilogue_name(c.epilogue));
    patterns.insert(c.groups.name);
    if (c.groups.name.rfind("mask:", 0) == 0 && c.pass == CasePass::kFwd &&
        c.storage.name == "f32" && c.backend == "v2") {
      ++masks;
    }
  }
  EXPECT_EQ(passes.size(), 3u);
  for (const char* s : {"f32", "bf16", "fp8", "fp8-tensor", "fp8-block32", "fp8-lhsblock32", "int8",
                        "int8-tensor", "int8-block32", "int8-lhsblock32"}) {
    EXPECT_TRUE(storages.count(s)) << s;
  }
  std::set<std::string> axis;
  for (const CaseBackend& backend : case_backends()) axis.insert(backend.label);
  EXPECT_EQ(backends, axis);
  // The CPU kernels' generations, under the ids they had before the registry.
  EXPECT_EQ(axis, std::set<std::string>({"v1", "v2"}));
  for (const Isa& isa : runnable_isas()) EXPECT_TRUE(isas.count(isa.name)) << isa.name;
  EXPECT_GE(runnable_isas().size(), 2u) << "the portable fallback and one SIMD target at least";
  for (const char* e : {"none", "swiglu", "colscale", "bias", "rowscale", "all"}) {
    EXPECT_TRUE(epilogues.count(e)) << e;
  }
  for (const char* p : {"uniform", "empty:0.4", "partial", "zipf:1.5", "ep:1+2"}) {
    EXPECT_TRUE(patterns.count(p)) << p;
  }
  EXPECT_EQ(masks, 2 + 4 + 8 + 16) << "every empty/non-empty pattern of G = 1..4";
  EXPECT_GT(refused, 0);
}

// The backend axis is the registry's: every registered backend but the
// oracle, in each of its kernel generations, each case run on the backend
// and generation its label names.
TEST(CaseTableShape, BackendAxisIsTheRegistry) {
  std::set<std::string> on_axis;
  for (const CaseBackend& backend : case_backends()) {
    on_axis.insert(backend.name);
    const backends::Backend* registered = backends::find_backend(backend.name);
    ASSERT_NE(registered, nullptr) << backend.name;
    const std::vector<KernelVersion> kernels = registered->kernel_versions();
    if (kernels.empty()) {
      EXPECT_FALSE(backend.kernel.has_value()) << backend.label;
    } else {
      ASSERT_TRUE(backend.kernel.has_value()) << backend.label;
      EXPECT_NE(std::find(kernels.begin(), kernels.end(), *backend.kernel), kernels.end());
    }
  }
  for (const backends::Backend* backend : backends::registered_backends()) {
    EXPECT_EQ(on_axis.count(backend->name()), std::string(backend->name()) != kOracleBackend)
        << backend->name();
  }
  for (const Case& c : case_table()) {
    bool found = false;
    for (const CaseBackend& backend : case_backends()) {
      if (backend.label == c.backend) {
        found = true;
        EXPECT_EQ(c.runs_on.name, backend.name) << c.id();
        EXPECT_EQ(c.runs_on.kernel, backend.kernel) << c.id();
      }
    }
    EXPECT_TRUE(found) << c.id();
  }
}

// The patterns say what they promise: empty groups, sum < M, the EP slice.
TEST(CaseTableShape, PatternsHaveTheirProperties) {
  for (const Case& c : case_table()) {
    int64_t sum = 0, empty = 0;
    for (int64_t s : c.groups.sizes) {
      sum += s;
      empty += s == 0;
    }
    ASSERT_LE(sum, c.m) << c.id();
    if (c.groups.name == "empty:0.4") {
      EXPECT_EQ(empty, 2) << c.id();
    }
    if (c.groups.name == "partial") {
      EXPECT_LT(sum, c.m) << c.id();
    }
    if (c.groups.name == "ep:1+2") {
      EXPECT_EQ(c.groups.group_offset, 1);
      EXPECT_EQ(c.groups.local_groups, 2);
    }
    if (c.groups.name != "partial" && c.groups.name.rfind("mask:", 0) != 0) {
      EXPECT_EQ(sum, c.m) << c.id();
    }
    // Tiles at the test size divide none of the dims they tile.
    if (c.tiles.m > 1 && c.groups.name.rfind("mask:", 0) != 0) {
      EXPECT_NE(c.m % c.tiles.m, 0) << c.id();
      if (c.pass != CasePass::kDlhs) {
        EXPECT_NE(c.n % c.tiles.n, 0) << c.id();
      }
    }
  }
}

// The ISA axis is not a label only: under each scope the forced kernels run.
TEST(CaseTableShape, EveryIsaScopeEngagesItsKernel) {
  for (const Isa& isa : runnable_isas()) {
    IsaScope scope(isa);
    EXPECT_STREQ(kernels::select_microkernel().target, kernels::target_name(isa.hwy_target));
  }
  Storage int8;
  int8.recipe = QuantRecipe::kInt8;
  for (const Isa& isa : forced_kernel_isas(int8)) {
    IsaScope scope(isa);
    EXPECT_EQ(isa.int8_kernel, kernels::select_int8_microkernel().target);
  }
  Storage bf16;
  bf16.dtype = DType::kBF16;
  for (const Isa& isa : forced_kernel_isas(bf16)) {
    IsaScope scope(isa);
    const kernels::Bf16Microkernel* uk = kernels::select_bf16_microkernel();
    if (isa.bf16_kernel == "WIDEN") {
      EXPECT_EQ(uk, nullptr);
    } else {
      ASSERT_NE(uk, nullptr) << isa.name;
      EXPECT_EQ(isa.bf16_kernel, uk->target);
    }
  }
  // Restored afterwards.
  EXPECT_STREQ(kernels::select_microkernel().target, kernels::target_name(runnable_isas()[0].hwy_target));
}

}  // namespace
}  // namespace raggemm::cases
