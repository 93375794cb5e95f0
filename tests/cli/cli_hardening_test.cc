// Issue 16 at the CLI: a tune cache whose entries parse but cannot run
// (gmm, tgmm and plan go on with the heuristic, warn once per entry naming
// the cache and the entry, plan shows the entry as rejected), outputs too
// large for the machine, and the one tile limit stated in every command's
// help.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/cli_harness.h"
#include "raggemm/npy.h"
#include "raggemm/moe_plan.h"
#include "support/gmm_case.h"

namespace raggemm::testing {
namespace {

constexpr int64_t kM = 64, kEmbed = 32, kMlp = 48, kGroups = 4;

// A cache holding the three wi passes of (kM, kEmbed, kMlp, kGroups) -- the
// shapes gmm and tgmm of [kM, kEmbed] x [kGroups, kEmbed, kMlp] look up --
// every winner set to tiles of 2^40.
void write_poisoned_cache(const std::string& path) {
  TuneCache cache(path);
  for (Pass pass : kAllPasses) {
    TuneEntry entry;
    entry.winner = TuneCandidate{Tiles{8, 8, 8}, KernelVersion::kV1, 1};
    cache.store(block_pass_shape(Weight::kWi, pass, {kM, kEmbed, kMlp}, kGroups), entry);
  }
  nlohmann::json root = nlohmann::json::parse(read_text(path));
  ASSERT_EQ(root["entries"].size(), 3u);
  for (auto& [key, value] : root["entries"].items()) {
    for (const char* field : {"m", "k", "n"}) value["winner"][field] = int64_t{1} << 40;
  }
  write_text(path, root.dump(1));
}

size_t count_of(const std::string& text, const std::string& part) {
  size_t count = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++count;
  return count;
}

double max_abs_difference(const Tensor& a, const Tensor& b) {
  double worst = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    worst = std::max(worst, std::abs(double(a.as<float>()[i]) - b.as<float>()[i]));
  }
  return worst;
}

TEST(CliTuneCache, OutOfRangeEntriesAreSkippedWithOneWarningEach) {
  TempDir dir;
  const std::string cache = dir.file("cache.json");
  write_poisoned_cache(cache);
  const std::vector<int64_t> sizes = {16, 0, 40, 8};
  const Tensor lhs = random_tensor({kM, kEmbed}, DType::kF32, 1);
  const Tensor rhs = random_tensor({kGroups, kEmbed, kMlp}, DType::kF32, 2);
  const Tensor dout = random_tensor({kM, kMlp}, DType::kF32, 3);
  write_npy(dir.file("l.npy"), lhs);
  write_npy(dir.file("r.npy"), rhs);
  write_npy(dir.file("d.npy"), dout);
  write_npy(dir.file("s.npy"), sizes_tensor(sizes));
  const std::string env = "export RAGGEMM_TUNE_CACHE=" + shell_quote(cache);

  CliResult gmm = run_cli(
      dir, {"gmm", "--lhs", "l.npy", "--rhs", "r.npy", "--group-sizes", "s.npy", "--out", "o.npy"},
      env);
  ASSERT_EQ(gmm.exit_code, 0) << gmm.err;
  EXPECT_EQ(count_of(gmm.err, "warning: tune_cache: " + cache + ": entry"), 1u) << gmm.err;
  EXPECT_EQ(count_of(gmm.err, "\n"), 1u) << gmm.err;
  EXPECT_NE(gmm.err.find("op=gmm;pass=fwd"), std::string::npos) << gmm.err;
  EXPECT_NE(gmm.err.find("65536"), std::string::npos) << gmm.err;
  EXPECT_LT(max_abs_difference(read_npy(dir.file("o.npy"), "out"), reference_gmm(lhs, rhs, sizes, {})),
            1e-3);

  CliResult tgmm = run_cli(
      dir, {"tgmm", "--lhs", "l.npy", "--dout", "d.npy", "--group-sizes", "s.npy", "--out", "t.npy"},
      env);
  ASSERT_EQ(tgmm.exit_code, 0) << tgmm.err;
  EXPECT_EQ(count_of(tgmm.err, "warning: tune_cache: " + cache + ": entry"), 1u) << tgmm.err;
  EXPECT_NE(tgmm.err.find("pass=drhs"), std::string::npos) << tgmm.err;
  EXPECT_LT(max_abs_difference(read_npy(dir.file("t.npy"), "out"), reference_tgmm(lhs, dout, sizes, {})),
            1e-3);

  CliResult plan = run_cli(dir, {"plan", "--m", std::to_string(kM), "--embed",
                                 std::to_string(kEmbed), "--mlp", std::to_string(kMlp), "--groups",
                                 std::to_string(kGroups), "--cache", cache, "--json"});
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  const nlohmann::json passes = nlohmann::json::parse(plan.out)["passes"];
  for (const char* pass : {"fwd", "dlhs", "drhs"}) {
    ASSERT_TRUE(passes[pass].contains("cache_rejected")) << plan.out;
    EXPECT_NE(passes[pass]["cache_rejected"].get<std::string>().find("65536"), std::string::npos);
    EXPECT_EQ(passes[pass]["source"]["m"], "heuristic") << plan.out;
    EXPECT_LE(passes[pass]["m"].get<int64_t>(), kMaxTile);
  }
  EXPECT_EQ(count_of(plan.err, "warning: tune_cache: "), 3u) << plan.err;
  CliResult table = run_cli(dir, {"plan", "--m", std::to_string(kM), "--embed",
                                  std::to_string(kEmbed), "--mlp", std::to_string(kMlp),
                                  "--groups", std::to_string(kGroups), "--cache", cache});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_EQ(count_of(table.out, "cache entry rejected"), 3u) << table.out;
}

// Small input files whose dims multiply into an output no machine holds
// (4 TB here) are refused naming the flags, before allocating (item 3).
TEST(CliSizes, OutputsTooLargeForTheMachineAreRefused) {
  TempDir dir;
  constexpr int64_t kWide = 1000000;
  write_npy(dir.file("tall.npy"), Tensor(DType::kF32, {kWide, 1}));
  write_npy(dir.file("wide_rhs.npy"), Tensor(DType::kF32, {1, 1, kWide}));
  write_npy(dir.file("wide.npy"), Tensor(DType::kF32, {1, kWide}));
  write_npy(dir.file("one_group.npy"), sizes_tensor({1}));
  struct Case {
    std::vector<std::string> args;
    std::string error_start;
  };
  for (const Case& c : std::vector<Case>{
           {{"gmm", "--lhs", "tall.npy", "--rhs", "wide_rhs.npy", "--group-sizes", "one_group.npy",
             "--out", "o.npy"},
            "error: --lhs,--rhs=1000000,1000000: the output [M,N]"},
           {{"tgmm", "--lhs", "wide.npy", "--dout", "wide.npy", "--group-sizes", "one_group.npy",
             "--out", "o.npy"},
            "error: --group-sizes,--lhs,--dout=1,1000000,1000000: the output [G,K,N]"}}) {
    const CliResult result = run_cli(dir, c.args);
    EXPECT_EQ(result.exit_code, 2) << result.err;
    EXPECT_EQ(result.err.rfind(c.error_start, 0), 0u) << result.err;
    EXPECT_NE(result.err.find("physical memory"), std::string::npos) << result.err;
    EXPECT_FALSE(std::filesystem::exists(dir.file("o.npy")));
  }
}

TEST(CliTileLimit, HelpStatesTheLimitTheCheckEnforces) {
  TempDir dir;
  for (const char* command : {"gmm", "tgmm", "bench"}) {
    const CliResult help = run_cli(dir, {command, "--help"});
    ASSERT_EQ(help.exit_code, 0) << command;
    EXPECT_NE(help.out.find("each in [1, 65536]"), std::string::npos) << help.out;
    EXPECT_EQ(help.out.find("1073741824"), std::string::npos) << help.out;
  }
}

TEST(CliTrainHelp, ListsTheAliases) {
  TempDir dir;
  const CliResult help = run_cli(dir, {"train", "--help"});
  ASSERT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("tokamax_gmm_autotune = gmm_autotune"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("allow_config_change_on_resume (default false)"), std::string::npos);
}

}  // namespace
}  // namespace raggemm::testing

