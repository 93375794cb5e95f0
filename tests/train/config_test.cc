// Trainer config: base.yml holds every key at its default, both override
// forms, unknown keys with suggestions, invalid values and combinations.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
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
                {"quantization=fp8_full", "quantization_weight_scaling=block:128"},
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

// Duplicates and aliases (issue 16 items 5 and 6).
TEST(ConfigTest, AliasSetsItsKey) {
  const Settings s = parse_train_arguments({"tokamax_gmm_autotune=true"});
  EXPECT_EQ(s.get("gmm_autotune"), "true");
  EXPECT_EQ(s.get("tokamax_gmm_autotune"), "true");
  EXPECT_EQ(canonical_config_key("tokamax_gmm_autotune"), "gmm_autotune");
  EXPECT_EQ(canonical_config_key("steps"), "steps");
  // config.yml stores the key's own name, once.
  const std::string yaml = s.to_yaml();
  EXPECT_NE(yaml.find("gmm_autotune: true"), std::string::npos);
  EXPECT_EQ(yaml.find("tokamax_gmm_autotune"), std::string::npos);
  EXPECT_TRUE(resolve(s).moe.use_tune_cache);
}

TEST(ConfigTest, CommandLineMayOverrideTheFile) {
  const std::string path = ::testing::TempDir() + "/override.yml";
  {
    std::ofstream out(path);
    out << "steps: 2\ngmm_autotune: false\n";
  }
  const Settings s = parse_train_arguments({path, "steps=5", "tokamax_gmm_autotune=true"});
  EXPECT_EQ(s.get("steps"), "5");
  EXPECT_EQ(s.get("gmm_autotune"), "true");
}

struct DuplicateCase {
  std::string name;
  std::string file;  // config file text ("" = no file)
  std::vector<std::string> args;
  std::string argument;
  std::vector<std::string> message_parts;
};

class DuplicateKeyTest : public ::testing::TestWithParam<DuplicateCase> {};

TEST_P(DuplicateKeyTest, IsAnErrorNamingBothValues) {
  const DuplicateCase& c = GetParam();
  std::vector<std::string> args;
  if (!c.file.empty()) {
    const std::string path = ::testing::TempDir() + "/dup_" + c.name + ".yml";
    std::ofstream(path) << c.file;
    args.push_back(path);
  }
  args.insert(args.end(), c.args.begin(), c.args.end());
  try {
    parse_train_arguments(args);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), c.argument) << e.what();
    for (const std::string& part : c.message_parts) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << part << " in " << e.what();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, DuplicateKeyTest,
    ::testing::Values(
        DuplicateCase{"command_line", "", {"steps=2", "steps=3"}, "steps",
                      {"steps=3: key given twice on the command line", "first steps=2",
                       "then steps=3"}},
        DuplicateCase{"both_forms", "", {"steps: 2", "seed=1", "steps:", "3"}, "steps",
                      {"first steps=2", "then steps=3"}},
        DuplicateCase{"alias_on_command_line", "",
                      {"gmm_autotune=true", "tokamax_gmm_autotune=false"}, "tokamax_gmm_autotune",
                      {"tokamax_gmm_autotune is an alias of gmm_autotune", "first gmm_autotune=true",
                       "then tokamax_gmm_autotune=false"}},
        DuplicateCase{"in_file", "seed: 1\nsteps: 2\nlearning_rate: 0.1\nsteps: 3\n", {}, "steps",
                      {"key given twice in", "first line 2 steps=2", "then line 4 steps=3"}},
        DuplicateCase{"alias_in_file", "tokamax_gmm_autotune: true\ngmm_autotune: false\n", {},
                      "gmm_autotune",
                      {"tokamax_gmm_autotune is an alias of gmm_autotune",
                       "first line 1 tokamax_gmm_autotune=true", "then line 2 gmm_autotune=false"}}),
    [](const auto& info) { return info.param.name; });

TEST(ConfigTest, BlockScalesAcceptedWithV2) {
  EXPECT_NO_THROW(resolve(parse_train_arguments(
      {"quantization=fp8_full", "quantization_weight_scaling=block:128", "use_gmm_v2=true"})));
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
