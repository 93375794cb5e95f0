// Model presets and the attention keys: a preset's keys replace the config
// file's, conflict with the command line's unless override_model_config,
// and resolve into the model's attention.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "raggemm/error.h"
#include "raggemm/train.h"
#include "train/model.h"

namespace raggemm::train {
namespace {

const std::string kBase = std::string(RAGGEMM_SOURCE_DIR) + "/configs/base.yml";

TrainConfig resolve_args(const std::vector<std::string>& args) {
  return resolve(parse_train_arguments(args));
}

TEST(ModelPresetTest, DeepSeek3PresetOverTheConfigFile) {
  const TrainConfig c = resolve_args({kBase, "model_name=deepseek3-671b"});
  EXPECT_EQ(c.base_emb_dim, 7168);
  EXPECT_EQ(c.base_mlp_dim, 18432);
  EXPECT_EQ(c.moe.mlp_dim, 2048);  // base_moe_mlp_dim: the experts'
  EXPECT_EQ(c.base_num_decoder_layers, 61);
  EXPECT_EQ(c.moe.router.num_experts, 256);
  EXPECT_EQ(c.attention_type, "mla");
  EXPECT_EQ(c.q_lora_rank, 1536);
  EXPECT_EQ(c.rope_type, "yarn");
  EXPECT_NE(c.resolved_yaml.find("base_emb_dim: 7168"), std::string::npos);
  const auto attention = attention_config(c);
  ASSERT_TRUE(attention.has_value());
  EXPECT_EQ(attention->type, model::AttentionType::kMla);
  EXPECT_EQ(attention->kv_lora_rank, 512);
}

TEST(ModelPresetTest, CommandLineNeedsOverrideModelConfig) {
  try {
    resolve_args({"model_name=deepseek3-tiny", "base_mlp_dim=2048"});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("base_mlp_dim=2048"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("override_model_config"), std::string::npos) << e.what();
  }
  // The same value, spelled otherwise, is no change.
  EXPECT_NO_THROW(resolve_args({"model_name=deepseek3-tiny", "routed_bias=True", "mscale: 1"}));
  const TrainConfig c = resolve_args({"model_name: deepseek3-tiny", "override_model_config=True",
                                      "base_mlp_dim: 2048", "base_num_decoder_layers=1",
                                      "first_num_dense_layers=0"});
  EXPECT_EQ(c.base_mlp_dim, 2048);
  EXPECT_EQ(c.moe.mlp_dim, 64);
  EXPECT_EQ(c.base_num_decoder_layers, 1);
  EXPECT_EQ(c.kv_lora_rank, 16);
}

TEST(ModelPresetTest, UnknownPresetNamesTheKnownOnes) {
  try {
    resolve_args({"model_name=gpt5"});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model_name=gpt5"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("mixtral-8x7b"), std::string::npos);
  }
}

TEST(ModelPresetTest, MoeMlpDimDefaultsToBaseMlpDim) {
  EXPECT_EQ(resolve_args({"base_mlp_dim=96"}).moe.mlp_dim, 96);
  EXPECT_EQ(resolve_args({"base_mlp_dim=96", "base_moe_mlp_dim=32"}).moe.mlp_dim, 32);
}

struct BadAttention {
  std::vector<std::string> args;
  std::string message;
};

class AttentionKeyErrorTest : public ::testing::TestWithParam<BadAttention> {};

TEST_P(AttentionKeyErrorTest, NamesTheKeys) {
  try {
    resolve_args(GetParam().args);
    FAIL() << GetParam().message;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(GetParam().message), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Keys, AttentionKeyErrorTest,
    ::testing::Values(
        BadAttention{{"attention_type=gqa", "base_num_query_heads=6", "base_num_kv_heads=4"},
                     "base_num_query_heads,base_num_kv_heads=6,4"},
        BadAttention{{"attention_type=mha", "base_num_kv_heads=2"},
                     "attention_type,base_num_kv_heads=mha,2"},
        BadAttention{{"head_dim=7"}, "head_dim=7"},
        BadAttention{{"attention_type=mla", "qk_rope_head_dim=5"}, "qk_rope_head_dim=5"},
        BadAttention{{"attention_type=flash"}, "attention_type=flash"},
        BadAttention{{"rope_type=ntk"}, "rope_type=ntk"}));

}  // namespace
}  // namespace raggemm::train
