// `raggemm plan` and `raggemm tune` end to end (RAGGEMM_CLI_PATH): the JSON
// layout, per-field sources with explicit keys and a cache, every way to get
// a tile wrong, and a tiny tune run that fills the cache plan then reads.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/bench_problem.h"
#include "cli/cli_harness.h"
#include "raggemm/moe_plan.h"

namespace raggemm {
namespace {

using testing::CliResult;
using testing::TempDir;
using testing::run_cli;

const std::vector<std::string> kBlock = {"--m", "512", "--embed", "96", "--mlp", "160", "--groups", "4"};

std::vector<std::string> plan_args(const TempDir& dir, std::vector<std::string> extra) {
  std::vector<std::string> args = {"plan"};
  args.insert(args.end(), kBlock.begin(), kBlock.end());
  args.insert(args.end(), {"--cache", dir.file("cache.json")});
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

nlohmann::json plan_json(const TempDir& dir, std::vector<std::string> extra) {
  extra.push_back("--json");
  const CliResult result = run_cli(dir, plan_args(dir, extra));
  EXPECT_EQ(result.exit_code, 0) << result.err;
  return nlohmann::json::parse(result.out);
}

TEST(PlanCli, JsonHasExactlyTheDocumentedFields) {
  TempDir dir;
  const nlohmann::json plan = plan_json(dir, {"--weight", "wo"});
  EXPECT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan["weight"], "wo");
  ASSERT_EQ(plan["passes"].size(), 3u);
  for (const char* pass : {"fwd", "dlhs", "drhs"}) {
    const nlohmann::json& p = plan["passes"][pass];
    EXPECT_EQ(p.size(), 6u) << p;
    for (const char* field : {"m", "k", "n", "buffers"}) EXPECT_GT(p[field].get<int64_t>(), 0);
    EXPECT_TRUE(p["kernel"] == "v1" || p["kernel"] == "v2");
    EXPECT_EQ(p["source"].size(), 5u);
    for (const char* field : {"m", "k", "n", "kernel", "buffers"}) EXPECT_EQ(p["source"][field], "heuristic");
  }
}

TEST(PlanCli, PerPassBufferCountShowsWithItsSource) {
  TempDir dir;
  const nlohmann::json plan =
      plan_json(dir, {"wi_input_buffer_count_dlhs=3", "input_buffer_count=2", "wo_input_buffer_count_fwd=4"});
  EXPECT_EQ(plan["passes"]["dlhs"]["buffers"], 3);
  EXPECT_EQ(plan["passes"]["dlhs"]["source"]["buffers"], "explicit");
  EXPECT_EQ(plan["passes"]["fwd"]["buffers"], 2);  // wo's key left wi alone
  const nlohmann::json heuristic = plan_json(dir, {"wo_input_buffer_count_fwd=4"});
  EXPECT_EQ(heuristic["passes"]["fwd"]["source"]["buffers"], "heuristic");
}

TEST(PlanCli, ExplicitKeysMapThroughTheTable) {
  TempDir dir;
  // wi drhs: m = embed_dim, k = batch_seq, n = mlp_dim.
  const nlohmann::json plan = plan_json(
      dir, {"wi_tile_drhs_embed_dim=24", "wi_tile_drhs_batch_seq=48", "wi_tile_drhs_mlp_dim=64", "use_gmm_v2_dlhs=true",
            "input_buffer_count=2", "wo_tile_fwd_mlp_dim=80"});
  EXPECT_EQ(plan["weight"], "wi");
  const nlohmann::json& drhs = plan["passes"]["drhs"];
  EXPECT_EQ(drhs["m"], 24);
  EXPECT_EQ(drhs["k"], 48);
  EXPECT_EQ(drhs["n"], 64);
  for (const char* field : {"m", "k", "n", "buffers"}) EXPECT_EQ(drhs["source"][field], "explicit");
  EXPECT_EQ(drhs["source"]["kernel"], "heuristic");
  EXPECT_EQ(plan["passes"]["dlhs"]["kernel"], "v2");
  EXPECT_EQ(plan["passes"]["dlhs"]["source"]["kernel"], "explicit");
  EXPECT_EQ(plan["passes"]["fwd"]["buffers"], 2);
  EXPECT_EQ(plan["passes"]["fwd"]["source"]["m"], "heuristic");  // wo's key left wi alone
}

TEST(PlanCli, CacheEntryIsUsedAndExplicitStillWins) {
  TempDir dir;
  TuneCache cache(dir.file("cache.json"));
  TuneEntry entry;
  entry.winner = TuneCandidate{Tiles{36, 40, 64}, KernelVersion::kV2, 4};
  cache.store(block_pass_shape(Weight::kWi, Pass::kForward, ModelDims{512, 96, 160}, 4), entry);

  const nlohmann::json cached = plan_json(dir, {});
  const nlohmann::json& fwd = cached["passes"]["fwd"];
  EXPECT_EQ(fwd["m"], 36);
  EXPECT_EQ(fwd["k"], 40);
  EXPECT_EQ(fwd["n"], 64);
  EXPECT_EQ(fwd["kernel"], "v2");
  EXPECT_EQ(fwd["buffers"], 4);
  for (const char* field : {"m", "k", "n", "kernel", "buffers"}) EXPECT_EQ(fwd["source"][field], "cache");
  EXPECT_EQ(cached["passes"]["dlhs"]["source"]["m"], "heuristic");

  // wi fwd's k is embed_dim: set it and only k turns explicit.
  const nlohmann::json mixed = plan_json(dir, {"wi_tile_fwd_embed_dim=16", "use_gmm_v2=false"});
  EXPECT_EQ(mixed["passes"]["fwd"]["k"], 16);
  EXPECT_EQ(mixed["passes"]["fwd"]["source"]["k"], "explicit");
  EXPECT_EQ(mixed["passes"]["fwd"]["source"]["m"], "cache");
  EXPECT_EQ(mixed["passes"]["fwd"]["kernel"], "v1");
  EXPECT_EQ(mixed["passes"]["fwd"]["source"]["kernel"], "explicit");

  const nlohmann::json ignored = plan_json(dir, {"--no-cache"});
  EXPECT_EQ(ignored["passes"]["fwd"]["source"]["m"], "heuristic");
}

struct BadArgs {
  std::vector<std::string> args;
  std::string argument;  // what the one error line must name
  std::string hint;      // and a part of its message
};

class PlanCliErrors : public ::testing::TestWithParam<BadArgs> {};

TEST_P(PlanCliErrors, OneLineNamingTheKey) {
  TempDir dir;
  const CliResult result = run_cli(dir, plan_args(dir, GetParam().args));
  EXPECT_EQ(result.exit_code, 2) << result.out;
  EXPECT_EQ(result.err.rfind("error: ", 0), 0u) << result.err;
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  EXPECT_NE(result.err.find(GetParam().argument), std::string::npos) << result.err;
  EXPECT_NE(result.err.find(GetParam().hint), std::string::npos) << result.err;
  EXPECT_TRUE(result.out.empty()) << result.out;
}

INSTANTIATE_TEST_SUITE_P(
    Args, PlanCliErrors,
    ::testing::Values(BadArgs{{"wi_tile_fwd_batch_seq=0"}, "wi_tile_fwd_batch_seq=0", "positive"},
                      BadArgs{{"wo_tile_dlhs_mlp_dim=-32"}, "wo_tile_dlhs_mlp_dim=-32", "positive"},
                      BadArgs{{"wi_tile_drhs_embed_dim=abc"}, "wi_tile_drhs_embed_dim=abc", "positive"},
                      BadArgs{{"wi_tile_drhs_embed_dim=64k"}, "wi_tile_drhs_embed_dim=64k", "positive"},
                      BadArgs{{"wi_tile_fwd_batchseq=64"}, "wi_tile_fwd_batchseq", "'wi_tile_fwd_batch_seq'"},
                      BadArgs{{"use_gmm_v2_dhls=true"}, "use_gmm_v2_dhls", "'use_gmm_v2_dlhs'"},
                      BadArgs{{"input_buffer_count=9"}, "input_buffer_count=9", "1..4"},
                      BadArgs{{"wo_input_buffer_count_drhs=0"}, "wo_input_buffer_count_drhs=0", "1..4"},
                      BadArgs{{"wi_tile_fwd_batch_seq"}, "wi_tile_fwd_batch_seq", "key=value"},
                      BadArgs{{"--weight", "w2"}, "--weight=w2", "wi or wo"}));

TEST(PlanCli, BadBlockDims) {
  TempDir dir;
  const CliResult zero_groups = run_cli(
      dir, {"plan", "--m", "512", "--embed", "96", "--mlp", "160", "--groups", "0", "--cache", dir.file("c.json")});
  EXPECT_EQ(zero_groups.exit_code, 2);
  EXPECT_NE(zero_groups.err.find("--groups"), std::string::npos) << zero_groups.err;
  const CliResult missing = run_cli(dir, {"plan", "--m", "512", "--embed", "96", "--mlp", "160"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("--groups"), std::string::npos) << missing.err;
}

TEST(TuneCli, FillsTheCacheThatPlanThenReads) {
  TempDir dir;
  std::vector<std::string> args = {"tune"};
  args.insert(args.end(), kBlock.begin(), kBlock.end());
  args.insert(args.end(), {"--dist", "zipf:1.2", "--budget-s", "1.5", "--cache", dir.file("cache.json"), "--quiet"});
  const CliResult result = run_cli(dir, args);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  for (const char* pair : {"wi fwd", "wi dlhs", "wi drhs", "wo fwd", "wo dlhs", "wo drhs"}) {
    EXPECT_NE(result.out.find(pair), std::string::npos) << pair << "\n" << result.out;
  }
  EXPECT_EQ(TuneCache(dir.file("cache.json")).size(), 6u);  // embed != mlp: six distinct problems
  for (const char* weight : {"wi", "wo"}) {
    const nlohmann::json plan = plan_json(dir, {"--weight", weight});
    for (const char* pass : {"fwd", "dlhs", "drhs"}) {
      for (const char* field : {"m", "k", "n", "kernel", "buffers"}) {
        EXPECT_EQ(plan["passes"][pass]["source"][field], "cache") << weight << " " << pass << " " << field;
      }
    }
  }
}

TEST(TuneCli, BadArguments) {
  TempDir dir;
  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
           {"--budget-s", "-1"}, {"--dist", "zipf"}, {"--dtype", "f64"}, {"--m", "0"}}) {
    std::vector<std::string> args = {"tune"};
    args.insert(args.end(), kBlock.begin(), kBlock.end());
    args.insert(args.end(), {"--cache", dir.file("cache.json"), flag, value});
    const CliResult result = run_cli(dir, args);
    EXPECT_EQ(result.exit_code, 2) << flag;
    EXPECT_NE(result.err.find(flag), std::string::npos) << result.err;
  }
}

}  // namespace
}  // namespace raggemm