namespace raggemm::testing {
namespace {

// Issue 20: quantized passes tune. `raggemm train gmm_autotune=true
// quantization=...` tunes every expert (weight, pass) shape of the recipe
// instead of stopping, and the cache holds one entry per pass, keyed by
// the recipe.
TEST(CliTrain, AutotuneTunesQuantizedPasses) {
  for (const std::string recipe : {"fp8_full", "int8"}) {
    SCOPED_TRACE(recipe);
    TempDir dir;
    const std::string cache = dir.file("cache.json");
    const CliResult run = run_cli(
        dir,
        {"train", std::string(RAGGEMM_SOURCE_DIR) + "/configs/base.yml", "steps=2",
         "gmm_autotune=true", "quantization=" + recipe, "base_emb_dim=64", "base_mlp_dim=64",
         "base_num_decoder_layers=1", "num_experts=4", "base_output_directory=" + dir.file("run")},
        "export RAGGEMM_TUNE_CACHE=" + shell_quote(cache));
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_EQ(run.err.find("not supported"), std::string::npos) << run.err;
    std::ifstream in(cache);
    ASSERT_TRUE(in) << "no tune cache written";
    const nlohmann::json json = nlohmann::json::parse(in);
    int quantized_entries = 0;
    for (const auto& [key, entry] : json.at("entries").items()) {
      if (key.find("quant=" + recipe) != std::string::npos) ++quantized_entries;
    }
    EXPECT_EQ(quantized_entries, 3) << json.dump();  // fwd, dlhs, drhs of the one expert shape
  }
}

}  // namespace
}  // namespace raggemm::testing
