#include "moe/tune_block.h"

#include <algorithm>
#include <chrono>
#include <map>

namespace raggemm::tune {

BlockTuneReport tune_block(const ModelDims& dims, int64_t groups,
                           const std::vector<int32_t>& group_sizes, DType dtype, TuneCache& cache,
                           const BlockTuneOptions& options) {
  BlockTuneReport report;
  std::map<std::string, size_t> first_of_key;  // cache key -> first row with it
  std::vector<std::string> keys;
  for (Weight weight : kAllWeights) {
    for (Pass pass : kAllPasses) {
      GmmShape shape = block_pass_shape(weight, pass, dims, groups, group_sizes, dtype);
      keys.push_back(TuneCache::key(shape));
      if (first_of_key.emplace(keys.back(), report.rows.size()).second) ++report.distinct;
      report.rows.push_back(BlockTuneRow{weight, pass, std::move(shape), {}, weight, pass});
    }
  }
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  size_t remaining = report.distinct;
  for (size_t i = 0; i < report.rows.size(); ++i) {
    BlockTuneRow& row = report.rows[i];
    const size_t first = first_of_key[keys[i]];
    if (first != i) {
      row.result = report.rows[first].result;
      row.tuned_as_weight = report.rows[first].weight;
      row.tuned_as_pass = report.rows[first].pass;
      continue;
    }
    TuneOptions tune_options;
    // An even share of what is left, so an early problem that finishes under
    // its share leaves more for the later ones. A small reserve (2%, at most
    // 1 s) covers the start-up and the last cache write, so the whole block
    // ends within the budget.
    const double reserve = std::min(1.0, 0.02 * options.budget_s);
    tune_options.budget_s = std::max(
        0.0, (options.budget_s - reserve - elapsed()) / static_cast<double>(remaining--));
    tune_options.threads = options.threads;
    tune_options.log = options.log;
    if (options.on_start) options.on_start(row.weight, row.pass, row.shape, tune_options.budget_s);
    row.result = tune_problem(row.shape, tune_options);
    cache.store(row.shape, row.result.entry);
  }
  report.seconds = elapsed();
  return report;
}

}  // namespace raggemm::tune