namespace raggemm {
namespace {

// `raggemm bench` (and gmm, tgmm, which share the code path) take the tiles,
// kernel and buffers the user did not give from the tune cache, unless --no-cache.
// The problem of `bench gmm --m 128 --k 64 --n 96 --groups 4`, as the cache
// keys it, stored in a cache at `path` with the winner (24,32,64), v2.
GmmShape store_bench_entry(const std::string& path, int buffers, Quantization quantization) {
  TuneEntry entry;
  entry.winner = TuneCandidate{Tiles{24, 32, 64}, KernelVersion::kV2, buffers};
  GmmShape shape;
  shape.pass = Pass::kForward;
  shape.m = 128;
  shape.k = 64;
  shape.n = 96;
  shape.groups = 4;
  shape.quantization = quantization;
  TuneCache(path).store(shape, entry);
  return shape;
}

TEST(RawOpCli, BenchUsesTheCacheUnlessNoCache) {
  TempDir dir;
  const std::string cache_path = dir.file("cache.json");
  GmmShape shape = store_bench_entry(cache_path, 3, std::nullopt);
  ::setenv("RAGGEMM_TUNE_CACHE", cache_path.c_str(), 1);
  const std::vector<std::string> bench = {"bench", "gmm", "--m", "128", "--k", "64", "--n", "96", "--groups", "4",
                                          "--threads", "1", "--reps", "1", "--json",
                                          // The roofline probes (seconds under ASan) are not what
                                          // this test checks.
                                          "--no-roofline"};
  auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = bench;
    args.insert(args.end(), extra.begin(), extra.end());
    const CliResult result = run_cli(dir, args);
    EXPECT_EQ(result.exit_code, 0) << result.err;
    return nlohmann::json::parse(result.out);
  };
  const nlohmann::json cached = run({});
  EXPECT_EQ(cached["tiles"], "24,32,64");
  EXPECT_EQ(cached["kernel"], "v2");
  EXPECT_EQ(cached["buffers"], 3);
  const nlohmann::json explicit_kernel = run({"--kernel", "v1", "--tiles", "8,16,32"});
  EXPECT_EQ(explicit_kernel["tiles"], "8,16,32");
  EXPECT_EQ(explicit_kernel["kernel"], "v1");
  EXPECT_EQ(explicit_kernel["buffers"], 3);
  for (const char* field : {"m", "k", "n", "kernel", "buffers"}) {
    EXPECT_EQ(cached["source"][field], "cache") << field;
  }
  EXPECT_EQ(explicit_kernel["source"]["m"], "explicit");
  EXPECT_EQ(explicit_kernel["source"]["kernel"], "explicit");
  EXPECT_EQ(explicit_kernel["source"]["buffers"], "cache");

