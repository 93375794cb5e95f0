// The profiler's trace: Trace Event Format rules (tests/trace_check.h), one
// process per rank, one track per recording thread, args on events.
#include "raggemm/profiler.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "raggemm/gmm.h"
#include "support/gmm_case.h"
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

// A traced GMM scope gets one "worker" slice per OpenMP worker that ran
// kernel items, on that worker's own track under the calling track (tid
// 1000 * T + W), inside the GMM event; two calling threads at once never
// share a worker track; spans and untraced scopes record no workers.
TEST(ProfilerTrace, GmmEventsGetWorkerTracksInsideThem) {
  Profiler profiler(/*record_trace=*/true);
  const std::vector<int64_t> sizes = {40, 0, 70, 9, 33, 60};
  const Tensor gs = testing::sizes_tensor(sizes);
  const Tensor lhs = testing::random_tensor({240, 64}, DType::kF32, 1);
  const Tensor rhs = testing::random_tensor({6, 64, 96}, DType::kF32, 2);
  GmmOptions o;
  o.kernel = KernelVersion::kV2;
  o.tiles = {16, 16, 32};  // many items: both workers take some
  o.threads = 2;
  auto work = [&](int64_t step) {
    auto outer = profile(&profiler, "step", OpKind::kSpan);
    outer.arg("step", step);
    for (int call = 0; call < 3; ++call) {
      auto gmm_scope = profile(&profiler, "moe/wi/fwd", OpKind::kExpertGmm, 1e6);
      gmm_scope.arg("kernel", std::string("v2"));
      gmm(lhs, rhs, gs, o);
    }
    gmm(lhs, rhs, gs, o);  // in a span, not a GMM scope: no workers
  };
  std::thread first(work, 1), second(work, 2);
  first.join();
  second.join();
  {
    Profiler untraced;
    auto scope = profile(&untraced, "moe/wi/fwd", OpKind::kExpertGmm, 1e6);
    gmm(lhs, rhs, gs, o);
  }
  const nlohmann::json trace = trace_of(profiler);
  const auto tracks = testing::expect_valid_trace(trace);
  EXPECT_GE(testing::expect_worker_tracks(tracks), 6);  // 2 threads x 3 calls, >= 1 each
  std::set<int> callers;
  int worker_tracks = 0;
  for (const auto& [track, slices] : tracks) {
    if (track.second < 1000) {
      callers.insert(track.second);
      continue;
    }
    ++worker_tracks;
    EXPECT_TRUE(callers.count(track.second / 1000)) << track.second;
    EXPECT_LT(track.second % 1000, 2) << "two threads per call";
    EXPECT_LE(slices.size(), 3u) << "only the 3 GMM scopes of its caller";
  }
  EXPECT_EQ(callers, (std::set<int>{1, 2}));
  EXPECT_GE(worker_tracks, 2);
  int named = 0;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e["name"] == "thread_name" && e["tid"].get<int>() >= 1000) {
      EXPECT_EQ(e["args"]["name"], "thread " + std::to_string(e["tid"].get<int>() / 1000) +
                                       " worker " + std::to_string(e["tid"].get<int>() % 1000));
      ++named;
    }
  }
  EXPECT_EQ(named, worker_tracks);
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
