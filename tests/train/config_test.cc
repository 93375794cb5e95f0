// Trainer config: base.yml holds every key at its default, both override
// forms, unknown keys with suggestions, invalid values and combinations.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
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

// Which differences between a run's config.yml and a resume count.
struct ChangeCase {
  std::string name;
  std::vector<std::string> stored;   // overrides of the run
  std::vector<std::string> current;  // overrides of the resume
  std::vector<std::string> changed;  // keys reported, in key order
};

class TrajectoryChangeTest : public ::testing::TestWithParam<ChangeCase> {};

TEST_P(TrajectoryChangeTest, ReportsExactlyTheTrajectoryKeys) {
  const ChangeCase& c = GetParam();
  const std::vector<ConfigChange> changes =
      trajectory_changes(parse_train_arguments(c.stored).to_yaml(),
                         parse_train_arguments(c.current).to_yaml());
  std::vector<std::string> keys;
  for (const ConfigChange& change : changes) keys.push_back(change.key);
  EXPECT_EQ(keys, c.changed);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, TrajectoryChangeTest,
    ::testing::Values(
        ChangeCase{"same", {"seed=3"}, {"seed=3"}, {}},
        ChangeCase{"harmless_keys", {"steps=2", "checkpoint_period=5"},
                   {"steps=9", "checkpoint_period=1", "profiler=trace", "run_name=x",
                    "enable_checkpointing=true", "allow_config_change_on_resume=true"},
                   {}},
        ChangeCase{"numbers_by_value", {"learning_rate=0.003"}, {"learning_rate=3e-3"}, {}},
        ChangeCase{"booleans_by_value", {"norm_topk_prob=true"}, {"norm_topk_prob=yes"}, {}},
        ChangeCase{"boolean_flipped", {"norm_topk_prob=1"}, {"norm_topk_prob=no"},
                   {"norm_topk_prob"}},
        ChangeCase{"seed_opt_lr", {}, {"learning_rate=0.01", "opt_type=sgd", "seed=1"},
                   {"seed", "opt_type", "learning_rate"}},
        ChangeCase{"alias_is_the_key", {"gmm_autotune=false"}, {"tokamax_gmm_autotune=true"},
                   {"gmm_autotune"}},
        ChangeCase{"tiles_and_kernels_count", {}, {"use_gmm_v2=true", "wi_tile_fwd_batch_seq=64"},
                   {"use_gmm_v2", "wi_tile_fwd_batch_seq"}}),
    [](const auto& info) { return info.param.name; });

TEST(TrajectoryChange, EveryKeyCountsUnlessListedHarmless) {
  // The default is "counts": only the short explicit list is harmless, so a
  // key another issue adds later counts until someone lists it.
  EXPECT_TRUE(changes_trajectory("some_key_added_later"));
  EXPECT_FALSE(changes_trajectory("steps"));
  EXPECT_LE(resume_harmless_keys().size(), 16u);
  for (const ConfigKey& key : config_keys()) {
    const bool harmless = !changes_trajectory(key.name);
    if (harmless) {
      EXPECT_NE(std::find(resume_harmless_keys().begin(), resume_harmless_keys().end(), key.name),
                resume_harmless_keys().end());
    }
  }
}

TEST(TrajectoryChange, KeysMissingFromAnOlderConfigCompareWithTheirDefault) {
  std::vector<std::string> unknown;
  EXPECT_TRUE(trajectory_changes("seed: 0\nold_removed_key: 1\n", Settings().to_yaml(), &unknown)
                  .empty());
  EXPECT_EQ(unknown, std::vector<std::string>{"old_removed_key"});
  const auto changes = trajectory_changes("seed: 0\n", parse_train_arguments({"adam_b1=0.8"}).to_yaml());
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].key, "adam_b1");
  EXPECT_EQ(changes[0].stored, "0.9");
  EXPECT_EQ(changes[0].current, "0.8");
}

// The one tile limit (issue 16 item 7), named by the key.
TEST(ConfigTest, PerPassInputBufferCountKeys) {
  const TrainConfig config = resolve(parse_train_arguments(
      {"wo_input_buffer_count_drhs=3", "input_buffer_count=2"}));
  EXPECT_EQ(config.moe.plan.wo.pass(Pass::kGradRhs).input_buffer_count, 3);
  EXPECT_EQ(config.moe.plan.wo.pass(Pass::kForward).input_buffer_count, 2);
  EXPECT_EQ(config.moe.plan.wi.pass(Pass::kGradRhs).input_buffer_count, 2);
  const TrainConfig unset = resolve(parse_train_arguments({"wi_input_buffer_count_fwd=1"}));
  EXPECT_EQ(unset.moe.plan.wi.pass(Pass::kForward).input_buffer_count, 1);
  EXPECT_FALSE(unset.moe.plan.wi.pass(Pass::kGradLhs).input_buffer_count.has_value());
  try {
    resolve(parse_train_arguments({"wi_input_buffer_count_dlhs=7"}));
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "wi_input_buffer_count_dlhs");
    EXPECT_NE(std::string(e.what()).find("=7"), std::string::npos) << e.what();
  }
}

TEST(ConfigTest, TileKeyAboveTheLimitNamesTheKey) {
  EXPECT_NO_THROW(resolve(parse_train_arguments({"wi_tile_fwd_batch_seq=65536"})));
  try {
    resolve(parse_train_arguments({"wi_tile_fwd_batch_seq=65537"}));
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "wi_tile_fwd_batch_seq");
    EXPECT_NE(std::string(e.what()).find("at most 65536"), std::string::npos) << e.what();
  }
}

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

// The key's value is parsed once into the layer's recipe (issue 20).
TEST(ConfigTest, QuantizationBecomesARecipe) {
  EXPECT_EQ(resolve(parse_train_arguments({})).moe.quantization, std::nullopt);
  EXPECT_EQ(resolve(parse_train_arguments({"quantization=fp8_full"})).moe.quantization,
            QuantRecipe::kFp8);
  EXPECT_EQ(resolve(parse_train_arguments({"quantization=int8"})).moe.quantization,
            QuantRecipe::kInt8);
  try {
    resolve(parse_train_arguments({"quantization=fp8"}));
    FAIL() << "accepted quantization=fp8";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "quantization");
    EXPECT_EQ(e.value(), "fp8");
    EXPECT_NE(std::string(e.what()).find("expected one of: \"\", fp8_full, int8"),
              std::string::npos)
        << e.what();
  }
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
