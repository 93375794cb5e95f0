// Resolution of a pass config: explicit setting > tuned-cache entry >
// heuristic, decided field by field, with the source of each field kept.
#include <string>

#include "backends/registry.h"
#include "raggemm/error.h"
#include "raggemm/plan.h"
#include "tune/heuristic.h"

namespace raggemm {
namespace {

constexpr int kMaxInputBufferCount = 4;

void check_overrides(const KernelOverrides& overrides) {
  require(overrides.tiles.m >= 0, "tiles.m", overrides.tiles.m, "tile must be positive (0: not set)");
  require(overrides.tiles.k >= 0, "tiles.k", overrides.tiles.k, "tile must be positive (0: not set)");
  require(overrides.tiles.n >= 0, "tiles.n", overrides.tiles.n, "tile must be positive (0: not set)");
  if (overrides.input_buffer_count) {
    require(*overrides.input_buffer_count >= 1 && *overrides.input_buffer_count <= kMaxInputBufferCount,
            "input_buffer_count", *overrides.input_buffer_count, "must be in 1..4");
  }
}

void check_shape(const GmmShape& shape) {
  require(shape.m >= 0, "m", shape.m, "must be >= 0");
  require(shape.k >= 0, "k", shape.k, "must be >= 0");
  require(shape.n >= 0, "n", shape.n, "must be >= 0");
  require(shape.groups >= 0, "groups", shape.groups, "must be >= 0");
  require(shape.group_sizes.empty() || static_cast<int64_t>(shape.group_sizes.size()) == shape.groups,
          "group_sizes", shape.group_sizes.size(), "must hold one size per group");
}

}  // namespace

namespace tune {

ResolvedPassConfig heuristic(const GmmShape& shape, const MachineModel& machine,
                             std::optional<KernelVersion> kernel) {
  const TuneCandidate picked = backends::default_backend().heuristic(shape, machine, kernel);
  ResolvedPassConfig config;  // every source: the heuristic
  config.tiles = picked.tiles;
  config.kernel = picked.kernel;
  config.input_buffer_count = picked.input_buffer_count;
  config.quantization = shape.quantization;
  return config;
}

}  // namespace tune

const char* source_name(PlanSource source) {
  switch (source) {
    case PlanSource::kExplicit:
      return "explicit";
    case PlanSource::kCache:
      return "cache";
    case PlanSource::kHeuristic:
      return "heuristic";
  }
  return "?";
}

ResolvedPassConfig heuristic_config(const GmmShape& shape) {
  check_shape(shape);
  return tune::heuristic(shape, tune::this_machine());
}

ResolvedPassConfig resolve_problem(const GmmShape& shape, const KernelOverrides& overrides,
                                   const TuneCache* cache, int threads) {
  check_overrides(overrides);
  // An explicit kernel is known before the heuristic runs, so its tiles fit
  // the generation that will run.
  check_shape(shape);
  ResolvedPassConfig config = tune::heuristic(shape, tune::this_machine(threads), overrides.kernel);
  auto& source = config.source;

  if (cache) {
    if (std::optional<TuneEntry> entry = cache->find(shape)) {
      config.tiles = entry->winner.tiles;
      config.kernel = entry->winner.kernel;
      config.input_buffer_count = entry->winner.input_buffer_count;
      source.m = source.k = source.n = source.kernel = source.buffers = PlanSource::kCache;
    } else if (std::optional<RejectedTuneEntry> bad = cache->rejected(shape)) {
      config.cache_rejection = bad->reason;
    }
  }
  // An explicit setting always wins, field by field, whatever the cache says.
  if (overrides.tiles.m > 0) config.tiles.m = overrides.tiles.m, source.m = PlanSource::kExplicit;
  if (overrides.tiles.k > 0) config.tiles.k = overrides.tiles.k, source.k = PlanSource::kExplicit;
  if (overrides.tiles.n > 0) config.tiles.n = overrides.tiles.n, source.n = PlanSource::kExplicit;
  if (overrides.kernel) config.kernel = *overrides.kernel, source.kernel = PlanSource::kExplicit;
  if (overrides.input_buffer_count) {
    config.input_buffer_count = *overrides.input_buffer_count;
    source.buffers = PlanSource::kExplicit;
  }
  return config;
}

}  // namespace raggemm
