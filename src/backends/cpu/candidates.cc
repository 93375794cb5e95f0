#include "backends/cpu/candidates.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "backends/cpu/heuristic.h"

namespace raggemm::backends::cpu {
namespace {

constexpr size_t kValuesPerAxis = 5;  // axis sweep: the heuristic's value and 4 more
constexpr double kAxisSpread = 4.0;   // candidates within 4x of the heuristic's tile
constexpr int kMaxBuffers = 4;

int64_t round_up(int64_t value, int64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

// Round 0: the heuristic's config first (the tuner's baseline), then each
// axis swept with the other two at the heuristic's values.
std::vector<TuneCandidate> axis_sweeps(const GmmShape& shape, const MachineModel& machine,
                                       const TuneCandidate& h) {
  const Tiles extents = kernel_extents(shape);
  const bool tgmm = shape.pass == Pass::kGradRhs;
  // The ragged axis also tries raw powers of two and the mean group size,
  // which keep v1's tiles aligned with balanced groups.
  std::vector<int64_t> ragged_extra;
  for (int64_t p = 8; p <= 4096; p *= 2) ragged_extra.push_back(p);
  if (shape.groups > 0) ragged_extra.push_back(std::max<int64_t>(1, shape.m / shape.groups));
  const std::vector<int64_t> none;
  const std::vector<int64_t> m_values =
      axis_candidates(extents.m, machine.mr, h.tiles.m, tgmm ? none : ragged_extra, kAxisSpread,
                      kValuesPerAxis);
  const std::vector<int64_t> k_values =
      axis_candidates(extents.k, 16, h.tiles.k, tgmm ? ragged_extra : none, kAxisSpread, kValuesPerAxis);
  const std::vector<int64_t> n_values =
      axis_candidates(extents.n, machine.nr, h.tiles.n, none, kAxisSpread, kValuesPerAxis);
  auto with = [&](Tiles tiles) { return TuneCandidate{tiles, h.kernel, h.input_buffer_count}; };
  std::vector<TuneCandidate> out{h};
  for (int64_t v : m_values) out.push_back(with(Tiles{v, h.tiles.k, h.tiles.n}));
  for (int64_t v : k_values) out.push_back(with(Tiles{h.tiles.m, v, h.tiles.n}));
  for (int64_t v : n_values) out.push_back(with(Tiles{h.tiles.m, h.tiles.k, v}));
  return out;
}

// Round 1: the two fastest values of each axis (among the sweeps that kept
// the other two at the heuristic's values), combined.
std::vector<TuneCandidate> combinations(const TuneCandidate& h, const Measurements& measured) {
  auto best_two = [&](auto field, auto other_a, auto other_b) {
    std::vector<std::pair<double, int64_t>> ranked;
    for (const CandidateTiming& t : measured) {
      const Tiles& tiles = t.candidate.tiles;
      if (t.passed_check && other_a(tiles) == other_a(h.tiles) && other_b(tiles) == other_b(h.tiles) &&
          t.candidate.kernel == h.kernel && t.candidate.input_buffer_count == h.input_buffer_count) {
        ranked.emplace_back(t.seconds, field(tiles));
      }
    }
    std::sort(ranked.begin(), ranked.end());
    std::vector<int64_t> top;
    for (size_t i = 0; i < ranked.size() && i < 2; ++i) top.push_back(ranked[i].second);
    return top;
  };
  auto get_m = [](const Tiles& t) { return t.m; };
  auto get_k = [](const Tiles& t) { return t.k; };
  auto get_n = [](const Tiles& t) { return t.n; };
  std::vector<TuneCandidate> out;
  for (int64_t m : best_two(get_m, get_k, get_n)) {
    for (int64_t k : best_two(get_k, get_m, get_n)) {
      for (int64_t n : best_two(get_n, get_m, get_k)) {
        out.push_back(TuneCandidate{Tiles{m, k, n}, h.kernel, h.input_buffer_count});
      }
    }
  }
  return out;
}

// Round 2: kernel versions and buffer counts on the best tiles so far. v1
// lays its ragged-axis tiles over the global row (token) space and
// recomputes a tile once per group it touches, so it gets the ragged tile
// the heuristic gives an explicit v1 (m for gmm, k for tgmm), not v2's.
std::vector<TuneCandidate> variants(const GmmShape& shape, const MachineModel& machine,
                                    const Measurements& measured) {
  const CandidateTiming* best = nullptr;
  for (const CandidateTiming& t : measured) {
    if (t.passed_check && (!best || t.seconds < best->seconds)) best = &t;
  }
  if (!best) return {};
  const bool tgmm = shape.pass == Pass::kGradRhs;
  const Tiles tiles = best->candidate.tiles;
  const Tiles v1_ragged = heuristic(shape, machine, KernelVersion::kV1).tiles;
  Tiles v1_tiles = tiles;
  (tgmm ? v1_tiles.k : v1_tiles.m) = tgmm ? v1_ragged.k : v1_ragged.m;
  std::vector<TuneCandidate> out;
  for (KernelVersion kernel : {KernelVersion::kV1, KernelVersion::kV2}) {
    for (int buffers = 1; buffers <= kMaxBuffers; ++buffers) {
      out.push_back(TuneCandidate{kernel == KernelVersion::kV1 ? v1_tiles : tiles, kernel, buffers});
    }
  }
  return out;
}

}  // namespace

std::vector<TuneCandidate> tuning_candidates(const GmmShape& shape, const MachineModel& machine,
                                             int round, const Measurements& measured) {
  const TuneCandidate h = heuristic(shape, machine);
  switch (round) {
    case 0:
      return axis_sweeps(shape, machine, h);
    case 1:
      return combinations(h, measured);
    case 2:
      return variants(shape, machine, measured);
    default:
      return {};
  }
}

std::vector<int64_t> axis_candidates(int64_t extent, int64_t align, int64_t center,
                                     const std::vector<int64_t>& extra, double spread, size_t limit) {
  align = std::max<int64_t>(align, 1);
  center = std::max<int64_t>(center, 1);
  const int64_t ceiling = std::max(round_up(std::max<int64_t>(extent, 1), align), center);
  std::set<int64_t> pool(extra.begin(), extra.end());
  pool.insert(center);
  for (int64_t p = 1; p <= ceiling; p *= 2) pool.insert(round_up(p, align));
  for (int64_t d = align; d <= extent; d += align) {
    if (extent % d == 0) pool.insert(d);
  }
  std::vector<int64_t> values;
  for (int64_t v : pool) {
    if (v <= 0 || v > ceiling) continue;
    const double ratio = static_cast<double>(v) / static_cast<double>(center);
    if (ratio < 1.0 / spread || ratio > spread) continue;
    values.push_back(v);
  }
  std::stable_sort(values.begin(), values.end(), [&](int64_t a, int64_t b) {
    return std::fabs(std::log(static_cast<double>(a) / static_cast<double>(center))) <
           std::fabs(std::log(static_cast<double>(b) / static_cast<double>(center)));
  });
  if (values.size() > limit) values.resize(limit);
  std::sort(values.begin(), values.end());
  return values;
}

}  // namespace raggemm::backends::cpu
