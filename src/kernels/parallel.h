// Cost-balanced parallel loop over a flat list of work items: items run
// largest first (longest-processing-time order) and each thread takes the
// next one when it finishes, so one huge expert and many small ones keep all
// threads busy. Items write disjoint outputs, so which thread runs an item
// never changes a result.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

namespace raggemm::kernels {

template <class Fn>
void parallel_items(const std::vector<int64_t>& costs, int threads, Fn&& fn) {
  std::vector<int64_t> order(costs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return costs[a] > costs[b]; });
  const int64_t count = static_cast<int64_t>(order.size());
  const int team = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, count)));
#pragma omp parallel for schedule(dynamic, 1) num_threads(team)
  for (int64_t i = 0; i < count; ++i) fn(order[i]);
}

}  // namespace raggemm::kernels
