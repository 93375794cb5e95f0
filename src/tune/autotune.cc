#include "tune/autotune.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <ostream>
#include <set>

#include "raggemm/error.h"
#include "raggemm/gmm.h"
#include "raggemm/tensor.h"
#include "tune/equivalence.h"
#include "tune/heuristic.h"

namespace raggemm::tune {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kReferenceSamples = 48;     // sampled output rows per group-size set
// Round 1 times each candidate at least twice and for 20 ms; round 2 (the
// survivors) at least five times and for 60 ms.
constexpr int kFirstSamples = 2;
constexpr double kFirstSeconds = 0.02;
constexpr int kFinalSamples = 5;
constexpr double kFinalSeconds = 0.06;
constexpr int kMaxSamples = 64;
constexpr size_t kValuesPerAxis = 5;      // axis sweep: the heuristic's value and 4 more
constexpr double kAxisSpread = 4.0;       // candidates within 4x of the heuristic's tile
constexpr int kMaxBuffers = 4;
constexpr double kCostMargin = 1.5;       // a measurement may take this much longer than the last
// A candidate whose checked calls alone take this many times the best
// candidate's time so far cannot survive pruning: it is not timed further.
// (A v1 tgmm on skewed groups ran 19x slower than v2 at G = 128, 4 s for one
// measurement of a 10 s problem budget.)
constexpr double kHopelessOverBest = 3.0;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

int64_t round_up(int64_t value, int64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

// Deterministic values in [-1, 1) (splitmix64), rounded through bf16 when the
// inputs are stored as bf16 so the f32 copy is exactly what the kernel reads.
void fill_inputs(std::vector<float>& values, uint64_t seed, DType dtype) {
  uint64_t state = seed;
  for (float& value : values) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    value = static_cast<float>(static_cast<double>(z >> 11) * 0x1.0p-52 - 1.0);
    if (dtype == DType::kBF16) value = bf16_to_f32(f32_to_bf16(value));
  }
}

Tensor to_storage(const std::vector<float>& values, const Shape& shape, DType dtype) {
  Tensor tensor(dtype, shape);
  if (dtype == DType::kF32) {
    std::copy(values.begin(), values.end(), tensor.as<float>());
  } else {
    uint16_t* out = tensor.as<uint16_t>();
    for (size_t i = 0; i < values.size(); ++i) out[i] = f32_to_bf16(values[i]);
  }
  return tensor;
}

std::string describe(const TuneCandidate& c) {
  return "m=" + std::to_string(c.tiles.m) + " k=" + std::to_string(c.tiles.k) + " n=" +
         std::to_string(c.tiles.n) + " " + kernel_name(c.kernel) + " buffers=" +
         std::to_string(c.input_buffer_count);
}

// Inputs, group-size sets with their sampled references, and the output.
class Bench {
 public:
  Bench(const GmmShape& shape, const TuneOptions& options)
      : shape_(shape),
        threads_(options.threads),
        sabotage_(options.sabotage),
        before_run_(options.before_run) {
    require(shape.lhs_dtype == shape.rhs_dtype &&
                (shape.lhs_dtype == DType::kF32 || shape.lhs_dtype == DType::kBF16),
            "dtype", dtype_name(shape.lhs_dtype), "tuning supports f32 and bf16 inputs");
    require(shape.quantization.empty(), "quantization", shape.quantization,
            "tuning quantized passes is not supported yet");
    require(shape.groups >= 1, "groups", shape.groups, "need at least one group to tune");
    const int64_t m = shape.m, k = shape.k, n = shape.n, g = shape.groups;
    std::vector<float> lhs(static_cast<size_t>(m * k));
    fill_inputs(lhs, 1, shape.lhs_dtype);
    const bool tgmm = shape.pass == Pass::kGradRhs;
    std::vector<float> rhs(static_cast<size_t>(tgmm ? m * n : g * k * n));
    fill_inputs(rhs, 2, shape.rhs_dtype);
    lhs_ = to_storage(lhs, {m, k}, shape.lhs_dtype);
    const Shape rhs_shape = tgmm ? Shape{m, n} : shape.pass == Pass::kGradLhs ? Shape{g, n, k} : Shape{g, k, n};
    rhs_ = to_storage(rhs, rhs_shape, shape.rhs_dtype);
    out_ = Tensor(DType::kF32, tgmm ? Shape{g, k, n} : Shape{m, n});

    // Balanced sizes always; the problem's own sizes too when given.
    GmmShape balanced = shape;
    balanced.group_sizes.clear();
    std::vector<std::vector<int32_t>> size_sets;
    for (int64_t size : representative_group_sizes(balanced)) {
      if (size_sets.empty()) size_sets.emplace_back();
      size_sets.back().push_back(static_cast<int32_t>(size));
    }
    if (!shape.group_sizes.empty() && shape.group_sizes != size_sets.front()) {
      size_sets.push_back(shape.group_sizes);
    }
    for (const std::vector<int32_t>& sizes : size_sets) {
      SizeSet set;
      set.group_sizes = Tensor(DType::kI32, {g});
      std::copy(sizes.begin(), sizes.end(), set.group_sizes.as<int32_t>());
      set.reference = sample_reference(shape, sizes, lhs.data(), rhs.data(), kReferenceSamples);
      sets_.push_back(std::move(set));
    }
  }

