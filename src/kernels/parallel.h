// Cost-balanced parallel loop over a flat list of work items: items run
// largest first (longest-processing-time order) and each thread takes the
// next one when it finishes, so one huge expert and many small ones keep all
// threads busy. Items write disjoint outputs, so which thread runs an item
// never changes a result.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "kernels/worker_spans.h"
#include "kernels/workspace.h"

namespace raggemm::kernels {

// Runs fn(item) as worker `worker`, noting its span when a recorder is on.
template <class Fn>
inline void run_noted(WorkerSpanRecorder* recorder, int worker, int64_t item, Fn& fn) {
  if (!recorder) {
    fn(item);
    return;
  }
  const int64_t begin = steady_now_ns();
  fn(item);
  recorder->note(worker, begin, steady_now_ns());
}

// Item indices by decreasing cost (ties in index order, so the order never
// depends on the thread count).
inline std::vector<int64_t> largest_first(const std::vector<int64_t>& costs) {
  std::vector<int64_t> order(costs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return costs[a] > costs[b]; });
  return order;
}

// Threads worth starting for `count` items: at least one, at most one per item.
inline int team_size(int threads, int64_t count) {
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, count)));
}

// The workspace bound on the calling thread, with a set for each of the
// team's threads (made here, before the team starts), or null. Each worker
// binds it as its own thread number: the caller, worker 0, keeps its set.
inline Workspace* lend_workspace_to_team(int team) {
  Workspace* const lent = bound_workspace();
  if (lent) lent->reserve_threads(team);
  return lent;
}

template <class Fn>
void parallel_items(const std::vector<int64_t>& costs, int threads, Fn&& fn) {
  const std::vector<int64_t> order = largest_first(costs);
  const int64_t count = static_cast<int64_t>(order.size());
  const int team = team_size(threads, count);
  WorkerSpanRecorder* recorder = WorkerSpanRecorder::active();
  if (recorder) recorder->prepare(team);
  Workspace* const lent = lend_workspace_to_team(team);
#pragma omp parallel num_threads(team)
  {
    const WorkspaceBinding binding(lent, omp_get_thread_num());
#pragma omp for schedule(dynamic, 1)
    for (int64_t i = 0; i < count; ++i) run_noted(recorder, omp_get_thread_num(), order[i], fn);
  }
}

// The same items, sorted largest first, taken from both ends: even-numbered
// threads take the largest remaining item, odd-numbered ones the smallest,
// until the ends meet. For passes whose small items are bound by memory
// traffic that does not shrink with them (a tgmm group of 3 tokens still
// writes its whole [K, N] tile) and whose large ones by FMAs: largest-first
// runs the large items together, then the small ones, so DRAM idles in the
// first half and the FMA units in the second; from both ends, one thread
// computes while another streams. The last items taken are middle-sized, so
// the threads finish together only when the items are many: with fewer than
// kTwoEndedMinItemsPerThread per thread, largest-first it is. (Measured,
// tgmm at 2 threads, medians of 9 alternated runs against largest-first:
// 128 zipf:1.2 groups 302 against 290 GFLOP/s, 128 uniform groups 399
// against 408; without the floor, 8 zipf groups (8-16 items) lost 5-10%.)
constexpr int64_t kTwoEndedMinItemsPerThread = 16;

template <class Fn>
void parallel_items_two_ended(const std::vector<int64_t>& costs, int threads, Fn&& fn) {
  if (static_cast<int64_t>(costs.size()) < kTwoEndedMinItemsPerThread * std::max(threads, 1)) {
    parallel_items(costs, threads, fn);
    return;
  }
  const std::vector<int64_t> order = largest_first(costs);
  const int64_t count = static_cast<int64_t>(order.size());
  int64_t front = 0, back = count;  // items [front, back) are left
  const int team = team_size(threads, count);
  WorkerSpanRecorder* recorder = WorkerSpanRecorder::active();
  if (recorder) recorder->prepare(team);
  Workspace* const lent = lend_workspace_to_team(team);
#pragma omp parallel num_threads(team)
  {
    const WorkspaceBinding binding(lent, omp_get_thread_num());
    const bool largest = omp_get_thread_num() % 2 == 0;
    for (;;) {
      int64_t item = -1;
#pragma omp critical(raggemm_two_ended_items)
      if (front < back) item = largest ? front++ : --back;
      if (item < 0) break;
      run_noted(recorder, omp_get_thread_num(), order[item], fn);
    }
  }
}

}  // namespace raggemm::kernels
