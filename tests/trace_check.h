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

}  // namespace raggemm::testing
