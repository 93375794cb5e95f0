// The profiler's trace: Trace Event Format rules (tests/trace_check.h), one
// process per rank, one track per recording thread, args on events.
#include "raggemm/profiler.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "trace_check.h"

namespace raggemm {
namespace {

nlohmann::json trace_of(const Profiler& profiler) {
  return nlohmann::json::parse(profiler.trace_json());
}

TEST(ProfilerTrace, NestedScopesOnTwoThreadsGiveTwoNamedTracksUnderTheRank) {
  Profiler profiler(/*record_trace=*/true);
  profiler.set_rank(3);
  auto work = [&](int64_t step) {
    auto outer = profile(&profiler, "step", OpKind::kSpan);
    outer.arg("step", step);
    {
      auto layer = profile(&profiler, "layer", OpKind::kSpan);
      layer.arg("layer", std::string("layers_0"));
      auto gmm = profile(&profiler, "moe/wi/fwd", OpKind::kExpertGmm, 2e6);
      gmm.arg("pass", "fwd").arg("M", int64_t{64});
    }
  };
  work(1);
  std::thread other(work, 2);
  other.join();

  const nlohmann::json trace = trace_of(profiler);
  const auto tracks = testing::expect_valid_trace(trace);
  ASSERT_EQ(tracks.size(), 2u);
  std::set<int> tids;
  for (const auto& [track, slices] : tracks) {
    EXPECT_EQ(track.first, 3);  // pid = rank
    tids.insert(track.second);
    ASSERT_EQ(slices.size(), 3u);
    // Sorted by start, longest first: step > layer > gmm, each in the last.
    EXPECT_EQ((*slices[0].event)["name"], "step");
    EXPECT_EQ((*slices[1].event)["name"], "layer");
    EXPECT_EQ((*slices[2].event)["name"], "moe/wi/fwd");
    EXPECT_EQ(testing::parent_of(slices, slices[2]), &slices[1]);
    EXPECT_EQ(testing::parent_of(slices, slices[1]), &slices[0]);
    const nlohmann::json& gmm = *slices[2].event;
    EXPECT_EQ(gmm["args"]["pass"], "fwd");
    EXPECT_EQ(gmm["args"]["M"], 64);
    EXPECT_EQ(gmm["args"]["flops"], 2e6);
    EXPECT_GT(gmm["args"]["gflops_per_s"].get<double>(), 0);
    EXPECT_EQ((*slices[1].event)["args"]["layer"], "layers_0");
  }
  EXPECT_EQ(tids, (std::set<int>{1, 2}));
  std::set<std::string> steps;
  for (const auto& [track, slices] : tracks) steps.insert(std::to_string(
      (*slices[0].event)["args"]["step"].get<int64_t>()));
  EXPECT_EQ(steps, (std::set<std::string>{"1", "2"}));
}

TEST(ProfilerTrace, WithoutTracingArgsAreDroppedAndTotalsStillAdd) {
  Profiler profiler;
  {
    auto scope = profile(&profiler, "moe/wo/dlhs", OpKind::kExpertGmm, 1e3);
    scope.arg("pass", "dlhs");
    EXPECT_FALSE(scope.tracing());
  }
  EXPECT_EQ(profiler.event_count(), 0u);
  EXPECT_EQ(profiler.take_totals().expert_gmm_flops, 1e3);
}

TEST(ProfilerTrace, TheCheckerCatchesSlicesThatOverlapWithoutNesting) {
  static const nlohmann::json bad = nlohmann::json::parse(R"({"traceEvents": [
      {"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": "rank 0"}},
      {"name": "thread_name", "ph": "M", "pid": 0, "tid": 1, "args": {"name": "thread 1"}},
      {"name": "a", "ph": "X", "ts": 0, "dur": 10, "pid": 0, "tid": 1},
      {"name": "b", "ph": "X", "ts": 5, "dur": 10, "pid": 0, "tid": 1}]})");
  EXPECT_NONFATAL_FAILURE(testing::expect_valid_trace(bad), "without nesting");
}

}  // namespace
}  // namespace raggemm
