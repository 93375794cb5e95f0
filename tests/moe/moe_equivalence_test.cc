// Gradient equivalence of the MoE layer: output, input gradient and every
// parameter gradient of each {v1, v2, hybrid} x {f32, bf16, fp8_full, int8}
// configuration against the dense unquantized reference (naive loops,
// double accumulation, same routing), as relative Frobenius norms.
// Bounds: 0.012 for f32/bf16, 0.22 for quantized (the peer's bounds); the
// measured values are printed.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <memory>
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

struct Shape {
  std::string name;
  int64_t embed, mlp, experts, top_k, tokens;
};

// Mixtral-like, scaled to a 2-core machine; and a small shape that also
// runs under the sanitizers.
const Shape kMixtralLike{"mixtral_like", 512, 1024, 8, 2, 1024};
const Shape kSmall{"small", 64, 128, 8, 2, 160};

struct Outcome {
  std::vector<float> out, dx;
  std::vector<std::vector<float>> grads;
  std::vector<std::string> names;
};

MoeConfig shape_config(const Shape& shape) {
  MoeConfig config;
  config.embed_dim = shape.embed;
  config.mlp_dim = shape.mlp;
  config.router.num_experts = shape.experts;
  config.router.top_k = shape.top_k;
  config.router.load_balance_loss_weight = 0.01;
  return config;
}

Outcome run_layer(const MoeConfig& config, const Shape& shape) {
  MoeLayer<double> init("moe", config);
  init.init(3);
  MoeLayer<float> layer("moe", config);
  copy_params(init.params(), layer.params());
  const std::vector<float> x = cast_values<float>(random_values(shape.tokens * shape.embed, 31));
  const std::vector<float> probe =
      cast_values<float>(random_values(shape.tokens * shape.embed, 32));
  Outcome outcome;
  outcome.out.resize(x.size());
  outcome.dx.assign(x.size(), 0.0f);
  layer.forward(x.data(), shape.tokens, outcome.out.data());
  layer.backward(probe.data(), outcome.dx.data());
  for (Param<float>* p : layer.params()) {
    outcome.grads.push_back(p->grad);
    outcome.names.push_back(p->name);
  }
  return outcome;
}

const Outcome& reference_for(const Shape& shape) {
  static std::map<std::string, std::unique_ptr<Outcome>> cache;
  auto& slot = cache[shape.name];
  if (!slot) {
    MoeConfig config = shape_config(shape);
    config.backend = MatmulBackend::kReference;
    slot = std::make_unique<Outcome>(run_layer(config, shape));
  }
  return *slot;
}

struct Case {
  std::string mode;       // v1, v2, hybrid
  std::string precision;  // f32, bf16, fp8_full, int8
};

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const char* mode : {"v1", "v2", "hybrid"}) {
    for (const char* precision : {"f32", "bf16", "fp8_full", "int8"})
      cases.push_back({mode, precision});
  }
  return cases;
}

void check_case(const Shape& shape, const Case& c) {
  MoeConfig config = shape_config(shape);
  for (Weight w : kAllWeights) {
    for (Pass pass : kAllPasses) {
      const bool v2 = c.mode == "v2" || (c.mode == "hybrid" && pass != Pass::kGradLhs);
      config.plan.weight(w).pass(pass).kernel = v2 ? KernelVersion::kV2 : KernelVersion::kV1;
    }
  }
  if (c.precision == "bf16") config.dtype = DType::kBF16;
  if (c.precision == "fp8_full" || c.precision == "int8") config.quantization = c.precision;
  const double bound = config.quantization.empty() ? 0.012 : 0.22;

  const Outcome& reference = reference_for(shape);
  const Outcome got = run_layer(config, shape);
  std::string report = shape.name + " " + c.mode + " " + c.precision + ":";
  auto check = [&](const std::string& what, double error) {
    char text[64];
    std::snprintf(text, sizeof(text), " %s %.2e", what.c_str(), error);
    report += text;
    EXPECT_LE(error, bound) << shape.name << " " << c.mode << " " << c.precision << " " << what;
  };
  check("out", relative_frobenius(got.out, reference.out));
  check("dx", relative_frobenius(got.dx, reference.dx));
  for (size_t i = 0; i < got.grads.size(); ++i) {
    const std::string name = got.names[i].substr(got.names[i].find('.') + 1);
    check(name, relative_frobenius(got.grads[i], reference.grads[i]));
  }
  std::printf("%s\n", report.c_str());
}

class MoeEquivalenceTest : public ::testing::TestWithParam<Case> {};

TEST_P(MoeEquivalenceTest, SmallShape) { check_case(kSmall, GetParam()); }

TEST_P(MoeEquivalenceTest, MixtralLikeShape) {
  if (testing::kSanitized)
    GTEST_SKIP() << "big shape skipped under sanitizers (SmallShape covers it)";
  check_case(kMixtralLike, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Configs, MoeEquivalenceTest, ::testing::ValuesIn(all_cases()),
                         [](const auto& info) {
                           return info.param.mode + "_" + info.param.precision;
                         });

}  // namespace
}  // namespace raggemm::moe
