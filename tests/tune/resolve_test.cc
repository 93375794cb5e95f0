// Resolution order, field by field: explicit > cache > heuristic, through the
// raw-problem API and through a block plan; invalid settings from the API.
#include <unistd.h>

#include <filesystem>
#include <gtest/gtest.h>
#include <string>

#include "raggemm/error.h"
#include "raggemm/moe_plan.h"

namespace raggemm {
namespace {

using S = PlanSource;

std::string fresh_path() {
  static int counter = 0;
  const std::string dir = testing::TempDir() + "/raggemm_resolve_" + std::to_string(::getpid()) + "_" +
                          std::to_string(counter++);
  std::filesystem::remove_all(dir);
  return dir + "/cache.json";
}

struct Sources {
  S m, k, n, kernel, buffers;
};

void expect_sources(const ResolvedPassConfig& config, Sources expected) {
  EXPECT_EQ(config.source.m, expected.m);
  EXPECT_EQ(config.source.k, expected.k);
  EXPECT_EQ(config.source.n, expected.n);
  EXPECT_EQ(config.source.kernel, expected.kernel);
  EXPECT_EQ(config.source.buffers, expected.buffers);
}

class Resolve : public testing::Test {
 protected:
  void SetUp() override {
    shape_.pass = Pass::kGradLhs;
    shape_.m = 512;
    shape_.k = 256;
    shape_.n = 384;
    shape_.groups = 4;
    cache_ = std::make_unique<TuneCache>(fresh_path());
    // A cached winner unlike anything the heuristic would pick.
    TuneEntry entry;
    entry.winner = TuneCandidate{Tiles{7, 9, 11}, KernelVersion::kV2, 3};
    entry.timings.push_back(CandidateTiming{entry.winner, 1e-3, true});
    cache_->store(shape_, entry);
  }
  GmmShape shape_;
  std::unique_ptr<TuneCache> cache_;
};

TEST_F(Resolve, HeuristicWhenNothingElse) {
  const ResolvedPassConfig config = resolve_problem(shape_, {}, nullptr);
  expect_sources(config, {S::kHeuristic, S::kHeuristic, S::kHeuristic, S::kHeuristic, S::kHeuristic});
  EXPECT_GT(config.tiles.m, 0);
  EXPECT_GT(config.tiles.k, 0);
  EXPECT_GT(config.tiles.n, 0);
  const ResolvedPassConfig heuristic = heuristic_config(shape_);
  EXPECT_EQ(config.tiles, heuristic.tiles);
}

TEST_F(Resolve, CacheBeatsHeuristic) {
  const ResolvedPassConfig config = resolve_problem(shape_, {}, cache_.get());
  expect_sources(config, {S::kCache, S::kCache, S::kCache, S::kCache, S::kCache});
  EXPECT_EQ(config.tiles, (Tiles{7, 9, 11}));
  EXPECT_EQ(config.kernel, KernelVersion::kV2);
  EXPECT_EQ(config.input_buffer_count, 3);
}

TEST_F(Resolve, CacheMissFallsBackToHeuristic) {
  GmmShape other = shape_;
  other.n = 385;
  const ResolvedPassConfig config = resolve_problem(other, {}, cache_.get());
  expect_sources(config, {S::kHeuristic, S::kHeuristic, S::kHeuristic, S::kHeuristic, S::kHeuristic});
}

TEST_F(Resolve, ExplicitBeatsACacheHitPerField) {
  struct Case {
    KernelOverrides overrides;
    Sources sources;
    Tiles tiles;
    KernelVersion kernel;
    int buffers;
  };
  const Case cases[] = {
      {{Tiles{64, 0, 0}, {}, {}}, {S::kExplicit, S::kCache, S::kCache, S::kCache, S::kCache}, {64, 9, 11}, KernelVersion::kV2, 3},
      {{Tiles{0, 32, 0}, {}, {}}, {S::kCache, S::kExplicit, S::kCache, S::kCache, S::kCache}, {7, 32, 11}, KernelVersion::kV2, 3},
      {{Tiles{0, 0, 48}, {}, {}}, {S::kCache, S::kCache, S::kExplicit, S::kCache, S::kCache}, {7, 9, 48}, KernelVersion::kV2, 3},
      {{Tiles{}, KernelVersion::kV1, {}}, {S::kCache, S::kCache, S::kCache, S::kExplicit, S::kCache}, {7, 9, 11}, KernelVersion::kV1, 3},
      {{Tiles{}, {}, 1}, {S::kCache, S::kCache, S::kCache, S::kCache, S::kExplicit}, {7, 9, 11}, KernelVersion::kV2, 1},
      {{Tiles{16, 24, 40}, KernelVersion::kV1, 2}, {S::kExplicit, S::kExplicit, S::kExplicit, S::kExplicit, S::kExplicit}, {16, 24, 40}, KernelVersion::kV1, 2},
  };
  for (const Case& c : cases) {
    const ResolvedPassConfig config = resolve_problem(shape_, c.overrides, cache_.get());
    expect_sources(config, c.sources);
    EXPECT_EQ(config.tiles, c.tiles);
    EXPECT_EQ(config.kernel, c.kernel);
    EXPECT_EQ(config.input_buffer_count, c.buffers);
  }
}

TEST_F(Resolve, ExplicitBeatsHeuristicWithoutCache) {
  KernelOverrides overrides;
  overrides.tiles.n = 40;
  const ResolvedPassConfig config = resolve_problem(shape_, overrides, nullptr);
  expect_sources(config, {S::kHeuristic, S::kHeuristic, S::kExplicit, S::kHeuristic, S::kHeuristic});
  EXPECT_EQ(config.tiles.n, 40);
}

TEST_F(Resolve, BlockPlanGoesThroughTheTable) {
  // wi dlhs is gmm with transposed rhs: op (M, K, N) = (tokens, mlp, embed).
  const ModelDims dims{512, 384, 256};
  ASSERT_EQ(TuneCache::key(block_pass_shape(Weight::kWi, Pass::kGradLhs, dims, 4)), TuneCache::key(shape_));
  // embed_dim is wi dlhs's kernel n: only n turns explicit.
  const BlockPlan plan = parse_plan_settings({"wi_tile_dlhs_embed_dim=80", "wo_tile_dlhs_embed_dim=96"});
  const ResolvedPassConfig config = resolve(plan.wi, Weight::kWi, Pass::kGradLhs, dims, 4, {}, cache_.get());
  expect_sources(config, {S::kCache, S::kCache, S::kExplicit, S::kCache, S::kCache});
  EXPECT_EQ(config.tiles, (Tiles{7, 9, 80}));
  // The same plan for wo fwd (a different op shape): heuristic, nothing explicit.
  const ResolvedPassConfig wo_fwd = resolve(plan.wo, Weight::kWo, Pass::kForward, dims, 4, {}, cache_.get());
  expect_sources(wo_fwd, {S::kHeuristic, S::kHeuristic, S::kHeuristic, S::kHeuristic, S::kHeuristic});
}

TEST_F(Resolve, PerPassInputBufferCountResolvesLikeTheTiles) {
  // wi dlhs hits the cache (buffers 3); the per-pass key beats it, the global
  // key beats it when no per-pass key names the pass, and a pass the cache
  // lacks takes the heuristic's count unless a key is set.
  const ModelDims dims{512, 384, 256};
  const auto buffers_of = [&](const std::vector<std::string>& settings, Weight weight, Pass pass) {
    const BlockPlan plan = parse_plan_settings(settings);
    return resolve(plan.weight(weight), weight, pass, dims, 4, {}, cache_.get());
  };
  ResolvedPassConfig config = buffers_of({}, Weight::kWi, Pass::kGradLhs);
  EXPECT_EQ(config.input_buffer_count, 3);
  EXPECT_EQ(config.source.buffers, S::kCache);
  config = buffers_of({"wi_input_buffer_count_dlhs=1"}, Weight::kWi, Pass::kGradLhs);
  EXPECT_EQ(config.input_buffer_count, 1);
  EXPECT_EQ(config.source.buffers, S::kExplicit);
  EXPECT_EQ(config.source.m, S::kCache);  // only the buffers turn explicit
  config = buffers_of({"wi_input_buffer_count_dlhs=1", "input_buffer_count=4"}, Weight::kWi,
                      Pass::kGradLhs);
  EXPECT_EQ(config.input_buffer_count, 1);
  config = buffers_of({"wo_input_buffer_count_dlhs=1", "input_buffer_count=4"}, Weight::kWi,
                      Pass::kGradLhs);
  EXPECT_EQ(config.input_buffer_count, 4);
  EXPECT_EQ(config.source.buffers, S::kExplicit);
  config = buffers_of({"wi_input_buffer_count_dlhs=1"}, Weight::kWo, Pass::kForward);
  EXPECT_EQ(config.source.buffers, S::kHeuristic);
  EXPECT_EQ(config.input_buffer_count, heuristic_config(block_pass_shape(Weight::kWo, Pass::kForward, dims, 4)).input_buffer_count);
}

TEST_F(Resolve, OptionsCarryTheResolvedConfig) {
  const ResolvedPassConfig config = resolve_problem(shape_, {}, cache_.get());
  const GmmOptions dlhs = gmm_options(config, Pass::kGradLhs);
  EXPECT_TRUE(dlhs.transpose_rhs);
  EXPECT_EQ(dlhs.tiles, config.tiles);
  EXPECT_EQ(dlhs.kernel, KernelVersion::kV2);
  EXPECT_EQ(dlhs.input_buffer_count, 3);
  EXPECT_FALSE(gmm_options(config, Pass::kForward).transpose_rhs);
  EXPECT_EQ(tgmm_options(config).tiles, config.tiles);
}

TEST_F(Resolve, InvalidApiSettingsNameTheirKey) {
  const ModelDims dims{512, 384, 256};
  for (int64_t bad : {int64_t{0}, int64_t{-64}}) {
    GmmPlan plan;
    plan.pass(Pass::kGradRhs).tiles.mlp_dim = bad;
    try {
      resolve(plan, Weight::kWo, Pass::kGradRhs, dims, 4, {}, nullptr);
      FAIL() << "accepted tile " << bad;
    } catch (const Error& error) {
      EXPECT_EQ(error.argument(), "wo_tile_drhs_mlp_dim");
      EXPECT_EQ(error.value(), std::to_string(bad));
    }
  }
  KernelOverrides negative;
  negative.tiles.k = -8;
  EXPECT_THROW(resolve_problem(shape_, negative, nullptr), Error);
  KernelOverrides buffers;
  buffers.input_buffer_count = 5;
  EXPECT_THROW(resolve_problem(shape_, buffers, nullptr), Error);
  GmmShape mismatched = shape_;
  mismatched.group_sizes = {1, 2};
  EXPECT_THROW(resolve_problem(mismatched, {}, nullptr), Error);
}

}  // namespace
}  // namespace raggemm
