// The whole model: finite differences of the f64 model, then the f32 model
// (raggemm ops) against the f64 one.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "moe/moe_test_util.h"
#include "train/model.h"

namespace raggemm::train {
namespace {

// A model case: fused gate|up or not, and the blocks' attention.
struct ModelCase {
  const char* name;
  bool fused;
  const char* attention;  // "", "gqa", "mla"
};

void PrintTo(const ModelCase& c, std::ostream* os) { *os << c.name; }

ModelConfig tiny_model(const ModelCase& c) {
  ModelConfig config;
  const bool fused = c.fused;
  if (std::string(c.attention) == "gqa") {
    model::AttentionConfig a;
    a.type = model::AttentionType::kGqa;
    a.embed_dim = 6;
    a.num_query_heads = 2;
    a.num_kv_heads = 1;
    a.head_dim = 4;
    config.attention = a;
  } else if (std::string(c.attention) == "mla") {
    model::AttentionConfig a;
    a.type = model::AttentionType::kMla;
    a.embed_dim = 6;
    a.num_query_heads = 2;
    a.q_lora_rank = 3;
    a.kv_lora_rank = 3;
    a.qk_nope_head_dim = 2;
    a.qk_rope_head_dim = 2;
    a.v_head_dim = 3;
    a.rope.type = model::RopeType::kYarn;
    config.attention = a;
  }
  config.seq_len = 4;  // the 8 tokens are two sequences
  config.vocab_size = 11;
  config.num_layers = 3;
  config.dense_layers = 1;
  config.moe.embed_dim = 6;
  config.moe.mlp_dim = 5;
  config.moe.router.num_experts = 4;
  config.moe.router.top_k = 2;
  config.moe.router.load_balance_loss_weight = 0.05;
  config.moe.shared_experts = 1;
  config.moe.fused_gate_up = fused;
  return config;
}

const std::vector<int32_t> kInputs = {1, 4, 4, 9, 0, 10, 3, 7};
const std::vector<int32_t> kTargets = {4, 4, 9, 0, 10, 3, 7, 2};

class ModelGradientTest : public ::testing::TestWithParam<ModelCase> {};

TEST_P(ModelGradientTest, F64MatchesFiniteDifferences) {
  Model<double> model(tiny_model(GetParam()), nullptr);
  model.init(9);
  const int64_t tokens = static_cast<int64_t>(kInputs.size());
  model.loss_and_grad(kInputs.data(), kTargets.data(), tokens);
  const double eps = 1e-6;
  for (moe::Param<double>* p : model.params()) {
    const std::vector<double> grad = p->grad;
    for (size_t i = 0; i < grad.size(); ++i) {
      const double saved = p->value[i];
      p->value[i] = saved + eps;
      const double plus = model.loss(kInputs.data(), kTargets.data(), tokens).total;
      p->value[i] = saved - eps;
      const double minus = model.loss(kInputs.data(), kTargets.data(), tokens).total;
      p->value[i] = saved;
      const double numeric = (plus - minus) / (2 * eps);
      EXPECT_NEAR(grad[i], numeric, 1e-7 + 1e-5 * std::abs(numeric)) << p->name << "[" << i << "]";
    }
  }
}

TEST_P(ModelGradientTest, F32OpsMatchF64) {
  Model<double> reference(tiny_model(GetParam()), nullptr);
  reference.init(9);
  Model<float> model(tiny_model(GetParam()), nullptr);
  moe::testing::copy_params(reference.params(), model.params());
  const int64_t tokens = static_cast<int64_t>(kInputs.size());
  const LossParts want = reference.loss_and_grad(kInputs.data(), kTargets.data(), tokens);
  const LossParts got = model.loss_and_grad(kInputs.data(), kTargets.data(), tokens);
  EXPECT_NEAR(got.total, want.total, 1e-5 * std::abs(want.total));
  for (size_t i = 0; i < model.params().size(); ++i) {
    EXPECT_LT(
        moe::testing::relative_frobenius(model.params()[i]->grad, reference.params()[i]->grad),
        1e-4)
        << model.params()[i]->name;
  }
}

// The loss in chunks of 3 tokens (the last one ragged) gives the loss and
// gradients of one chunk.
TEST(ModelChunkedLossTest, ChunksMatchOneChunk) {
  ModelConfig config = tiny_model(ModelCase{"gqa", false, "gqa"});
  Model<double> whole(config, nullptr);
  whole.init(9);
  config.loss_chunk = 3;
  Model<double> chunked(config, nullptr);
  chunked.init(9);
  const int64_t tokens = static_cast<int64_t>(kInputs.size());
  const LossParts a = whole.loss_and_grad(kInputs.data(), kTargets.data(), tokens);
  const LossParts b = chunked.loss_and_grad(kInputs.data(), kTargets.data(), tokens);
  EXPECT_NEAR(a.total, b.total, 1e-12);
  for (size_t i = 0; i < whole.params().size(); ++i) {
    EXPECT_LT(moe::testing::relative_frobenius(whole.params()[i]->grad, chunked.params()[i]->grad),
              1e-12)
        << whole.params()[i]->name;
  }
  EXPECT_NEAR(chunked.loss(kInputs.data(), kTargets.data(), tokens).total, a.total, 1e-12);
}

INSTANTIATE_TEST_SUITE_P(GateUp, ModelGradientTest,
                         ::testing::Values(ModelCase{"separate", false, ""},
                                           ModelCase{"fused", true, ""},
                                           ModelCase{"gqa_attention", false, "gqa"},
                                           ModelCase{"mla_attention", true, "mla"}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace raggemm::train
