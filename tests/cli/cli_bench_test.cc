// `raggemm bench` end to end on small problems: --json prints one object with
// every field the issue names (and they agree with the flags), --check finds
// ours equal to the OpenBLAS loop, and the table form prints the ratios.
// No assertion on speed: only that times and rates are positive and finite.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/cli_harness.h"

namespace raggemm::testing {
namespace {

struct BenchCase {
  std::string op, dist, dtype, kernel, tiles, threads;
};

std::ostream& operator<<(std::ostream& out, const BenchCase& c) {
  return out << c.op << "_" << c.dist << "_" << c.dtype << "_" << c.kernel;
}

std::vector<std::string> bench_args(const BenchCase& c) {
  std::vector<std::string> args = {"bench", c.op, "--m", "96", "--k", "24", "--n", "20"};
  for (const std::string& flag : {std::string("--groups"), std::string("6"), std::string("--dist"),
                                  c.dist, std::string("--dtype"), c.dtype,
                                  std::string("--kernel"), c.kernel, std::string("--threads"),
                                  c.threads, std::string("--reps"), std::string("3"),
                                  std::string("--check"), std::string("--no-cache")}) {
    args.push_back(flag);
  }
  if (!c.tiles.empty()) args.insert(args.end(), {"--tiles", c.tiles});
  return args;
}

class CliBenchTest : public ::testing::TestWithParam<BenchCase> {};

TEST_P(CliBenchTest, JsonHasEveryFieldAndCheckPasses) {
  const BenchCase& c = GetParam();
  TempDir dir;
  std::vector<std::string> args = bench_args(c);
  args.push_back("--json");
  CliResult result = run_cli(dir, args);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err, "");
  ASSERT_EQ(std::count(result.out.begin(), result.out.end(), '\n'), 1) << result.out;
  nlohmann::json j = nlohmann::json::parse(result.out);
  EXPECT_EQ(j.at("op"), c.op);
  EXPECT_EQ(j.at("m"), 96);
  EXPECT_EQ(j.at("k"), 24);
  EXPECT_EQ(j.at("n"), 20);
  EXPECT_EQ(j.at("groups"), 6);
  EXPECT_EQ(j.at("dist"), c.dist);
  EXPECT_EQ(j.at("dtype"), c.dtype);
  EXPECT_EQ(j.at("kernel"), c.kernel);
  // Tiles not given are resolved (tune cache, else the heuristic) and shown.
  const std::string tiles = j.at("tiles");
  if (!c.tiles.empty()) {
    EXPECT_EQ(tiles, c.tiles);
  }
  EXPECT_EQ(std::count(tiles.begin(), tiles.end(), ','), 2) << tiles;
  EXPECT_EQ(j.at("source").at("m"), c.tiles.empty() ? "heuristic" : "explicit");
  EXPECT_EQ(j.at("source").at("kernel"), "explicit");
  EXPECT_EQ(j.at("threads"), std::stoi(c.threads));
  for (const char* field : {"ours_gflops", "openblas_loop_gflops", "openblas_dense_gflops",
                            "ratio_vs_loop", "ratio_vs_dense", "peak_rss_mib", "ours_median_ms",
                            "openblas_loop_median_ms", "openblas_dense_median_ms", "tensors_mib"}) {
    ASSERT_TRUE(j.contains(field)) << field;
    const double value = j.at(field).get<double>();
    EXPECT_TRUE(std::isfinite(value) && value > 0) << field << " = " << value;
  }
  EXPECT_NEAR(j.at("ratio_vs_loop").get<double>(),
              j.at("ours_gflops").get<double>() / j.at("openblas_loop_gflops").get<double>(), 1e-9);
  EXPECT_LE(j.at("check_rel_error").get<double>(), 1e-5);
}

TEST_P(CliBenchTest, TablePrintsRatios) {
  TempDir dir;
  CliResult result = run_cli(dir, bench_args(GetParam()));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("ratio vs loop"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("openblas dense"), std::string::npos) << result.out;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CliBenchTest,
    ::testing::Values(BenchCase{"gmm", "uniform", "f32", "v1", "", "1"},
                      BenchCase{"gmm", "zipf:1.2", "bf16", "v2", "16,8,8", "2"},
                      BenchCase{"dlhs", "empty:0.5", "f32", "v2", "", "2"},
                      BenchCase{"dlhs", "uniform", "bf16", "v1", "8,8,8", "1"},
                      BenchCase{"tgmm", "empty:0.5", "f32", "v1", "8,16,8", "2"},
                      BenchCase{"tgmm", "zipf:2", "bf16", "v2", "", "1"}));

}  // namespace
}  // namespace raggemm::testing
