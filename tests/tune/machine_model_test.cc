// The heuristic held against recorded machine models (tests/tune/machines/:
// the Zen 3 of ../shared/measurements/zen3-avx2, the Zen 4 of
// docs/performance.md's family 25 model 17 section (32 KiB / 1 MiB),
// this project's Zen 5, a 32 KiB / 1 MiB / 1.375 MiB-per-core
// Skylake-X-like one, and the Intel Xeon of docs/performance.md's model 167
// section: 48 KiB / 2 MiB and a host's 480 MiB L3 as a 2-vCPU guest sees
// it): on every shape
// of the benchmark table and the held-out MoE shapes, for every pass and
// both kernel generations, the working sets it plans fit the caches of the
// machine it plans for. Plus the model's own parsing of sysfs text.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "cli/bench_problem.h"
#include "kernels/machine_model.h"
#include "tune/heuristic.h"

namespace raggemm::tune {
namespace {

MachineModel load_machine(const std::string& name) {
  std::ifstream in(std::string(RAGGEMM_SOURCE_DIR) + "/tests/tune/machines/" + name + ".json");
  EXPECT_TRUE(in.good()) << name;
  const nlohmann::json j = nlohmann::json::parse(in);
  MachineModel m;
  m.cpu_model = j.at("cpu_model");
  m.caches = {j.at("l1d").get<int64_t>(), j.at("l2").get<int64_t>(), j.at("l3").get<int64_t>()};
  m.l3_sharing_cpus = j.at("l3_sharing_cpus");
  m.line_bytes = j.at("line_bytes");
  m.isa = j.at("isa");
  m.mr = j.at("mr");
  m.nr = j.at("nr");
  m.vector_bytes = j.at("vector_bytes");
  m.cores = j.at("cores");
  m.dram_read_gbps = j.at("dram_read_gbps");
  m.threads = 2;
  return m;
}

constexpr int64_t kF32 = 4;

GmmShape table_shape(Pass pass, int64_t k, int64_t n, int64_t groups, std::vector<int32_t> sizes) {
  GmmShape shape;
  shape.pass = pass;
  shape.m = 4096;
  shape.k = k;
  shape.n = n;
  shape.groups = groups;
  shape.group_sizes = std::move(sizes);
  return shape;
}

struct Plan {
  Pass pass;
  Tiles extents, tiles;
};

// The working sets the drivers hold (docs/tiling.md), from the tiles alone:
//  - A micro-panel (mr x k): streamed through L1 against each B
//    micro-panel; gmm and dlhs keep it in L1;
//  - B micro-panel (k x nr): re-read by every A micro-panel from L2;
//  - packed A block (m x k) with one B micro-panel: L2 (gmm, dlhs);
//  - packed A and B blocks together: this thread's share of the L3.
void expect_fits(const MachineModel& machine, const Plan& plan, const std::string& what) {
  const Tiles& t = plan.tiles;
  const int64_t a_micro = machine.mr * t.k * kF32;
  const int64_t b_micro = t.k * machine.nr * kF32;
  const int64_t a_block = t.m * t.k * kF32;
  const int64_t b_block = t.k * t.n * kF32;
  EXPECT_LE(b_micro, machine.caches.l2 / 4) << what;
  if (plan.pass == Pass::kGradRhs) {
    EXPECT_LE(a_micro, machine.caches.l2 / 4) << what;
  } else {
    EXPECT_LE(a_micro, machine.caches.l1d) << what;
    EXPECT_LE(a_block + b_micro, machine.caches.l2) << what;
  }
  EXPECT_LE(a_block + b_block, machine.l3_per_thread()) << what;
  // Tiles whole register tiles where the extent allows.
  if (plan.extents.m >= machine.mr) {
    EXPECT_EQ(t.m % machine.mr, 0) << what;
  }
  if (plan.extents.n >= machine.nr) {
    EXPECT_EQ(t.n % machine.nr, 0) << what;
  }
  EXPECT_GT(t.k, 0) << what;
}

class RecordedMachine : public ::testing::TestWithParam<std::string> {};

TEST_P(RecordedMachine, PlannedWorkingSetsFitTheCaches) {
  const MachineModel machine = load_machine(GetParam());
  // The benchmark table's (K, N) and held-out MoE shapes from 512 to 2048.
  const std::vector<std::pair<int64_t, int64_t>> shapes = {
      {1024, 1024}, {2048, 768}, {512, 2048}, {2048, 512}, {2048, 2048}, {512, 512}};
  int plans = 0;
  for (const auto& [k, n] : shapes) {
    for (int64_t groups : {8, 32, 64, 128}) {
      for (const char* dist : {"uniform", "zipf:1.2", "empty:0.25"}) {
        const std::vector<int32_t> sizes =
            bench::draw_group_sizes(4096, groups, bench::parse_group_dist(dist, "dist"));
        for (Pass pass : kAllPasses) {
          for (std::optional<KernelVersion> kernel :
               {std::optional<KernelVersion>(), std::optional(KernelVersion::kV1)}) {
            const GmmShape shape = table_shape(pass, k, n, groups, sizes);
            const Plan plan{pass, kernel_extents(shape), heuristic(shape, machine, kernel).tiles};
            expect_fits(machine, plan,
                        GetParam() + " " + pass_name(pass) + " K=" + std::to_string(k) +
                            " N=" + std::to_string(n) + " G=" + std::to_string(groups) + " " +
                            dist + (kernel ? " v1" : " v2") + " tiles " +
                            std::to_string(plan.tiles.m) + "," + std::to_string(plan.tiles.k) +
                            "," + std::to_string(plan.tiles.n));
            ++plans;
          }
        }
      }
    }
  }
  EXPECT_EQ(plans, 6 * 4 * 3 * 3 * 2);
}

INSTANTIATE_TEST_SUITE_P(Machines, RecordedMachine,
                         ::testing::Values("zen3-avx2", "zen4-avx512", "zen5-avx512",
                                           "skylakex-like", "xeon-amx-avx512"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return name;
                         });

// Smaller caches give tiles no larger: the Zen 3 plans within the Zen 5's.
TEST(RecordedMachines, SmallerCachesNeverGiveLargerWorkingSets) {
  const MachineModel zen3 = load_machine("zen3-avx2"), zen5 = load_machine("zen5-avx512");
  for (Pass pass : kAllPasses) {
    const GmmShape shape = table_shape(pass, 1024, 1024, 32, {});
    const Tiles small = heuristic(shape, zen3).tiles, large = heuristic(shape, zen5).tiles;
    EXPECT_LE(small.m * small.k, large.m * large.k) << pass_name(pass);
  }
}

TEST(MachineModel, ParsesSysfsText) {
  EXPECT_EQ(kernels::parse_cache_size("48K"), 48 * 1024);
  EXPECT_EQ(kernels::parse_cache_size("1375K"), 1375 * 1024);
  EXPECT_EQ(kernels::count_cpu_list("0-1"), 2);
  EXPECT_EQ(kernels::count_cpu_list("0-3,8,10-11"), 7);
  EXPECT_EQ(kernels::count_cpu_list("5"), 1);
  EXPECT_EQ(kernels::count_cpu_list(""), 0);
  EXPECT_EQ(kernels::count_cpu_list("x"), 0);
}

TEST(MachineModel, ThisMachineIsConsistent) {
  const MachineModel m = kernels::this_machine_model(2);
  EXPECT_EQ(m.threads, 2);
  EXPECT_GE(m.caches.l2, m.caches.l1d);
  EXPECT_GE(m.caches.l3, m.caches.l2);
  EXPECT_EQ(m.nr, 2 * m.vector_bytes / 4);  // the register tile is two vectors wide
  EXPECT_GT(m.mr, 0);
  EXPECT_FALSE(m.isa.empty());
  EXPECT_GE(m.cores, 1);
  EXPECT_EQ(m.line_bytes % 16, 0);
  MachineModel shared = m;
  shared.l3_sharing_cpus = 0;  // unknown sharers: every thread shares it
  EXPECT_EQ(shared.l3_per_thread(), m.caches.l3 / 2);
  shared.l3_sharing_cpus = 1;  // one L3 per thread
  EXPECT_EQ(shared.l3_per_thread(), m.caches.l3);
}

}  // namespace
}  // namespace raggemm::tune
