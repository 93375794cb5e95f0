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
#include "kernels/microkernel_registry.h"

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
                                  std::string("--check"), std::string("--no-cache"),
                                  std::string("--bandwidth-mib"), std::string("4")}) {
    args.push_back(flag);
  }
  if (!c.tiles.empty()) args.insert(args.end(), {"--tiles", c.tiles});
  return args;
}

// The peers at their best (issue 14, item 1; item 2's roofline): every peer
// names its library and kernel, the best figures are the maxima over the
// peers that passed their check, the ratios divide by them, and the
// roofline fields agree with their definition.
void expect_peers_contract(const nlohmann::json& j) {
  const nlohmann::json& peers = j.at("peers");
  ASSERT_TRUE(peers.is_array());
  double best_dense = 0, best_loop = 0;
  bool openblas = false, onednn = false;
  for (const nlohmann::json& peer : peers) {
    const std::string name = peer.at("name");
    EXPECT_TRUE(name == "openblas" || name == "onednn") << name;
    openblas = openblas || name == "openblas";
    onednn = onednn || name == "onednn";
    EXPECT_FALSE(peer.at("kernel").get<std::string>().empty()) << peer.dump();
    for (const char* field : {"dense_gflops", "loop_gflops"}) {
      const double value = peer.at(field).get<double>();
      EXPECT_TRUE(std::isfinite(value) && value > 0) << peer.dump();
    }
    EXPECT_TRUE(peer.at("checked").get<bool>()) << peer.dump();
    best_dense = std::max(best_dense, peer.at("dense_gflops").get<double>());
    best_loop = std::max(best_loop, peer.at("loop_gflops").get<double>());
  }
  EXPECT_TRUE(openblas) << peers.dump();
  // oneDNN is a peer wherever the build found it; the JSON says when not.
  const bool no_onednn = j.contains("peer_notes") &&
                         j.at("peer_notes").dump().find("no oneDNN") != std::string::npos;
  EXPECT_TRUE(onednn || no_onednn) << j.dump();
  EXPECT_EQ(j.at("openblas_core"), peers.back().at("child_process").get<bool>()
                                       ? peers[peers.size() - 2].at("kernel")
                                       : peers.back().at("kernel"));
  EXPECT_NEAR(j.at("peer_dense_best_gflops").get<double>(), best_dense, 1e-9 * best_dense);
  EXPECT_NEAR(j.at("peer_loop_best_gflops").get<double>(), best_loop, 1e-9 * best_loop);
  const double ours = j.at("ours_gflops").get<double>();
  EXPECT_NEAR(j.at("ratio_vs_best_dense").get<double>(), ours / best_dense, 1e-9 * ours);
  EXPECT_NEAR(j.at("ratio_vs_best_loop").get<double>(), ours / best_loop, 1e-9 * ours);
  EXPECT_GE(j.at("openblas_loop_gflops").get<double>(), 0.0);
  EXPECT_LE(j.at("openblas_dense_gflops").get<double>(), best_dense * (1 + 1e-12));
  // bound_ms = max(flops / fma peak, bytes / bandwidth); efficiency = bound / ours.
  const double flops = 2.0 * j.at("m").get<double>() * j.at("k").get<double>() *
                       j.at("n").get<double>();
  const double bound = std::max(flops / (j.at("fma_peak_gflops").get<double>() * 1e9),
                                j.at("bytes_moved").get<double>() /
                                    (j.at("dram_read_gbps").get<double>() * 1e9)) *
                       1e3;
  EXPECT_NEAR(j.at("bound_ms").get<double>(), bound, 1e-9 * bound);
  EXPECT_NEAR(j.at("roofline_efficiency").get<double>(),
              bound / j.at("ours_median_ms").get<double>(), 1e-9);
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
  expect_peers_contract(j);
}

TEST_P(CliBenchTest, TablePrintsRatios) {
  TempDir dir;
  CliResult result = run_cli(dir, bench_args(GetParam()));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("ratio vs loop"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("openblas dense"), std::string::npos) << result.out;
}