  // Without the cache, what the user left unset comes from the heuristic on
  // the run's own group sizes, as the ops resolve unset tiles.
  const nlohmann::json uncached = run({"--no-cache"});
  shape.group_sizes = bench::draw_group_sizes(128, 4, bench::parse_group_dist("uniform", "--dist"));
  const ResolvedPassConfig heuristic = resolve_problem(shape, {}, nullptr, 1);
  EXPECT_EQ(uncached["tiles"], std::to_string(heuristic.tiles.m) + "," + std::to_string(heuristic.tiles.k) +
                                   "," + std::to_string(heuristic.tiles.n));
  EXPECT_EQ(uncached["kernel"], kernel_name(heuristic.kernel));
  EXPECT_EQ(uncached["buffers"], 1);
  for (const char* field : {"m", "k", "n", "kernel", "buffers"}) {
    EXPECT_EQ(uncached["source"][field], "heuristic") << field;
  }
  const nlohmann::json partly_set = run({"--no-cache", "--tiles", "8,16,32", "--buffers", "2"});
  EXPECT_EQ(partly_set["tiles"], "8,16,32");
  EXPECT_EQ(partly_set["kernel"], kernel_name(heuristic.kernel));
  EXPECT_EQ(partly_set["source"]["kernel"], "heuristic");
  EXPECT_EQ(partly_set["source"]["buffers"], "explicit");
  ::unsetenv("RAGGEMM_TUNE_CACHE");
}

// A quantized call looks up the entries tuned for its recipe, under the key
// the trainer's gmm_autotune and the tuner write (quant=int8, quant=fp8_full),
// and no other recipe's or the plain problem's.
TEST(RawOpCli, QuantizedBenchFindsItsRecipesEntry) {
  TempDir dir;
  const std::string cache_path = dir.file("cache.json");
  store_bench_entry(cache_path, 2, QuantRecipe::kInt8);
  ::setenv("RAGGEMM_TUNE_CACHE", cache_path.c_str(), 1);
  auto source_of_m = [&](const char* dtype) {
    const CliResult result =
        run_cli(dir, {"bench", "gmm", "--m", "128", "--k", "64", "--n", "96", "--groups", "4",
                      "--threads", "1", "--reps", "1", "--json", "--no-roofline", "--dtype", dtype});
    EXPECT_EQ(result.exit_code, 0) << result.err;
    const nlohmann::json json = nlohmann::json::parse(result.out);
    if (json["source"]["m"] == "cache") {
      EXPECT_EQ(json["tiles"], "24,32,64");
    }
    return json["source"]["m"].get<std::string>();
  };
  EXPECT_EQ(source_of_m("int8"), "cache");
  EXPECT_EQ(source_of_m("fp8_e4m3"), "heuristic");
  EXPECT_EQ(source_of_m("f32"), "heuristic");
  ::unsetenv("RAGGEMM_TUNE_CACHE");
}

}  // namespace
}  // namespace raggemm
