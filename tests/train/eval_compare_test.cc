// Eval loss every eval_interval steps (log and metrics.jsonl),
// save_checkpoint_on_start, and `raggemm compare --target-loss` with eval
// loss, end to end through the CLI.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

std::string run_cli(const std::string& args, int* status) {
  FILE* pipe = popen((std::string(RAGGEMM_CLI_PATH) + " " + args + " 2>&1").c_str(), "r");
  std::string text;
  if (!pipe) return text;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) text.append(buffer, n);
  const int raw = pclose(pipe);
  *status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return text;
}

TEST(EvalCompareTest, EvalLossCheckpointOnStartAndTargetLoss) {
  const fs::path dir = fs::temp_directory_path() / ("raggemm_eval_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const std::string small =
      " base_emb_dim=32 base_mlp_dim=64 per_device_batch_size=2 max_target_length=16"
      " vocab_size=32 num_experts=4 base_num_query_heads=2 base_num_kv_heads=2 head_dim=16"
      " steps=6 eval_interval=3 eval_steps=2 base_output_directory=" + dir.string();
  int status = -1;
  std::string out = run_cli("train run_name=a enable_checkpointing=true "
                            "save_checkpoint_on_start=true" + small, &status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("| eval loss "), std::string::npos) << out;
  EXPECT_TRUE(fs::exists(dir / "a" / "checkpoints" / "step_00000000.ckpt"));
  EXPECT_TRUE(fs::exists(dir / "a" / "checkpoints" / "step_00000006.ckpt"));
  std::ifstream metrics(dir / "a" / "metrics.jsonl");
  std::vector<int64_t> eval_steps;
  for (std::string line; std::getline(metrics, line);) {
    const auto entry = nlohmann::json::parse(line);
    if (entry.contains("eval_loss")) {
      eval_steps.push_back(entry.at("step").get<int64_t>());
      EXPECT_GT(entry.at("eval_loss").get<double>(), 0.0);
    }
  }
  EXPECT_EQ(eval_steps, (std::vector<int64_t>{3, 6}));
  out = run_cli("train run_name=b learning_rate=0" + small, &status);
  ASSERT_EQ(status, 0) << out;
  // A target every run reaches at step 1 (loss < 100) and one none reaches.
  out = run_cli("compare " + (dir / "a").string() + " " + (dir / "b").string() +
                    " --target-loss 100",
                &status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("a                        loss: 1            eval_loss: 3"),
            std::string::npos)
      << out;
  out = run_cli("compare " + (dir / "a").string() + " --target-loss 0.001", &status);
  EXPECT_NE(out.find("loss: not reached  eval_loss: not reached"), std::string::npos) << out;
  fs::remove_all(dir);
}

}  // namespace