// bytes_moved: every operand read once in its storage type, the f32 output
// written once; for gmm at m = 96, k = 24, n = 20, 6 groups.
TEST(CliBenchRoofline, BytesMovedCountsEachOperandOnce) {
  TempDir dir;
  for (const std::string dtype : {"f32", "bf16"}) {
    CliResult result = run_cli(dir, {"bench", "gmm", "--m", "96", "--k", "24", "--n", "20",
                                     "--groups", "6", "--dtype", dtype, "--reps", "1",
                                     "--threads", "1", "--bandwidth-mib", "4", "--json"});
    ASSERT_EQ(result.exit_code, 0) << result.err;
    const nlohmann::json j = nlohmann::json::parse(result.out);
    const double element = dtype == "f32" ? 4 : 2;
    EXPECT_EQ(j.at("bytes_moved").get<double>(), element * (96 * 24 + 6 * 24 * 20) + 4 * 96 * 20)
        << dtype;
  }
  CliResult result = run_cli(dir, {"bench", "gmm", "--m", "32", "--k", "8", "--n", "8",
                                   "--reps", "1", "--no-roofline", "--json"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_FALSE(nlohmann::json::parse(result.out).contains("bound_ms"));
}

// --bf16-kernel: bf16 runs report the bf16 kernel that ran (WIDEN when
// forced so, the dot kernel when forced to it), and `raggemm peak` reports
// the dot kernel's rate and what bf16 passes run on by default.
TEST(CliBenchBf16Kernel, ForcedKernelIsTheOneReported) {
  TempDir dir;
  // The SIMD dot kernels this CPU runs, fastest first (the registry's order).
  std::vector<std::string> simd;
  for (const auto& kernel : kernels::bf16_microkernels()) {
    if (std::string(kernel.target) != "SCALAR") simd.push_back(kernel.target);
  }
  std::vector<std::string> kernels = {"WIDEN", "SCALAR", "auto"};
  kernels.insert(kernels.end(), simd.begin(), simd.end());
  auto one_of_auto = [&](const std::string& name) {
    return name == "WIDEN" || std::find(simd.begin(), simd.end(), name) != simd.end();
  };
  for (const std::string& kernel : kernels) {
    CliResult result = run_cli(dir, {"bench", "gmm", "--m", "48", "--k", "16", "--n", "24",
                                     "--groups", "3", "--dtype", "bf16", "--bf16-kernel", kernel,
                                     "--reps", "1", "--threads", "1", "--no-roofline",
                                     "--check", "--json"});
    ASSERT_EQ(result.exit_code, 0) << kernel << ": " << result.err;
    const nlohmann::json j = nlohmann::json::parse(result.out);
    const std::string ran = j.at("bf16_microkernel");
    if (kernel == "auto") {
      EXPECT_TRUE(one_of_auto(ran)) << ran;
    } else {
      EXPECT_EQ(ran, kernel);
    }
  }
  CliResult peak = run_cli(dir, {"peak", "--threads", "1", "--no-bandwidth", "--json"});
  ASSERT_EQ(peak.exit_code, 0) << peak.err;
  const nlohmann::json p = nlohmann::json::parse(peak.out);
  const std::string selected = p.at("bf16_selected");
  EXPECT_TRUE(one_of_auto(selected)) << selected;
  if (!simd.empty()) {
    // The probe times the kernel bf16 runs on, else the fastest candidate.
    const std::string probed = p.at("bf16_microkernel_target");
    EXPECT_EQ(probed, selected == "WIDEN" ? simd.front() : selected);
    EXPECT_GT(p.at("bf16_microkernel_gflops").get<double>(), 0);
  } else {
    EXPECT_EQ(selected, "WIDEN");
  }
}

// An environment that restricts OpenBLAS to a lesser core than the CPU
// supports: the restricted peer is labelled, and an unrestricted one runs in
// a child process, checked, and counts as a peer; --no-child-peer keeps it
// out.
TEST(CliBenchPeers, RestrictedOpenBlasIsLiftedInAChildProcess) {
  if (!__builtin_cpu_supports("avx")) GTEST_SKIP() << "no core better than Prescott here";
  TempDir dir;
  const std::vector<std::string> args = {"bench", "dlhs", "--m", "64", "--k", "16", "--n",
                                         "24", "--groups", "3", "--reps", "1", "--threads", "1",
                                         "--no-roofline", "--json"};
  CliResult result = run_cli(dir, args, "export OPENBLAS_CORETYPE=Prescott");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  nlohmann::json j = nlohmann::json::parse(result.out);
  EXPECT_EQ(j.at("openblas_core"), "Prescott");
  bool restricted = false, lifted = false;
  for (const nlohmann::json& peer : j.at("peers")) {
    if (peer.at("name") != "openblas") continue;
    if (peer.contains("restricted_by")) {
      restricted = true;
      EXPECT_EQ(peer.at("restricted_by"), "OPENBLAS_CORETYPE=Prescott");
      EXPECT_FALSE(peer.at("child_process").get<bool>());
    }
    if (peer.at("child_process").get<bool>()) {
      lifted = true;
      EXPECT_NE(peer.at("kernel"), "Prescott");
      EXPECT_TRUE(peer.at("checked").get<bool>());
    }
  }
  EXPECT_TRUE(restricted && lifted) << j.dump();

  std::vector<std::string> no_child = args;
  no_child.push_back("--no-child-peer");
  result = run_cli(dir, no_child, "export OPENBLAS_CORETYPE=Prescott");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  j = nlohmann::json::parse(result.out);
  for (const nlohmann::json& peer : j.at("peers")) {
    EXPECT_FALSE(peer.at("child_process").get<bool>()) << peer.dump();
  }
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
