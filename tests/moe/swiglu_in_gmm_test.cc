// The MoE layer's SwiGLU in the GMMs' store stage (MoeConfig::swiglu_in_gmm,
// raggemm/swiglu_stage.h) against the separate passes it replaces: the
// layer's output, its input gradient and every parameter gradient are the
// same bits, on every kernel selection (v1, v2, the plan's), bf16 and the
// quantized recipes, the dense path, groups left empty and expert-sharded
// groups; the call log shows where SwiGLU ran (the up weight's fwd and the
// down weight's dlhs carry the stage, and no other call does), and the
// reference backend and the fused gate|up weight keep their own passes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "moe/moe_test_util.h"
#include "raggemm/moe.h"
#include "raggemm/moe_plan.h"

namespace raggemm::moe {
namespace {

using testing::cast_values;
using testing::random_values;

struct Leaves {
  std::vector<float> out, dx;
  std::vector<std::vector<float>> grads;
  std::vector<GmmCall> calls;
};

MoeConfig base_config() {
  MoeConfig c;
  c.embed_dim = 40;
  c.mlp_dim = 24;
  c.router.num_experts = 6;  // 33 tokens top-2 over 6 experts
  c.router.top_k = 2;
  c.shared_experts = 1;
  return c;
}

Leaves run(const MoeConfig& config, bool staged, int64_t tokens = 33) {
  MoeConfig c = config;
  c.swiglu_in_gmm = staged;
  MoeLayer<float> layer("moe", c);
  layer.init(5);
  const std::vector<float> x = cast_values<float>(random_values(tokens * c.embed_dim, 31));
  const std::vector<float> probe = cast_values<float>(random_values(tokens * c.embed_dim, 32));
  Leaves leaves;
  leaves.out.resize(x.size());
  leaves.dx.assign(x.size(), 0.0f);
  layer.forward(x.data(), tokens, leaves.out.data());
  layer.backward(probe.data(), leaves.dx.data());
  for (Param<float>* p : layer.params()) leaves.grads.push_back(p->grad);
  leaves.calls = layer.calls();
  return leaves;
}

// Which calls carried a stage: name -> stage.
std::vector<std::string> staged_calls(const Leaves& leaves) {
  std::vector<std::string> names;
  for (const GmmCall& call : leaves.calls) {
    if (!call.stage.empty()) names.push_back(call.name + ":" + call.stage);
  }
  return names;
}

void expect_same_leaves(const MoeConfig& config, const std::string& what, bool stage_runs,
                        int64_t tokens = 33) {
  SCOPED_TRACE(what);
  const Leaves staged = run(config, true, tokens), separate = run(config, false, tokens);
  EXPECT_EQ(staged.out, separate.out);
  EXPECT_EQ(staged.dx, separate.dx);
  ASSERT_EQ(staged.grads.size(), separate.grads.size());
  for (size_t i = 0; i < staged.grads.size(); ++i) EXPECT_EQ(staged.grads[i], separate.grads[i]) << i;
  EXPECT_TRUE(staged_calls(separate).empty());
  if (stage_runs) {
    EXPECT_EQ(staged_calls(staged),
              (std::vector<std::string>{"moe/wi_1/fwd:swiglu_forward", "moe/wo/dlhs:swiglu_backward"}));
  } else {
    EXPECT_TRUE(staged_calls(staged).empty());
  }
}

void set_kernel(MoeConfig& c, const std::string& v2) { apply_plan_setting(c.plan, "use_gmm_v2", v2); }

TEST(SwigluInGmm, GivesTheSeparatePassesBitsOnEveryKernelSelection) {
  for (const std::string v2 : {"auto", "true", "false"}) {
    MoeConfig c = base_config();
    set_kernel(c, v2);
    expect_same_leaves(c, "use_gmm_v2=" + v2, true);
  }
  MoeConfig hybrid = base_config();
  apply_plan_setting(hybrid.plan, "use_gmm_v2_fwd", "false");
  apply_plan_setting(hybrid.plan, "use_gmm_v2_dlhs", "true");
  expect_same_leaves(hybrid, "v1 fwd, v2 dlhs", true);
}

TEST(SwigluInGmm, GivesTheSeparatePassesBitsInBf16AndQuantized) {
  MoeConfig bf16 = base_config();
  bf16.dtype = DType::kBF16;
  expect_same_leaves(bf16, "bf16", true);
  for (const std::string recipe : {"fp8_full", "int8"}) {
    MoeConfig q = base_config();
    q.quantization = parse_quantization(recipe, "quantization");
    expect_same_leaves(q, recipe, true);
  }
}

TEST(SwigluInGmm, GivesTheSeparatePassesBitsOnTheDensePathAndWithEmptyExperts) {
  MoeConfig dense = base_config();
  dense.sparse_matmul = false;
  dense.capacity_factor = 0.5;  // drops: rows of some slots stay empty
  expect_same_leaves(dense, "dense path", true);
  MoeConfig many = base_config();
  many.router.num_experts = 16;  // 6 tokens top-2: at least 4 experts get none
  expect_same_leaves(many, "16 experts, 6 tokens", true, 6);
}

TEST(SwigluInGmm, TheReferenceBackendAndTheFusedWeightKeepTheirOwnPasses) {
  MoeConfig reference = base_config();
  reference.backend = MatmulBackend::kReference;
  expect_same_leaves(reference, "reference backend", false);
  MoeConfig fused = base_config();
  fused.fused_gate_up = true;
  expect_same_leaves(fused, "fused gate|up", false);
}

}  // namespace
}  // namespace raggemm::moe