  // One untimed run per set, so that first-touch costs (output pages, packing
  // workspaces, the OpenMP thread pool) are not charged to the first candidate.
  void warm_up(const TuneCandidate& c) {
    for (SizeSet& set : sets_) run(c, set);
  }

  // Runs once per group-size set (warm-up + equivalence check), then times
  // single calls until `min_samples` of them and `min_seconds` have passed;
  // returns the sum over sets of the fastest call. The minimum, not the mean:
  // under background load (other processes, a descheduled OpenMP thread) the
  // fastest of a few calls is the stable measure of what a config can do.
  // Once the checked calls alone pass `hopeless_s` (when positive), stops and
  // returns their sum as the time: far enough past the best to be pruned.
  double measure(const TuneCandidate& c, int min_samples, double min_seconds, bool* passed,
                 double hopeless_s = 0) {
    double total = 0, checked = 0;
    *passed = true;
    for (SizeSet& set : sets_) {
      const auto check_start = Clock::now();
      run(c, set);
      checked += seconds_since(check_start);
      if (sabotage_ && sabotage_(c) && out_.numel() > 0) out_.as<float>()[0] += 1.0f;
      if (!matches_reference(set.reference, out_.as<float>())) *passed = false;
      if (hopeless_s > 0 && checked > hopeless_s) return std::max(total, checked);
      double fastest = 1e300, spent = 0;
      for (int sample = 0; sample < kMaxSamples && (sample < min_samples || spent < min_seconds); ++sample) {
        const auto call_start = Clock::now();
        run(c, set);
        const double seconds = seconds_since(call_start);
        fastest = std::min(fastest, seconds);
        spent += seconds;
      }
      total += fastest;
    }
    return total;
  }

 private:
  struct SizeSet {
    Tensor group_sizes;
    SampledReference reference;
  };

  void run(const TuneCandidate& c, const SizeSet& set) {
    if (before_run_) before_run_(c);
    if (shape_.pass == Pass::kGradRhs) {
      TgmmOptions options;
      options.tiles = c.tiles;
      options.kernel = c.kernel;
      options.input_buffer_count = c.input_buffer_count;
      options.threads = threads_;
      tgmm_into(lhs_, rhs_, set.group_sizes, out_, options);
    } else {
      GmmOptions options;
      options.transpose_rhs = shape_.pass == Pass::kGradLhs;
      options.tiles = c.tiles;
      options.kernel = c.kernel;
      options.input_buffer_count = c.input_buffer_count;
      options.threads = threads_;
      gmm_into(lhs_, rhs_, set.group_sizes, out_, options);
    }
  }

  GmmShape shape_;
  int threads_;
  std::function<bool(const TuneCandidate&)> sabotage_;
  std::function<void(const TuneCandidate&)> before_run_;
  Tensor lhs_, rhs_, out_;
  std::vector<SizeSet> sets_;
};

struct Timed {
  TuneCandidate candidate;
  double seconds = 0;
  bool passed = false;
};

}  // namespace

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

