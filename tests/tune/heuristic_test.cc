// The heuristic on a pinned machine model: cache-size rules, alignment,
// the kernel choice from group sizes, and the v1 waste model.
#include "tune/heuristic.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

namespace raggemm::tune {
namespace {

MachineModel zen_like() {
  MachineModel machine;
  machine.caches = CacheSizes{48 * 1024, 1024 * 1024, 32 * 1024 * 1024};
  machine.mr = 12;
  machine.nr = 32;
  machine.threads = 2;
  return machine;
}

GmmShape gmm_shape(Pass pass, int64_t m, int64_t k, int64_t n, std::vector<int32_t> sizes) {
  GmmShape shape;
  shape.pass = pass;
  shape.m = m;
  shape.k = k;
  shape.n = n;
  shape.groups = static_cast<int64_t>(sizes.size());
  shape.group_sizes = std::move(sizes);
  return shape;
}

std::vector<int32_t> skewed(int groups, int64_t total) {
  // Group g gets a share proportional to 1/(g+1)^1.2, the rest to group 0.
  std::vector<double> weights(static_cast<size_t>(groups));
  for (int g = 0; g < groups; ++g) weights[static_cast<size_t>(g)] = 1.0 / std::pow(g + 1.0, 1.2);
  const double sum = std::accumulate(weights.begin(), weights.end(), 0.0);
  std::vector<int32_t> sizes(static_cast<size_t>(groups));
  int64_t used = 0;
  for (int g = 1; g < groups; ++g) {
    sizes[static_cast<size_t>(g)] = static_cast<int32_t>(static_cast<double>(total) * weights[static_cast<size_t>(g)] / sum);
    used += sizes[static_cast<size_t>(g)];
  }
  sizes[0] = static_cast<int32_t>(total - used);
  return sizes;
}

TEST(Heuristic, V1WasteCountsRepeatedVisitsOfStraddlingTiles) {
  EXPECT_DOUBLE_EQ(v1_row_waste({4, 4}, 4), 0.0);
  EXPECT_DOUBLE_EQ(v1_row_waste({2, 6}, 4), 0.5);     // tile [0,4) visited twice
  EXPECT_DOUBLE_EQ(v1_row_waste({0, 8, 0}, 4), 0.0);  // empty groups cost nothing
  EXPECT_DOUBLE_EQ(v1_row_waste({3}, 4), 0.0);        // a partial last tile is not waste
  EXPECT_DOUBLE_EQ(v1_row_waste({1, 1, 1, 1}, 4), 3.0);
  EXPECT_DOUBLE_EQ(v1_row_waste({}, 4), 0.0);
}

TEST(Heuristic, TilesRespectTheCachesAndTheRegisterTile) {
  const MachineModel machine = zen_like();
  for (Pass pass : kAllPasses) {
    for (std::vector<int32_t> sizes : {std::vector<int32_t>(32, 128), skewed(32, 4096), skewed(128, 4096)}) {
      SCOPED_TRACE(pass_name(pass));
      const ResolvedPassConfig config = heuristic(gmm_shape(pass, 4096, 1024, 1024, sizes), machine);
      const Tiles& t = config.tiles;
      EXPECT_GT(t.m, 0);
      EXPECT_GT(t.k, 0);
      EXPECT_GT(t.n, 0);
      EXPECT_EQ(t.n % machine.nr, 0) << t.n;
      // The A micro-panel fits a quarter of L1 (forward v2) and the B
      // micro-panel an eighth of L2; the packed A block fits 40% of L2
      // (tgmm's, half of L3 over the threads); each thread's packed B block
      // half of L3. (dlhs takes whole rows of its contracted dim instead,
      // and tgmm its longest group, while the B micro-panel stays within
      // its share.)
      if (pass == Pass::kGradLhs) {
        EXPECT_EQ(t.k, 1024);
      } else if (pass == Pass::kForward) {
        EXPECT_LE(machine.mr * t.k * 4, machine.caches.l1d / 2);
      }
      EXPECT_LE(machine.nr * t.k * 4, machine.caches.l2 / 8);
      if (pass == Pass::kGradRhs) {  // v2 tgmm: A block within the thread's L3 share
        EXPECT_LE((t.m - machine.mr) * t.k * 4 * machine.threads, machine.caches.l3 / 2);
      } else if (pass == Pass::kGradLhs) {  // m sized for the regular k (512)
        EXPECT_LE(t.m * 512 * 4, machine.caches.l2 * 4 / 10);
      } else {
        EXPECT_LE(t.m * t.k * 4, machine.caches.l2 * 4 / 10);
      }
      EXPECT_LE(t.k * t.n * 4 * machine.threads, machine.caches.l3 / 2);
      EXPECT_EQ(config.input_buffer_count, 1);
      for (PlanSource source : {config.source.m, config.source.k, config.source.n, config.source.kernel,
                                config.source.buffers}) {
        EXPECT_EQ(source, PlanSource::kHeuristic);
      }
    }
  }
}

TEST(Heuristic, PicksV2AndFitsAnExplicitV1ToItsWaste) {
  const MachineModel machine = zen_like();
  // v2 measured faster even on balanced groups, where v1 wastes nothing.
  const GmmShape balanced_shape = gmm_shape(Pass::kForward, 4096, 1024, 1024, std::vector<int32_t>(32, 128));
  EXPECT_EQ(heuristic(balanced_shape, machine).kernel, KernelVersion::kV2);
  for (Pass pass : kAllPasses) {
    const ResolvedPassConfig config = heuristic(gmm_shape(pass, 4096, 1024, 1024, skewed(128, 4096)), machine);
    EXPECT_EQ(config.kernel, KernelVersion::kV2) << pass_name(pass);
  }
  // An explicit v1 on balanced groups: a tile dividing the group, no waste.
  const ResolvedPassConfig balanced = heuristic(balanced_shape, machine, KernelVersion::kV1);
  EXPECT_EQ(balanced.kernel, KernelVersion::kV1);
  EXPECT_EQ(128 % balanced.tiles.m, 0) << balanced.tiles.m;
  GmmShape tgmm_balanced = balanced_shape;
  tgmm_balanced.pass = Pass::kGradRhs;
  const ResolvedPassConfig tgmm_v1 = heuristic(tgmm_balanced, machine, KernelVersion::kV1);
  EXPECT_EQ(tgmm_v1.kernel, KernelVersion::kV1);
  EXPECT_EQ(128 % tgmm_v1.tiles.k, 0) << tgmm_v1.tiles.k;
}

// tgmm (v2) contracts each group from its first token: k takes the longest
// group up to the B micro-panel's bound (1024 here, past the A micro-panel's
// L1 bound of 512) whatever the other groups' sizes, and m the whole K while
// the packed A block fits its thread's share of L3.
TEST(Heuristic, TgmmTakesLongContractionsAndWholeRows) {
  const MachineModel machine = zen_like();
  const ResolvedPassConfig skew = heuristic(gmm_shape(Pass::kGradRhs, 4096, 1024, 1024, skewed(128, 4096)), machine);
  EXPECT_EQ(skew.tiles.k, 1024);
  EXPECT_EQ(skew.tiles.m, 1032);  // K = 1024 in one MR-aligned tile
  EXPECT_EQ(skew.tiles.n, 1024);
  // Groups all shorter than the bound: k is the longest, rounded to 16.
  const ResolvedPassConfig small =
      heuristic(gmm_shape(Pass::kGradRhs, 4096, 1024, 1024, std::vector<int32_t>(128, 32)), machine);
  EXPECT_EQ(small.tiles.k, 32);
  // A K too long for the L3 share splits evenly: 16 MiB / 2 threads / (1024 * 4) = 2048 rows.
  const ResolvedPassConfig wide = heuristic(gmm_shape(Pass::kGradRhs, 4096, 7168, 1024, skewed(8, 4096)), machine);
  EXPECT_EQ(wide.tiles.k, 1024);
  EXPECT_EQ(wide.tiles.m, 1800);  // 7168 / 4 = 1792, rounded up to MR
}

TEST(Heuristic, MTileFollowsTheGroupSizes) {
  const MachineModel machine = zen_like();
  const ResolvedPassConfig small =
      heuristic(gmm_shape(Pass::kForward, 4096, 1024, 1024, skewed(128, 4096)), machine);
  const ResolvedPassConfig large =
      heuristic(gmm_shape(Pass::kForward, 4096, 1024, 1024, skewed(8, 4096)), machine);
  EXPECT_LT(small.tiles.m, large.tiles.m);
  EXPECT_EQ(small.tiles.m % machine.mr, 0);
}

// The rules on this machine's numbers give the tiles measured best at the
// benchmark shapes (docs/tiling.md): a 512-deep k, whole-N n, m = 192.
TEST(Heuristic, ZenLikeMachineGetsTheMeasuredShapes) {
  const MachineModel machine = zen_like();
  const ResolvedPassConfig fwd =
      heuristic(gmm_shape(Pass::kForward, 4096, 1024, 1024, skewed(8, 4096)), machine);
  EXPECT_EQ(fwd.tiles.k, 512);  // groups larger than an m-tile: the regular k
  EXPECT_EQ(fwd.tiles.n, 1024);
  EXPECT_EQ(fwd.tiles.m, 192);
  // Groups that fit one m-tile: the forward v2 takes a quarter of L1, m
  // still sized from the regular k.
  const ResolvedPassConfig small_groups =
      heuristic(gmm_shape(Pass::kForward, 4096, 1024, 1024, skewed(128, 4096)), machine);
  EXPECT_EQ(small_groups.tiles.k, 256);
  EXPECT_LE(small_groups.tiles.m * 512 * 4, machine.caches.l2 * 4 / 10);
  const ResolvedPassConfig fwd_v1 = heuristic(
      gmm_shape(Pass::kForward, 4096, 1024, 1024, skewed(8, 4096)), machine, KernelVersion::kV1);
  EXPECT_EQ(fwd_v1.tiles.k, 512);
  const ResolvedPassConfig wide =
      heuristic(gmm_shape(Pass::kForward, 4096, 2048, 768, skewed(8, 4096)), machine);
  EXPECT_EQ(wide.tiles.k, 512);
  EXPECT_EQ(wide.tiles.n, 768);
  // dlhs contracts N = 768 of the stored rows: one whole-row slice.
  const ResolvedPassConfig dlhs =
      heuristic(gmm_shape(Pass::kGradLhs, 4096, 768, 2048, skewed(8, 4096)), machine);
  EXPECT_EQ(dlhs.tiles.k, 768);
  EXPECT_EQ(dlhs.tiles.n, 2048);
  const ResolvedPassConfig long_rows =
      heuristic(gmm_shape(Pass::kGradLhs, 4096, 4096, 1024, skewed(8, 4096)), machine);
  EXPECT_EQ(long_rows.tiles.k, 512);  // beyond the B micro-panel's share
}

// An explicit v1 on groups no tile aligns with: a tile that wastes fewer
// recomputed rows than the v2 tile would (and stays register-tile aligned).
TEST(Heuristic, ExplicitV1TradesWasteForVisits) {
  const MachineModel machine = zen_like();
  for (Pass pass : {Pass::kForward, Pass::kGradLhs}) {
    const GmmShape shape = gmm_shape(pass, 4096, 1024, 1024, skewed(32, 4096));
    const std::vector<int64_t> sizes = representative_group_sizes(shape);
    const ResolvedPassConfig v1 = heuristic(shape, machine, KernelVersion::kV1);
    const ResolvedPassConfig v2 = heuristic(shape, machine, KernelVersion::kV2);
    EXPECT_EQ(v1.kernel, KernelVersion::kV1);
    EXPECT_EQ(v2.kernel, KernelVersion::kV2);
    EXPECT_EQ(v1.tiles.m % machine.mr, 0);
    EXPECT_LT(v1.tiles.m, v2.tiles.m);
    EXPECT_LT(v1_row_waste(sizes, v1.tiles.m), v1_row_waste(sizes, v2.tiles.m));
    EXPECT_GT(v1.tiles.m, machine.mr);  // visit overheads rule out the smallest tile
  }
}

TEST(Heuristic, BiggerL1GivesLongerK) {
  MachineModel small = zen_like();
  MachineModel big = zen_like();
  small.caches.l1d = 16 * 1024;
  big.caches.l1d = 128 * 1024;
  const GmmShape shape = gmm_shape(Pass::kForward, 4096, 4096, 1024, std::vector<int32_t>(8, 512));
  EXPECT_LT(heuristic(shape, small).tiles.k, heuristic(shape, big).tiles.k);
}

TEST(Heuristic, EmptyAndTinyProblemsStillGetPositiveTiles) {
  const MachineModel machine = zen_like();
  for (Pass pass : kAllPasses) {
    for (const GmmShape& shape : {gmm_shape(pass, 0, 0, 0, {0, 0}), gmm_shape(pass, 3, 5, 7, {1, 0, 2}),
                                  gmm_shape(pass, 16, 8, 8, {})}) {
      const ResolvedPassConfig config = heuristic(shape, machine);
      EXPECT_GT(config.tiles.m, 0);
      EXPECT_GT(config.tiles.k, 0);
      EXPECT_GT(config.tiles.n, 0);
    }
  }
}

TEST(CpuInfo, ParsesCacheSizes) {
  EXPECT_EQ(parse_cache_size("48K"), 48 * 1024);
  EXPECT_EQ(parse_cache_size("32768K"), 32 * 1024 * 1024);
  EXPECT_EQ(parse_cache_size("2M"), 2 * 1024 * 1024);
  EXPECT_EQ(parse_cache_size("65536"), 65536);
  EXPECT_EQ(parse_cache_size(""), 0);
  EXPECT_EQ(parse_cache_size("big"), 0);
  const CacheSizes& sizes = cache_sizes();
  EXPECT_GT(sizes.l1d, 0);
  EXPECT_GE(sizes.l2, sizes.l1d);
  EXPECT_GE(sizes.l3, sizes.l2);
  EXPECT_FALSE(cpu_model_name().empty());
}

}  // namespace
}  // namespace raggemm::tune
