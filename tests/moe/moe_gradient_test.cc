// Finite-difference gradient checks of the MoE layer in f64 (naive
// matmuls), then the f32 layer on the raggemm ops against the f64 layer.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "moe_test_util.h"
#include "raggemm/moe.h"

namespace raggemm::moe {
namespace {

using testing::cast_values;
using testing::copy_params;
using testing::random_values;
using testing::relative_frobenius;

struct GradCase {
  std::string name;
  MoeConfig config;
};

MoeConfig tiny_config() {
  MoeConfig config;
  config.embed_dim = 6;
  config.mlp_dim = 5;
  config.router.num_experts = 4;
  config.router.top_k = 2;
  config.router.load_balance_loss_weight = 0.1;
  return config;
}

std::vector<GradCase> grad_cases() {
  std::vector<GradCase> cases;
  cases.push_back({"softmax_renormalised", tiny_config()});
  {
    MoeConfig c = tiny_config();
    c.router.normalize_top_k = false;
    c.router.routed_scaling_factor = 2.5;
    c.shared_experts = 1;
    cases.push_back({"softmax_scaled_shared", c});
  }
  {
    MoeConfig c = tiny_config();
    c.router.score_function = ScoreFunction::kSigmoid;
    c.router.selection_bias = true;
    c.router.n_routing_groups = 2;
    c.router.topk_routing_group = 1;
    cases.push_back({"sigmoid_bias_grouped", c});
  }
  {
    MoeConfig c = tiny_config();
    c.router.top_k = 1;
    c.router.num_experts = 3;
    c.fused_gate_up = true;
    cases.push_back({"fused_gate_up_top1", c});
  }
  {
    MoeConfig c = tiny_config();
    c.router.top_k = 4;  // every expert: no routing discontinuity at all
    c.router.normalize_top_k = false;
    cases.push_back({"all_experts", c});
  }
  // The dense path (sparse_matmul=false): every token kept, tokens dropped
  // past a capacity, and the fused gate|up weight.
  {
    MoeConfig c = tiny_config();
    c.sparse_matmul = false;
    c.shared_experts = 1;
    cases.push_back({"dense_keep_all", c});
  }
  {
    MoeConfig c = tiny_config();
    c.sparse_matmul = false;
    c.capacity_factor = 0.75;
    cases.push_back({"dense_capacity_drops", c});
  }
  {
    MoeConfig c = tiny_config();
    c.sparse_matmul = false;
    c.fused_gate_up = true;
    c.router.score_function = ScoreFunction::kSigmoid;
    cases.push_back({"dense_fused_sigmoid", c});
  }
  return cases;
}

constexpr int64_t kTokens = 7;

// The scalar loss FD differentiates: <out, probe> + lb_weight * lb.
double loss_of(MoeLayer<double>& layer, const std::vector<double>& x,
               const std::vector<double>& probe) {
  std::vector<double> out(x.size());
  layer.forward(x.data(), kTokens, out.data());
  double loss = 0;
  for (size_t i = 0; i < out.size(); ++i) loss += out[i] * probe[i];
  return loss + layer.config().router.load_balance_loss_weight * layer.routing().load_balance_loss;
}

class MoeGradientTest : public ::testing::TestWithParam<GradCase> {};

TEST_P(MoeGradientTest, F64BackwardMatchesFiniteDifferences) {
  const MoeConfig& config = GetParam().config;
  MoeLayer<double> layer("moe", config);
  layer.init(7);
  if (config.router.selection_bias) {
    // A nonzero selection bias, so it really shifts the choice.
    for (Param<double>* p : layer.params()) {
      if (!p->trainable) p->value = random_values(p->size(), 3, 0.05);
    }
  }
  const int64_t d = config.embed_dim;
  std::vector<double> x = random_values(kTokens * d, 11);
  const std::vector<double> probe = random_values(kTokens * d, 12);

  std::vector<double> out(x.size());
  layer.forward(x.data(), kTokens, out.data());
  std::vector<double> dx(x.size(), 0.0);
  layer.backward(probe.data(), dx.data());

  const double eps = 1e-6;
  auto check = [&](const std::string& what, double analytic, double* slot) {
    const double saved = *slot;
    *slot = saved + eps;
    const double plus = loss_of(layer, x, probe);
    *slot = saved - eps;
    const double minus = loss_of(layer, x, probe);
    *slot = saved;
    const double numeric = (plus - minus) / (2 * eps);
    EXPECT_NEAR(analytic, numeric, 1e-6 + 1e-5 * std::abs(numeric)) << what;
  };
  for (size_t i = 0; i < x.size(); ++i) check("x[" + std::to_string(i) + "]", dx[i], &x[i]);
  for (Param<double>* p : layer.params()) {
    if (!p->trainable) continue;
    const std::vector<double> grad = p->grad;
    for (size_t i = 0; i < grad.size(); ++i) {
      check(p->name + "[" + std::to_string(i) + "]", grad[i], &p->value[i]);
    }
  }
}

// The f32 layer on the ops (v1, v2, hybrid) against the f64 layer.
TEST_P(MoeGradientTest, F32OpsMatchF64) {
  for (const char* mode : {"v1", "v2", "hybrid"}) {
    MoeConfig config = GetParam().config;
    const bool v2 = std::string(mode) == "v2";
    for (Weight w : kAllWeights) {
      for (Pass pass : kAllPasses) {
        const bool pass_v2 = v2 || (std::string(mode) == "hybrid" && pass != Pass::kGradLhs);
        config.plan.weight(w).pass(pass).kernel = pass_v2 ? KernelVersion::kV2 : KernelVersion::kV1;
      }
    }
    MoeLayer<double> reference("moe", config);
    reference.init(5);
    MoeLayer<float> layer("moe", config);
    copy_params(reference.params(), layer.params());
    const int64_t d = config.embed_dim;
    const std::vector<double> x = random_values(kTokens * d, 21);
    const std::vector<double> probe = random_values(kTokens * d, 22);

    std::vector<double> out_ref(x.size()), dx_ref(x.size(), 0.0);
    reference.forward(x.data(), kTokens, out_ref.data());
    reference.backward(probe.data(), dx_ref.data());
    const std::vector<float> xf = cast_values<float>(x), probe_f = cast_values<float>(probe);
    std::vector<float> out(x.size()), dx(x.size(), 0.0f);
    layer.forward(xf.data(), kTokens, out.data());
    layer.backward(probe_f.data(), dx.data());

    EXPECT_EQ(layer.routing().group_sizes, reference.routing().group_sizes) << mode;
    EXPECT_LT(relative_frobenius(out, out_ref), 1e-5) << mode;
    EXPECT_LT(relative_frobenius(dx, dx_ref), 1e-5) << mode;
    for (size_t i = 0; i < layer.params().size(); ++i) {
      if (!layer.params()[i]->trainable) continue;
      EXPECT_LT(relative_frobenius(layer.params()[i]->grad, reference.params()[i]->grad), 1e-5)
          << mode << " " << layer.params()[i]->name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Configs, MoeGradientTest, ::testing::ValuesIn(grad_cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace raggemm::moe