TuneResult tune_problem(const GmmShape& shape, const TuneOptions& options) {
  const auto start = Clock::now();
  const MachineModel machine = this_machine();
  TuneResult result;
  result.heuristic = heuristic(shape, machine);
  const TuneCandidate heuristic_candidate{result.heuristic.tiles, result.heuristic.kernel,
                                          result.heuristic.input_buffer_count};
  Bench bench(shape, options);
  auto log = [&](const std::string& line) {
    if (options.log) *options.log << line << "\n" << std::flush;
  };

  std::vector<Timed> timed;
  std::set<std::string> seen;
  double last_cost = 0;  // seconds the previous measurement took
  auto best_passing = [&]() -> const Timed* {
    const Timed* best = nullptr;
    for (const Timed& t : timed) {
      if (t.passed && (!best || t.seconds < best->seconds)) best = &t;
    }
    return best;
  };
  // Round 1: one measurement per candidate, while the budget lasts (the
  // heuristic's config is always measured: it is the baseline).
  auto try_candidate = [&](const TuneCandidate& c) {
    if (!seen.insert(describe(c)).second) return;
    if (!timed.empty() && seconds_since(start) + kCostMargin * last_cost > options.budget_s) {
      result.budget_cut = true;
      return;
    }
    const auto measure_start = Clock::now();
    Timed t{c, 0, false};
    const Timed* best = best_passing();
    t.seconds = bench.measure(c, kFirstSamples, kFirstSeconds, &t.passed,
                              best ? kHopelessOverBest * best->seconds : 0.0);
    last_cost = seconds_since(measure_start);
    timed.push_back(t);
    log("  " + describe(c) + ": " + std::to_string(t.seconds * 1e3) + " ms" +
        (t.passed ? "" : "  (FAILED the equivalence check)"));
  };

  bench.warm_up(heuristic_candidate);
  try_candidate(heuristic_candidate);
  const Tiles extents = kernel_extents(shape);
  const Tiles& h = heuristic_candidate.tiles;
  const bool tgmm = shape.pass == Pass::kGradRhs;
  // The ragged axis also tries raw powers of two and the mean group size,
  // which keep v1's tiles aligned with balanced groups.
  std::vector<int64_t> ragged_extra;
  for (int64_t p = 8; p <= 4096; p *= 2) ragged_extra.push_back(p);
  if (shape.groups > 0) ragged_extra.push_back(std::max<int64_t>(1, shape.m / shape.groups));
  const std::vector<int64_t> none;
  const std::vector<int64_t> m_values = axis_candidates(extents.m, tgmm ? machine.mr : machine.mr, h.m,
                                                        tgmm ? none : ragged_extra, kAxisSpread, kValuesPerAxis);
  const std::vector<int64_t> k_values =
      axis_candidates(extents.k, 16, h.k, tgmm ? ragged_extra : none, kAxisSpread, kValuesPerAxis);
  const std::vector<int64_t> n_values =
      axis_candidates(extents.n, machine.nr, h.n, none, kAxisSpread, kValuesPerAxis);

  // Stage 1: sweep each axis with the others at the heuristic's values.
  auto with = [&](Tiles tiles) { return TuneCandidate{tiles, heuristic_candidate.kernel, heuristic_candidate.input_buffer_count}; };
  for (int64_t v : m_values) try_candidate(with(Tiles{v, h.k, h.n}));
  for (int64_t v : k_values) try_candidate(with(Tiles{h.m, v, h.n}));
  for (int64_t v : n_values) try_candidate(with(Tiles{h.m, h.k, v}));

  // Stage 2: combine the two best values of each axis.
  auto best_two = [&](auto field, int64_t fixed_a, int64_t fixed_b, auto other_a, auto other_b) {
    std::vector<std::pair<double, int64_t>> ranked;
    for (const Timed& t : timed) {
      if (t.passed && other_a(t.candidate.tiles) == fixed_a && other_b(t.candidate.tiles) == fixed_b &&
          t.candidate.kernel == heuristic_candidate.kernel &&
          t.candidate.input_buffer_count == heuristic_candidate.input_buffer_count) {
        ranked.emplace_back(t.seconds, field(t.candidate.tiles));
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
  const std::vector<int64_t> top_m = best_two(get_m, h.k, h.n, get_k, get_n);
  const std::vector<int64_t> top_k = best_two(get_k, h.m, h.n, get_m, get_n);
  const std::vector<int64_t> top_n = best_two(get_n, h.m, h.k, get_m, get_k);
  for (int64_t m : top_m) {
    for (int64_t k : top_k) {
      for (int64_t n : top_n) try_candidate(with(Tiles{m, k, n}));
    }
  }

  // Stage 3: kernel versions and buffer counts on the best tiles so far. v1
  // lays its ragged-axis tiles over the global row (token) space and
  // recomputes a tile once per group it touches, so it gets the ragged tile
  // the heuristic gives an explicit v1 (m for gmm, k for tgmm), not v2's.
  if (const Timed* best = best_passing()) {
    const Tiles tiles = best->candidate.tiles;
    const Tiles v1_ragged = heuristic(shape, machine, KernelVersion::kV1).tiles;
    Tiles v1_tiles = tiles;
    (tgmm ? v1_tiles.k : v1_tiles.m) = tgmm ? v1_ragged.k : v1_ragged.m;
    for (KernelVersion kernel : {KernelVersion::kV1, KernelVersion::kV2}) {
      const Tiles& kernel_tiles = kernel == KernelVersion::kV1 ? v1_tiles : tiles;
      for (int buffers = 1; buffers <= kMaxBuffers; ++buffers) {
        try_candidate(TuneCandidate{kernel_tiles, kernel, buffers});
      }
    }
  }
  result.candidates_timed = static_cast<int>(timed.size());

  const Timed* best = best_passing();
  if (!best) {
    fail("tune", TuneCache::key(shape), "no candidate passed the equivalence check against the reference");
  }
  // Round 2: candidates within prune_ratio of the best are measured again,
  // more times, best first, while the budget lasts; the heuristic's config is
  // re-measured too, as the same-run baseline.
  const double cutoff = best->seconds * options.prune_ratio;
  std::vector<Timed> survivors;
  if (timed.front().passed) survivors.push_back(timed.front());  // the baseline, always
  for (size_t i = 1; i < timed.size(); ++i) {
    if (timed[i].passed && timed[i].seconds <= cutoff) survivors.push_back(timed[i]);
  }
  // The baseline first, then the contenders fastest first.
  std::sort(survivors.begin() + (timed.front().passed ? 1 : 0), survivors.end(),
            [](const Timed& a, const Timed& b) { return a.seconds < b.seconds; });
  log("  round 2: the heuristic's config and " + std::to_string(survivors.size() - (timed.front().passed ? 1 : 0)) +
      " of " + std::to_string(timed.size()) + " candidates within " + std::to_string(options.prune_ratio) +
      "x of the best");
  // Every measurement must end within the budget: a measurement is started
  // only when its estimated cost (with a margin for noise) still fits.
  auto fits = [&](double cost) { return seconds_since(start) + kCostMargin * cost <= options.budget_s; };
  double heuristic_final = timed.front().seconds;
  for (size_t i = 0; i < survivors.size(); ++i) {
    Timed& t = survivors[i];
    if (!fits(last_cost * kFinalSamples / (kFirstSamples + 1))) {
      result.budget_cut = true;
      break;
    }
    bool passed = false;
    const auto measure_start = Clock::now();
    t.seconds = bench.measure(t.candidate, kFinalSamples, kFinalSeconds, &passed);
    last_cost = seconds_since(measure_start) * (kFirstSamples + 1) / (kFinalSamples + 1);
    t.passed = t.passed && passed;
    if (t.candidate == heuristic_candidate) heuristic_final = t.seconds;
  }
  std::map<std::string, double> final_times;
  for (const Timed& t : survivors) final_times[describe(t.candidate)] = t.seconds;
  final_times[describe(heuristic_candidate)] = heuristic_final;
  const Timed* winner = nullptr;
  for (const Timed& t : survivors) {
    if (t.passed && (!winner || t.seconds < winner->seconds)) winner = &t;
  }
  if (!winner) winner = best;
  // The heuristic's own config stays the answer unless something beat it in
  // the same run.
  if (timed.front().passed && heuristic_final <= winner->seconds) {
    result.entry.winner = heuristic_candidate;
    result.winner_seconds = heuristic_final;
  } else {
    result.entry.winner = winner->candidate;
    result.winner_seconds = winner->seconds;
  }
  result.entry.heuristic_seconds = heuristic_final;
  result.entry.threads = options.threads > 0 ? options.threads : machine.threads;
  for (const Timed& t : timed) {
    auto it = final_times.find(describe(t.candidate));
    result.entry.timings.push_back(
        CandidateTiming{t.candidate, it != final_times.end() ? it->second : t.seconds, t.passed});
  }
  log("  winner " + describe(result.entry.winner) + " vs heuristic " + describe(heuristic_candidate) +
      ": " + std::to_string(heuristic_final * 1e3) + " ms heuristic");
  return result;
}

}  // namespace raggemm::tune
