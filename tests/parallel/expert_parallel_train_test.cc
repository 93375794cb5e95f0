// The trainer under expert parallelism (2 ranks): the launch checks, P = 2
// with B sequences per rank against P = 1 with 2B on the same global stream,
// and a checkpoint restart that continues exactly.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "parallel/mpi_test_env.h"
#include "raggemm/error.h"
#include "raggemm/train.h"

namespace raggemm::testing {
namespace {

train::TrainConfig small_config(const std::string& dir, const std::string& run,
                                std::vector<std::string> extra) {
  std::vector<std::string> args = {"base_output_directory=" + dir,
                                   "run_name=" + run,
                                   "steps=4",
                                   "per_device_batch_size=2",
                                   "max_target_length=16",
                                   "vocab_size=64",
                                   "base_emb_dim=32",
                                   "base_mlp_dim=32",
                                   "base_num_decoder_layers=2",
                                   "first_num_dense_layers=0",
                                   "num_experts=4",
                                   "num_experts_per_tok=2",
                                   "learning_rate=0.01",
                                   "warmup_steps_fraction=0.25"};
  // An extra key replaces the default above (a key given twice on the
  // command line is an error since issue 16).
  for (const std::string& setting : extra) {
    const std::string key = setting.substr(0, setting.find('=') + 1);
    std::erase_if(args, [&](const std::string& a) { return a.rfind(key, 0) == 0; });
  }
  args.insert(args.end(), extra.begin(), extra.end());
  return train::resolve(train::parse_train_arguments(args));
}

std::vector<double> losses(const train::TrainResult& result) {
  std::vector<double> out;
  for (const auto& step : result.steps) out.push_back(step.loss);
  return out;
}

TEST(ExpertParallelLaunch, CommunicatorSizeMustMatchTheKey) {
  const train::TrainConfig config = small_config("/tmp", "unused", {"ici_expert_parallelism=1"});
  try {
    train::check_launch(config, &world());
    FAIL() << "ici_expert_parallelism=1 under 2 processes must be refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "ici_expert_parallelism");
    EXPECT_EQ(e.value(), "1");
    EXPECT_NE(std::string(e.what()).find("2 process"), std::string::npos) << e.what();
  }
  const train::TrainConfig four = small_config("/tmp", "unused", {"ici_expert_parallelism=4"});
  EXPECT_THROW(train::check_launch(four, &world()), Error);
  EXPECT_NO_THROW(
      train::check_launch(small_config("/tmp", "unused", {"ici_expert_parallelism=2"}), &world()));
}

TEST(ExpertParallelLaunch, ExpertsMustDivideByTheProcesses) {
  try {
    small_config("/tmp", "unused", {"ici_expert_parallelism=2", "num_experts=3"});
    FAIL() << "3 experts over 2 processes must be refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "num_experts");
    EXPECT_EQ(e.value(), "3");
  }
  // A config built by hand past resolve() is caught at launch too.
  train::TrainConfig config = small_config("/tmp", "unused", {"ici_expert_parallelism=2"});
  config.moe.router.num_experts = 3;
  try {
    train::check_launch(config, &world());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "num_experts");
  }
}

struct TrainCase {
  const char* name;
  std::vector<std::string> extra;
};

class ExpertParallelTrainTest : public ::testing::TestWithParam<TrainCase> {};

// P = 2 with 2 sequences each = P = 1 with 4 sequences: the same global
// batches, so the same losses up to reduction order.
TEST_P(ExpertParallelTrainTest, TwoProcessesMatchOneWithTheGlobalBatch) {
  const TrainCase& c = GetParam();
  const std::string dir = shared_temp_dir(std::string("equiv_") + c.name);
  std::vector<std::string> parallel_args = c.extra, single_args = c.extra;
  parallel_args.push_back("ici_expert_parallelism=2");
  single_args.push_back("per_device_batch_size=4");
  std::ostringstream log;
  const train::TrainResult parallel =
      train::run_training(small_config(dir, "p2", parallel_args), log, &world());
  // Every rank trains the single-process reference alone, in its own run.
  const train::TrainResult single = train::run_training(
      small_config(dir, "p1_rank" + std::to_string(world().rank()), single_args), log, nullptr);
  ASSERT_EQ(parallel.steps.size(), 4u);
  ASSERT_EQ(single.steps.size(), 4u);
  EXPECT_LT(max_relative(losses(parallel), losses(single)), 1e-4);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(parallel.steps[i].aux_loss, single.steps[i].aux_loss,
                1e-4 * single.steps[i].aux_loss);
    EXPECT_EQ(parallel.steps[i].max_expert_load, single.steps[i].max_expert_load);
    EXPECT_GE(parallel.steps[i].comm_time_share, 0.0);
    EXPECT_LE(parallel.steps[i].comm_time_share, 1.0);
  }
  if (world().rank() == 0) {
    EXPECT_NE(log.str().find("expert parallelism: 2 processes"), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Exchanges, ExpertParallelTrainTest,
    ::testing::Values(TrainCase{"all_to_all", {"use_ring_of_experts=false"}},
                      TrainCase{"ring", {"use_ring_of_experts=true"}},
                      TrainCase{
                          "ring_sgd_sigmoid_bias_shared",
                          {"use_ring_of_experts=true", "opt_type=sgd", "routed_score_func=sigmoid",
                           "routed_bias=true", "shared_experts=1", "first_num_dense_layers=1"}},
                      TrainCase{"all_to_all_bf16_weights", {"weight_dtype=bf16"}}),
    [](const auto& info) { return std::string(info.param.name); });

// Stop after 2 steps with a checkpoint, resume to 4: steps 3 and 4 are
// exactly those of an uninterrupted 4-step run.
TEST(ExpertParallelCheckpoint, RestartWithTheSameProcessesContinuesExactly) {
  const std::string dir = shared_temp_dir("restart");
  std::ostringstream log;
  const std::vector<std::string> common = {"ici_expert_parallelism=2", "enable_checkpointing=true",
                                           "checkpoint_period=2", "learning_rate_schedule_steps=4"};
  const train::TrainResult straight =
      train::run_training(small_config(dir, "straight", common), log, &world());
  std::vector<std::string> first_half = common;
  first_half.push_back("steps=2");
  train::run_training(small_config(dir, "resumed", first_half), log, &world());
  const std::string shard = std::filesystem::path(dir) / "resumed" / "checkpoints" /
                            ("rank_" + std::to_string(world().rank()) + "_of_2") /
                            "step_00000002.ckpt";
  ASSERT_TRUE(std::filesystem::exists(shard)) << shard;
  EXPECT_EQ(train::verify_checkpoint(shard), 2);
  const train::TrainResult resumed =
      train::run_training(small_config(dir, "resumed", common), log, &world());
  EXPECT_EQ(resumed.resumed_from_step, 2);
  ASSERT_EQ(resumed.steps.size(), 2u);
  ASSERT_EQ(straight.steps.size(), 4u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(resumed.steps[i].step, straight.steps[i + 2].step);
    EXPECT_EQ(resumed.steps[i].loss, straight.steps[i + 2].loss) << "step " << i + 3;
  }
  // Checkpoints of another process count are refused, not misread or
  // silently ignored: a P = 2 run resumed at P = 1, and the other way round.
  if (world().rank() == 0) {
    try {
      train::run_training(small_config(dir, "resumed", {"enable_checkpointing=true"}), log,
                          nullptr);
      FAIL() << "a P = 2 run resumed by one process must be refused";
    } catch (const Error& e) {
      EXPECT_EQ(e.argument(), "ici_expert_parallelism");
    }
    // A shard file dropped where one process's checkpoints live.
    const std::filesystem::path single_dir = std::filesystem::path(dir) / "as_p1" / "checkpoints";
    std::filesystem::create_directories(single_dir);
    std::filesystem::copy_file(shard, single_dir / "step_00000002.ckpt");
    EXPECT_THROW(train::run_training(small_config(dir, "as_p1", {"enable_checkpointing=true"}), log,
                                     nullptr),
                 Error);
  }
  world().barrier();
  EXPECT_THROW(train::run_training(small_config(dir, "as_p1", common), log, &world()), Error);
}

}  // namespace
}  // namespace raggemm::testing
