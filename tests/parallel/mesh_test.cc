// The data x fsdp x expert mesh (docs/parallelism.md), run under mpirun -np 2
// (meshes (2,1,1), (1,2,1), (1,1,2)) and -np 4 ((2,1,2), (1,2,2), (1,1,4)):
// first-step loss and every gradient against one process on the same
// global batch, 20-step losses, bitwise resume, resharding, memory, and
// the mesh keys' errors.
#include "raggemm/mesh.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "parallel/mpi_test_env.h"
#include "raggemm/error.h"
#include "raggemm/train.h"
#include "train/checkpoint.h"
#include "train/data.h"
#include "train/fsdp.h"
#include "train/model.h"
#include "train/reshard.h"

namespace raggemm::testing {
namespace {

std::vector<std::string> mesh_args(const MeshShape& m) {
  return {"ici_data_parallelism=" + std::to_string(m.data),
          "ici_fsdp_parallelism=" + std::to_string(m.fsdp),
          "ici_expert_parallelism=" + std::to_string(m.expert)};
}

std::string mesh_label(const MeshShape& m) {
  return std::to_string(m.data) + "_" + std::to_string(m.fsdp) + "_" + std::to_string(m.expert);
}

// A small model with every kind of parameter: attention, a dense layer,
// shared experts, routed experts (and, in a variant, the selection bias).
// embed 33: the norms' 33 elements (and most tensors) do not split evenly
// over 2 or 4 fsdp ranks, so the shards' padding is exercised.
train::TrainConfig small_config(const std::string& dir, const std::string& run,
                                const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"base_output_directory=" + dir,
                                   "run_name=" + run,
                                   "steps=4",
                                   "per_device_batch_size=2",
                                   "max_target_length=16",
                                   "vocab_size=64",
                                   "base_emb_dim=33",
                                   "base_mlp_dim=32",
                                   "base_num_decoder_layers=3",
                                   "first_num_dense_layers=1",
                                   "shared_experts=1",
                                   "num_experts=4",
                                   "num_experts_per_tok=2",
                                   "base_num_query_heads=2",
                                   "base_num_kv_heads=2",
                                   "head_dim=16",
                                   "learning_rate=0.01",
                                   "warmup_steps_fraction=0.25"};
  train::Settings settings = train::parse_train_arguments(args);
  for (const std::string& setting : extra) {
    const size_t equals = setting.find('=');
    settings.set(setting.substr(0, equals), setting.substr(equals + 1));
  }
  return train::resolve(settings);
}

std::vector<double> losses(const train::TrainResult& result) {
  std::vector<double> out;
  for (const auto& step : result.steps) out.push_back(step.loss);
  return out;
}

// The meshes of this launch's size.
std::vector<MeshShape> meshes() {
  if (world().size() == 2) return {{2, 1, 1}, {1, 2, 1}, {1, 1, 2}};
  if (world().size() == 4) return {{2, 1, 2}, {1, 2, 2}, {1, 1, 4}};
  return {};
}

struct FirstStep {
  double loss = 0;
  std::map<std::string, std::vector<float>> grads;
  std::vector<std::string> expert_params;
  train::ShardedParams::GatherCounts gathers;
  int64_t units = 0;
};

// One forward and backward of global batch 0 on `mesh` (null: one process
// with the whole global batch), gradients put back together.
FirstStep first_step(const train::TrainConfig& config, const Mesh& mesh, bool keep_gathered) {
  train::ModelConfig mc = train::model_config(config);
  mc.comm = mesh.axis(MeshAxis::kExpert);
  mc.batch_comms = {mesh.axis(MeshAxis::kData), mesh.axis(MeshAxis::kFsdp)};
  train::Model<float> model(mc, nullptr);
  model.init(config.seed);
  train::ShardedParams sharded(model.units(), mesh, keep_gathered);
  model.set_hooks(&sharded);
  const int64_t b = config.per_device_batch_size;
  auto data = train::make_synthetic_dataset(config.vocab_size, config.synthetic_branching, b,
                                            config.max_target_length, config.seed,
                                            train::DataShard{mesh.rank() * b, mesh.size() * b});
  const train::Batch batch = data->batch(0);
  FirstStep out;
  out.loss =
      model.loss_and_grad(batch.inputs.data(), batch.targets.data(), config.tokens_per_step())
          .total;
  sharded.finish_gradients();
  out.grads = sharded.full_gradients();
  out.expert_params = sharded.expert_params();
  out.gathers = sharded.gather_counts();
  out.units = static_cast<int64_t>(model.units().size());
  return out;
}

// The default routing and exchange, and the other one: the ring, sigmoid
// scores with the selection bias (a parameter FSDP leaves whole), fused
// gate|up.
const std::vector<std::vector<std::string>> kVariants = {
    {},
    {"use_ring_of_experts=true", "routed_score_func=sigmoid", "routed_bias=true",
     "fused_gate_up=true"}};

TEST(MeshGradients, FirstStepMatchesOneProcessOnTheGlobalBatch) {
  for (const MeshShape& shape : meshes()) {
    for (size_t variant = 0; variant < 2 * kVariants.size(); ++variant) {
      const bool keep = variant % 2 == 1;
      const std::vector<std::string>& extra = kVariants[variant / 2];
      if (keep && shape.fsdp == 1) continue;
      SCOPED_TRACE(shape.describe() + (keep ? " keep_gathered" : "") + " variant " +
                   std::to_string(variant / 2));
      std::vector<std::string> args = mesh_args(shape);
      args.insert(args.end(), extra.begin(), extra.end());
      const train::TrainConfig config = small_config("/tmp", "unused", args);
      const Mesh mesh(&world(), train::check_launch(config, &world()));
      const FirstStep parallel = first_step(config, mesh, keep);
      std::vector<std::string> single_args = extra;
      single_args.push_back("per_device_batch_size=" + std::to_string(2 * world().size()));
      const train::TrainConfig single_config = small_config("/tmp", "unused", single_args);
      const Mesh one(nullptr, MeshShape{});
      const FirstStep single = first_step(single_config, one, false);
      EXPECT_LT(std::abs(parallel.loss - single.loss), 1e-5 * std::abs(single.loss));
      if (shape.fsdp > 1) {
        // Forward gathers every unit, all but the first started ahead by
        // the unit before; backward (without keep) gathers units U-2..1
        // again, each started ahead by the unit after (the last unit's
        // forward and backward are one; the embedding's backward needs no
        // weights).
        const int64_t u = parallel.units;
        EXPECT_EQ(parallel.gathers.total, keep ? u : 2 * u - 2);
        EXPECT_EQ(parallel.gathers.prefetched, keep ? u - 1 : 2 * u - 3);
      }
      ASSERT_EQ(parallel.grads.size(), single.grads.size());
      for (const auto& [name, reference] : single.grads) {
        std::vector<float> expected = reference;
        const bool expert = std::find(parallel.expert_params.begin(), parallel.expert_params.end(),
                                      name) != parallel.expert_params.end();
        if (expert) {  // this rank's experts' slice
          const size_t local = expected.size() / static_cast<size_t>(shape.expert);
          const size_t first = local * static_cast<size_t>(mesh.coords().expert);
          expected.assign(reference.begin() + first, reference.begin() + first + local);
        }
        const std::vector<float>& got = parallel.grads.at(name);
        ASSERT_EQ(got.size(), expected.size()) << name;
        EXPECT_LT(max_relative(got, expected), 1e-5) << name;
      }
    }
  }
}

// 20 steps on the mesh = 20 steps of one process with the global batch
// (variant 1 with weight_dtype=bf16).
TEST(MeshTraining, TwentyStepsMatchOneProcess) {
  const std::string dir = shared_temp_dir("mesh_train");
  for (const MeshShape& shape : meshes()) {
    for (size_t variant = 0; variant < kVariants.size(); ++variant) {
      SCOPED_TRACE(shape.describe() + " variant " + std::to_string(variant));
      const std::string label = mesh_label(shape) + "_v" + std::to_string(variant);
      std::vector<std::string> args = kVariants[variant];
      for (const char* a : {"steps=20", "eval_interval=10"}) args.push_back(a);
      // The second variant trains bf16-stored matrices (f32 masters of the
      // fsdp shards): the same parameters must be bf16 as on one process.
      if (variant == 1) args.push_back("weight_dtype=bf16");
      std::vector<std::string> single_args = args;
      single_args.push_back("per_device_batch_size=" + std::to_string(2 * world().size()));
      const std::vector<std::string> axes = mesh_args(shape);
      args.insert(args.end(), axes.begin(), axes.end());
      std::ostringstream log;
      const train::TrainResult parallel =
          train::run_training(small_config(dir, "m" + label, args), log, &world());
      const train::TrainResult single = train::run_training(
          small_config(dir, "p1_" + label + "_rank" + std::to_string(world().rank()), single_args),
          log, nullptr);
      ASSERT_EQ(parallel.steps.size(), 20u);
      // f32: 1e-4. bf16 storage: a master that differs in its last f32 bit
      // (reduction order) can round to a neighbouring bf16 value, a 2^-8
      // step of that weight; over 20 steps that reaches ~1e-4 at P = 4,
      // mesh or not (pure expert parallelism measured 1.05e-4), so 1e-3.
      const double tolerance = variant == 1 ? 1e-3 : 1e-4;
      EXPECT_LT(max_relative(losses(parallel), losses(single)), tolerance);
      for (size_t i : {9, 19}) {
        EXPECT_NEAR(parallel.steps[i].eval_loss, single.steps[i].eval_loss,
                    tolerance * single.steps[i].eval_loss);
        EXPECT_EQ(parallel.steps[i].max_expert_load, single.steps[i].max_expert_load);
      }
      for (const train::StepMetrics& m : parallel.steps) {
        EXPECT_NEAR(m.comm_time_share,
                    m.comm_dp_time_share + m.comm_fsdp_time_share + m.comm_ep_time_share, 1e-9);
        EXPECT_EQ(m.comm_dp_time_share > 0, shape.data > 1);
        EXPECT_EQ(m.comm_fsdp_time_share > 0, shape.fsdp > 1);
        EXPECT_EQ(m.comm_ep_time_share > 0, shape.expert > 1);
      }
      if (world().rank() == 0) {
        EXPECT_NE(log.str().find("mesh " + shape.describe()), std::string::npos) << log.str();
        EXPECT_NE(log.str().find("(dp "), std::string::npos);
      }
    }
  }
}

// Stop at step 2, resume to 4: bitwise the steps of a straight run, on the
// meshes with an fsdp axis (their checkpoints hold shards) and data axis.
TEST(MeshCheckpoint, ResumeOnTheSameMeshIsBitwise) {
  const std::string dir = shared_temp_dir("mesh_resume");
  for (const MeshShape& shape : meshes()) {
    if (shape.expert == world().size()) continue;  // pure EP: ExpertParallelCheckpoint
    SCOPED_TRACE(shape.describe());
    std::vector<std::string> common = mesh_args(shape);
    for (const char* a : {"enable_checkpointing=true", "checkpoint_period=2",
                          "learning_rate_schedule_steps=4", "weight_dtype=bf16"}) {
      common.push_back(a);
    }
    std::ostringstream log;
    const std::string label = mesh_label(shape);
    const train::TrainResult straight =
        train::run_training(small_config(dir, "straight" + label, common), log, &world());
    std::vector<std::string> half = common;
    half.push_back("steps=2");
    train::run_training(small_config(dir, "resumed" + label, half), log, &world());
    const train::TrainResult resumed =
        train::run_training(small_config(dir, "resumed" + label, common), log, &world());
    EXPECT_EQ(resumed.resumed_from_step, 2);
    ASSERT_EQ(resumed.steps.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(resumed.steps[i].loss, straight.steps[i + 2].loss) << "step " << i + 3;
    }
    // Another mesh of the same process count is refused (config.yml's
    // mesh keys differ: the resume check names them).
    std::vector<std::string> other = {"ici_data_parallelism=1",
                                      "ici_fsdp_parallelism=1",
                                      "ici_expert_parallelism=" + std::to_string(world().size()),
                                      "enable_checkpointing=true",
                                      "checkpoint_period=2",
                                      "learning_rate_schedule_steps=4",
                                      "weight_dtype=bf16"};
    EXPECT_THROW(train::run_training(small_config(dir, "resumed" + label, other), log, &world()),
                 Error);
  }
}

// (1,2,2) trained 2 steps, resharded to one process, continues with the
// losses of the (1,2,2) run's steps 3 and 4.
TEST(MeshCheckpoint, ReshardToOneProcessContinuesTheLosses) {
  if (world().size() != 4) GTEST_SKIP() << "a (1,2,2) mesh needs 4 ranks";
  const std::string dir = shared_temp_dir("mesh_reshard");
  std::vector<std::string> common = {"ici_data_parallelism=1",   "ici_fsdp_parallelism=2",
                                     "ici_expert_parallelism=2", "enable_checkpointing=true",
                                     "checkpoint_period=2",      "learning_rate_schedule_steps=4"};
  std::ostringstream log;
  const train::TrainResult straight =
      train::run_training(small_config(dir, "straight", common), log, &world());
  std::vector<std::string> half = common;
  half.push_back("steps=2");
  train::run_training(small_config(dir, "source", half), log, &world());
  world().barrier();
  if (world().rank() == 0) {
    const std::string from = dir + "/source", to = dir + "/single";
    // Refusals first: nothing may be written.
    try {
      train::reshard_run(from, dir + "/three", MeshShape{1, 1, 3});
      FAIL() << "4 experts over 3 expert ranks must be refused";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("num_experts=4"), std::string::npos) << e.what();
    }
    try {
      train::reshard_run(from, dir + "/three", MeshShape{3, 1, 1});
      FAIL() << "8 sequences over 3 processes must be refused";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("global batch of 8"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(std::filesystem::exists(dir + "/three"));
    const train::ReshardResult r = train::reshard_run(from, to, MeshShape{1, 1, 1});
    EXPECT_EQ(r.step, 2);
    EXPECT_EQ(r.per_device_batch_size, 8);
    EXPECT_EQ(r.from, (MeshShape{1, 2, 2}));
    EXPECT_THROW(train::reshard_run(from, to, MeshShape{1, 1, 1}), Error);  // exists
    train::Settings settings;
    settings.apply_file(to + "/config.yml");
    settings.set("steps", "4");
    const train::TrainResult resumed = train::run_training(train::resolve(settings), log, nullptr);
    EXPECT_EQ(resumed.resumed_from_step, 2);
    ASSERT_EQ(resumed.steps.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_NEAR(resumed.steps[i].loss, straight.steps[i + 2].loss,
                  1e-4 * straight.steps[i + 2].loss)
          << "step " << i + 3;
    }
  }
  world().barrier();
}

// Pure expert parallelism's checkpoints from before the mesh (rank_R_of_P
// files without mesh metadata) still resume on (1, 1, P), bitwise, and
// reshard to one process.
TEST(MeshCheckpoint, PureExpertParallelCheckpointsWithoutAMeshStillRead) {
  if (world().size() != 2) GTEST_SKIP() << "written at P = 2";
  const std::string dir = shared_temp_dir("mesh_legacy");
  const std::vector<std::string> common = {"ici_expert_parallelism=2", "enable_checkpointing=true",
                                           "checkpoint_period=2", "learning_rate_schedule_steps=4"};
  std::ostringstream log;
  const train::TrainResult straight =
      train::run_training(small_config(dir, "straight", common), log, &world());
  std::vector<std::string> half = common;
  half.push_back("steps=2");
  train::run_training(small_config(dir, "legacy", half), log, &world());
  // Rewrite this rank's file as the format before meshes wrote it.
  const std::string path =
      train::checkpoint_path(dir + "/legacy", 2, train::shard_name(world().rank(), 2));
  train::CheckpointData data = train::load_checkpoint(path);
  ASSERT_EQ(data.mesh, (std::vector<int64_t>{1, 1, 2}));
  data.mesh.clear();
  data.fsdp_sizes.clear();
  data.expert_params.clear();
  train::save_checkpoint(path, data);
  ASSERT_TRUE(train::load_checkpoint(path).mesh.empty());
  world().barrier();
  if (world().rank() == 0) {  // reshard reads the mesh-less files as (1, 1, 2)
    const train::ReshardResult r =
        train::reshard_run(dir + "/legacy", dir + "/legacy_on_1", MeshShape{1, 1, 1});
    EXPECT_EQ(r.from, (MeshShape{1, 1, 2}));
  }
  world().barrier();
  const train::TrainResult resumed =
      train::run_training(small_config(dir, "legacy", common), log, &world());
  EXPECT_EQ(resumed.resumed_from_step, 2);
  ASSERT_EQ(resumed.steps.size(), 2u);
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ(resumed.steps[i].loss, straight.steps[i + 2].loss);
  if (world().rank() == 0) {
    train::Settings settings;
    settings.apply_file(dir + "/legacy_on_1/config.yml");
    settings.set("steps", "4");
    const train::TrainResult single = train::run_training(train::resolve(settings), log, nullptr);
    ASSERT_EQ(single.steps.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_NEAR(single.steps[i].loss, straight.steps[i + 2].loss,
                  1e-4 * straight.steps[i + 2].loss);
    }
  }
  world().barrier();
}

// Per-rank bytes of the non-expert parameters and their optimizer state on
// (1,4,1): within 1.1x of a quarter of one process's.
TEST(MeshMemory, FsdpHoldsAQuarterOfTheNonExpertState) {
  if (world().size() != 4) GTEST_SKIP() << "(1,4,1) needs 4 ranks";
  const std::string dir = shared_temp_dir("mesh_memory");
  std::ostringstream log;
  const train::TrainResult fsdp = train::run_training(
      small_config(dir, "fsdp4", {"ici_fsdp_parallelism=4", "steps=2", "weight_dtype=bf16"}), log,
      &world());
  const train::TrainResult one =
      train::run_training(small_config(dir, "one_rank" + std::to_string(world().rank()),
                                       {"steps=2", "weight_dtype=bf16"}),
                          log, nullptr);
  const double sharded =
      static_cast<double>(fsdp.non_expert_param_bytes + fsdp.non_expert_optimizer_bytes);
  const double whole =
      static_cast<double>(one.non_expert_param_bytes + one.non_expert_optimizer_bytes);
  EXPECT_GT(whole, 0);
  EXPECT_LE(sharded, 1.1 * whole / 4) << sharded << " vs " << whole;
  // The values alone: the shards of the matrices are bf16 as one process's
  // matrices are (2 bytes an element), not f32.
  EXPECT_LE(static_cast<double>(fsdp.non_expert_param_bytes),
            1.1 * static_cast<double>(one.non_expert_param_bytes) / 4);
  // ep = 1: the experts are sharded over fsdp too.
  const double expert_sharded =
      static_cast<double>(fsdp.expert_param_bytes + fsdp.expert_optimizer_bytes);
  const double expert_whole =
      static_cast<double>(one.expert_param_bytes + one.expert_optimizer_bytes);
  EXPECT_LE(expert_sharded, 1.1 * expert_whole / 4);
  if (world().rank() == 0) {
    std::printf(
        "[ measure ] non-expert params + optimizer state per rank: (1,1,1) %.0f B, "
        "(1,4,1) %.0f B (%.3f of a quarter); expert weights + state %.0f B -> %.0f B\n",
        whole, sharded, sharded / (whole / 4), expert_whole, expert_sharded);
  }
}

TEST(MeshLaunch, AxesMustMultiplyToTheProcesses) {
  const int n = world().size();
  try {
    train::check_launch(small_config("/tmp", "u", {"ici_data_parallelism=3"}), &world());
    FAIL() << "3 x 1 x 1 under " << n << " processes must be refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "ici_data_parallelism,ici_fsdp_parallelism,ici_expert_parallelism");
    EXPECT_EQ(e.value(), "3,1,1");
    EXPECT_NE(std::string(e.what()).find(std::to_string(n) + " process"), std::string::npos);
  }
  // -1 fills what is left.
  EXPECT_EQ(train::check_launch(small_config("/tmp", "u", {"ici_fsdp_parallelism=-1"}), &world()),
            (MeshShape{1, n, 1}));
  EXPECT_EQ(train::check_launch(
                small_config("/tmp", "u", {"ici_data_parallelism=-1", "ici_expert_parallelism=2"}),
                &world()),
            (MeshShape{n / 2, 1, 2}));
  // Two -1, a zero, an expert axis that does not divide the experts.
  try {
    small_config("/tmp", "u", {"ici_data_parallelism=-1", "ici_fsdp_parallelism=-1"});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.value(), "-1,-1,1");
  }
  try {
    small_config("/tmp", "u", {"ici_fsdp_parallelism=0"});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "ici_fsdp_parallelism");
  }
  try {
    train::check_launch(small_config("/tmp", "u", {"ici_expert_parallelism=-1", "num_experts=3"}),
                        &world());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "num_experts");
  }
}

}  // namespace
}  // namespace raggemm::testing
