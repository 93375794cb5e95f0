// Trainer config: base.yml holds every key at its default, both override
// forms, unknown keys with suggestions, invalid values and combinations.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "raggemm/error.h"
#include "raggemm/train.h"

namespace raggemm::train {
namespace {

const std::string kBase = std::string(RAGGEMM_SOURCE_DIR) + "/configs/base.yml";

TEST(ConfigTest, BaseYmlListsEveryKeyInOrderAtItsDefault) {
  const YAML::Node root = YAML::LoadFile(kBase);
  std::vector<std::string> file_keys;
  for (const auto& entry : root) {
    file_keys.push_back(entry.first.as<std::string>());
    const std::string value = entry.second.IsNull() ? "" : entry.second.as<std::string>();
    const auto& keys = config_keys();
    auto it = std::find_if(keys.begin(), keys.end(),
                           [&](const ConfigKey& k) { return k.name == file_keys.back(); });
    ASSERT_NE(it, keys.end()) << file_keys.back();
    EXPECT_EQ(value, it->default_value) << file_keys.back();
  }
  std::vector<std::string> names;
  for (const ConfigKey& key : config_keys()) names.push_back(key.name);
  EXPECT_EQ(file_keys, names);
}

TEST(ConfigTest, IssueKeysAllExist) {
  std::vector<std::string> required = {"run_name",
                                       "base_output_directory",
                                       "steps",
                                       "per_device_batch_size",
                                       "max_target_length",
                                       "vocab_size",
                                       "base_emb_dim",
                                       "base_mlp_dim",
                                       "base_num_decoder_layers",
                                       "first_num_dense_layers",
                                       "num_experts",
                                       "num_experts_per_tok",
                                       "shared_experts",
                                       "learning_rate",
                                       "opt_type",
                                       "weight_dtype",
                                       "dtype",
                                       "use_gmm_v2",
                                       "use_gmm_v2_fwd",
                                       "use_gmm_v2_dlhs",
                                       "use_gmm_v2_drhs",
                                       "gmm_autotune",
                                       "quantization",
                                       "load_balance_loss_weight",
                                       "routed_scaling_factor",
                                       "seed",
                                       "enable_checkpointing",
                                       "checkpoint_period",
                                       "profiler"};
  for (const char* w : {"wi", "wo"})
    for (const char* p : {"fwd", "dlhs", "drhs"})
      for (const char* d : {"batch_seq", "embed_dim", "mlp_dim"})
        required.push_back(std::string(w) + "_tile_" + p + "_" + d);
  Settings settings;
  for (const std::string& key : required) EXPECT_NO_THROW(settings.get(key)) << key;
}

TEST(ConfigTest, BothOverrideFormsMixed) {
  const Settings s = parse_train_arguments(
      {kBase, "steps=7", "wi_tile_fwd_batch_seq:", "128", "dtype: bf16", "use_gmm_v2=true"});
  EXPECT_EQ(s.get("steps"), "7");
  EXPECT_EQ(s.get("wi_tile_fwd_batch_seq"), "128");
  EXPECT_EQ(s.get("dtype"), "bf16");
  const TrainConfig c = resolve(s);
  EXPECT_EQ(c.steps, 7);
  EXPECT_EQ(c.moe.dtype, DType::kBF16);
  EXPECT_EQ(c.moe.plan.wi.pass(Pass::kForward).tiles.batch_seq, 128);
  EXPECT_EQ(c.moe.plan.wo.pass(Pass::kGradRhs).kernel, KernelVersion::kV2);
}

TEST(ConfigTest, NoConfigFileMeansDefaults) {
  const TrainConfig c = resolve(parse_train_arguments({"steps=3"}));
  EXPECT_EQ(c.steps, 3);
  EXPECT_EQ(c.base_emb_dim, 256);
}

TEST(ConfigTest, HybridKernelsPerPass) {
  const TrainConfig c = resolve(parse_train_arguments(
      {"use_gmm_v2_fwd=true", "use_gmm_v2_dlhs=false", "use_gmm_v2_drhs=true"}));
  for (Weight w : kAllWeights) {
    EXPECT_EQ(c.moe.plan.weight(w).pass(Pass::kForward).kernel, KernelVersion::kV2);
    EXPECT_EQ(c.moe.plan.weight(w).pass(Pass::kGradLhs).kernel, KernelVersion::kV1);
    EXPECT_EQ(c.moe.plan.weight(w).pass(Pass::kGradRhs).kernel, KernelVersion::kV2);
  }
}

struct BadCase {
  std::string name;
  std::vector<std::string> args;
  std::string argument;  // the keys the error must name
  std::string message_part;
};

class ConfigErrorTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(ConfigErrorTest, NamesTheKeys) {
  const BadCase& c = GetParam();
  try {
    resolve(parse_train_arguments(c.args));
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), c.argument) << e.what();
    EXPECT_NE(std::string(e.what()).find(c.message_part), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ConfigErrorTest,
    ::testing::Values(
        BadCase{"unknown_key", {"stpes=3"}, "stpes", "did you mean 'steps'"},
        BadCase{"unknown_tile_key",
                {"wi_tile_fwd_batchseq=8"},
                "wi_tile_fwd_batchseq",
                "did you mean 'wi_tile_fwd_batch_seq'"},
        BadCase{"v2_contradiction",
                {"use_gmm_v2=true", "use_gmm_v2_dlhs=false"},
                "use_gmm_v2,use_gmm_v2_dlhs",
                "every pass"},
        BadCase{"block_scales_with_v1",
                {"quantization=fp8_full", "quantization_weight_scaling=block:128",
                 "use_gmm_v2_fwd=false"},
                "quantization_weight_scaling,use_gmm_v2_fwd",
                "v2"},
        BadCase{"zero_tile", {"wo_tile_drhs_mlp_dim=0"}, "wo_tile_drhs_mlp_dim", "positive"},
        BadCase{
            "negative_tile", {"wi_tile_dlhs_embed_dim: -3"}, "wi_tile_dlhs_embed_dim", "positive"},
        BadCase{"text_without_path", {"dataset_type=text"}, "dataset_type,dataset_path", "needs"},
        BadCase{"bad_quantization", {"quantization=fp4"}, "quantization", "fp8_full"},
        BadCase{"bad_steps", {"steps=ten"}, "steps", "integer"},
        BadCase{"top_k_above_experts",
                {"num_experts_per_tok=9"},
                "num_experts_per_tok",
                "1..num_experts"},
        BadCase{"dense_layers_above_layers",
                {"first_num_dense_layers=3"},
                "first_num_dense_layers,base_num_decoder_layers",
                "more dense"},
        BadCase{"dangling_colon", {"steps:"}, "steps", "followed by its value"},
        BadCase{"not_a_setting", {"steps=1", "oops"}, "setting", "key=value"},
        BadCase{"bias_with_softmax", {"routed_bias=true"}, "routed_bias", "sigmoid"}),
    [](const auto& info) { return info.param.name; });

TEST(ConfigTest, BlockScalesAcceptedWithV2) {
  EXPECT_NO_THROW(resolve(parse_train_arguments(
      {"quantization=fp8_full", "quantization_weight_scaling=block:128", "use_gmm_v2=true"})));
}

// Issue 19: the dense path, kernel selection keys and activation scaling.
INSTANTIATE_TEST_SUITE_P(
    KernelSelection, ConfigErrorTest,
    ::testing::Values(
        BadCase{"activation_blocks_with_v1",
                {"quantization=fp8_full", "quantization_activation_scaling=block:128",
                 "use_gmm_v2_fwd=false"},
                "quantization_activation_scaling,use_gmm_v2_fwd",
                "v2"},
        BadCase{"activation_block_size",
                {"quantization=fp8_full", "quantization_activation_scaling=block:7"},
                "quantization_activation_scaling",
                "32..512"},
        BadCase{"activation_scaling_word",
                {"quantization_activation_scaling=column"},
                "quantization_activation_scaling",
                "block:SIZE"},
        BadCase{"megablox_with_v2", {"megablox=true", "use_gmm_v2=true"}, "megablox,use_gmm_v2",
                "v1"},
        BadCase{"dense_quantized",
                {"sparse_matmul=false", "quantization=int8"},
                "sparse_matmul,quantization",
                "unquantized"},
        BadCase{"dense_expert_parallel",
                {"sparse_matmul=false", "ici_expert_parallelism=2"},
                "sparse_matmul,ici_expert_parallelism",
                "one process"},
        BadCase{"capacity_on_sparse", {"capacity_factor=1.25"}, "capacity_factor,sparse_matmul",
                "dense path"},
        BadCase{"bad_use_gmm_v2", {"use_gmm_v2=maybe"}, "use_gmm_v2", "auto"}),
    [](const auto& info) { return info.param.name; });

TEST(ConfigTest, KernelSelectionKeysResolve) {
  const TrainConfig defaults = resolve(parse_train_arguments({}));
  EXPECT_TRUE(defaults.moe.sparse_matmul);
  EXPECT_EQ(defaults.moe.capacity_factor, -1);
  EXPECT_FALSE(defaults.moe.plan.wi.pass(Pass::kForward).kernel.has_value());  // auto
  EXPECT_NE(defaults.kernel_selection.find("fwd auto (use_gmm_v2=auto"), std::string::npos)
      << defaults.kernel_selection;
  const TrainConfig blocks = resolve(parse_train_arguments(
      {"quantization=fp8_full", "quantization_activation_scaling=block:128"}));
  EXPECT_EQ(blocks.moe.activation_k_block, 128);
  EXPECT_EQ(blocks.moe.plan.wo.pass(Pass::kForward).kernel, KernelVersion::kV2);
  EXPECT_FALSE(blocks.moe.plan.wo.pass(Pass::kGradLhs).kernel.has_value());
  const TrainConfig tokamax = resolve(parse_train_arguments(
      {"use_tokamax_gmm=true", "megablox=true", "use_gmm_v2=true", "sparse_matmul=false",
       "capacity_factor=1.5"}));
  EXPECT_EQ(tokamax.moe.plan.wi.pass(Pass::kGradLhs).kernel, KernelVersion::kV2);
  EXPECT_FALSE(tokamax.moe.sparse_matmul);
  EXPECT_EQ(tokamax.moe.capacity_factor, 1.5);
  const TrainConfig megablox = resolve(parse_train_arguments({"megablox=true"}));
  EXPECT_EQ(megablox.moe.plan.wo.pass(Pass::kGradRhs).kernel, KernelVersion::kV1);
}

TEST(ConfigTest, ResolvedYamlRoundTrips) {
  const Settings s =
      parse_train_arguments({"quantization=fp8_full", "run_name=x", "dataset_path: a b"});
  const YAML::Node root = YAML::Load(s.to_yaml());
  EXPECT_EQ(root["quantization"].as<std::string>(), "fp8_full");
  EXPECT_EQ(root["profiler"].as<std::string>(), "");
  EXPECT_EQ(root["dataset_path"].as<std::string>(), "a b");
}

}  // namespace
}  // namespace raggemm::train
