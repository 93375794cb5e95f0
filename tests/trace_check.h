// Checks a trace against the Trace Event Format's rules as raggemm writes it
// (raggemm/profiler.h): a "traceEvents" array of complete ("X") events with
// name, ts, dur >= 0, integer pid and tid, and metadata ("M") events naming
// every process and thread track used; on each (pid, tid) track the X events
// nest (any two are disjoint or one contains the other), so viewers draw
// them as one stack.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace raggemm::testing {

struct TraceSlice {
  double begin, end;
  const nlohmann::json* event;
};

// The X events per (pid, tid) track, sorted by start (then longest first).
inline std::map<std::pair<int, int>, std::vector<TraceSlice>> expect_valid_trace(
    const nlohmann::json& trace) {
  std::map<std::pair<int, int>, std::vector<TraceSlice>> tracks;
  std::set<int> named_processes;
  std::set<std::pair<int, int>> named_threads;
  EXPECT_TRUE(trace.contains("traceEvents") && trace["traceEvents"].is_array());
  for (const nlohmann::json& event : trace["traceEvents"]) {
    EXPECT_TRUE(event.contains("name") && event["name"].is_string()) << event;
    EXPECT_TRUE(event["pid"].is_number_integer() && event["tid"].is_number_integer()) << event;
    const int pid = event["pid"], tid = event["tid"];
    if (event["ph"] == "M") {
      if (event["name"] == "process_name") named_processes.insert(pid);
      if (event["name"] == "thread_name") named_threads.insert({pid, tid});
      EXPECT_TRUE(event["args"]["name"].is_string()) << event;
      continue;
    }
    EXPECT_EQ(event["ph"], "X") << event;
    EXPECT_TRUE(event["ts"].is_number() && event["dur"].is_number()) << event;
    const double begin = event["ts"], dur = event["dur"];
    EXPECT_GE(dur, 0) << event;
    tracks[{pid, tid}].push_back(TraceSlice{begin, begin + dur, &event});
  }
  for (auto& [track, slices] : tracks) {
    EXPECT_TRUE(named_processes.count(track.first)) << "pid " << track.first << " has no name";
    EXPECT_TRUE(named_threads.count(track)) << "tid " << track.second << " has no name";
    std::sort(slices.begin(), slices.end(), [](const TraceSlice& a, const TraceSlice& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.end > b.end;
    });
    // ts and dur are ns / 1e3 in doubles: allow a rounding's worth.
    constexpr double kSlack = 1e-3;
    std::vector<const TraceSlice*> open;
    for (const TraceSlice& slice : slices) {
      while (!open.empty() && open.back()->end <= slice.begin + kSlack) open.pop_back();
      if (!open.empty()) {
        EXPECT_LE(slice.end, open.back()->end + kSlack)
            << (*slice.event)["name"] << " overlaps " << (*open.back()->event)["name"]
            << " without nesting in it";
      }
      open.push_back(&slice);
    }
  }
  return tracks;
}

// The innermost enclosing slice of `slice` on its track, or nullptr.
inline const TraceSlice* parent_of(const std::vector<TraceSlice>& track, const TraceSlice& slice) {
  const TraceSlice* parent = nullptr;
  for (const TraceSlice& other : track) {
    if (&other == &slice || other.begin > slice.begin || other.end < slice.end) continue;
    if (other.begin == slice.begin && other.end == slice.end && &other > &slice) continue;
    if (!parent || other.end - other.begin <= parent->end - parent->begin) parent = &other;
  }
  return parent;
}

// Worker tracks (raggemm/profiler.h): every "worker" slice lies on a track
// of tid = base * T + W (W = its args' worker, items >= 1) and inside the
// GMM event (expert_gmm or dense_gmm) its args name on the calling track
// (same pid, tid T); every GMM event that ran a tiled kernel (not "naive")
// holds at least one. Returns the number of worker slices.
inline int expect_worker_tracks(
    const std::map<std::pair<int, int>, std::vector<TraceSlice>>& tracks,
    int worker_track_base = 1000) {
  constexpr double kSlack = 1e-3;
  std::vector<const TraceSlice*> gmms, workers;
  for (const auto& [track, slices] : tracks) {
    for (const TraceSlice& slice : slices) {
      const nlohmann::json& e = *slice.event;
      if (e["cat"] == "expert_gmm" || e["cat"] == "dense_gmm") gmms.push_back(&slice);
      if (e["cat"] != "worker") continue;
      workers.push_back(&slice);
      EXPECT_GE(track.second, worker_track_base) << e;
      EXPECT_EQ(e["args"]["worker"], track.second % worker_track_base) << e;
      EXPECT_GE(e["args"]["items"].get<int64_t>(), 1) << e;
    }
  }
  std::map<const TraceSlice*, int> held;  // GMM event -> worker slices inside it
  for (const TraceSlice* worker : workers) {
    const TraceSlice* owner = nullptr;
    for (const TraceSlice* gmm : gmms) {
      if ((*gmm->event)["pid"] == (*worker->event)["pid"] &&
          (*gmm->event)["tid"] == (*worker->event)["tid"].get<int>() / worker_track_base &&
          (*gmm->event)["name"] == (*worker->event)["args"]["gmm"] &&
          gmm->begin <= worker->begin + kSlack && worker->end <= gmm->end + kSlack &&
          (!owner || gmm->end - gmm->begin < owner->end - owner->begin)) {
        owner = gmm;
      }
    }
    EXPECT_NE(owner, nullptr) << "worker slice outside its GMM event: " << *worker->event;
    if (owner) ++held[owner];
  }
  for (const TraceSlice* gmm : gmms) {
    if ((*gmm->event)["args"]["kernel"] == "naive") continue;
    EXPECT_GE(held[gmm], 1) << "GMM event without worker slices: " << *gmm->event;
  }
  return static_cast<int>(workers.size());
}

}  // namespace raggemm::testing
