#include "tune/autotune.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <ostream>
#include <set>

#include "backends/cpu/candidates.h"
#include "backends/registry.h"
#include "backends/workspace.h"
#include "raggemm/error.h"
#include "raggemm/tensor.h"
#include "tune/equivalence.h"
#include "tune/heuristic.h"
#include "tune/quantized_inputs.h"

namespace raggemm::tune {
namespace {

using backends::Measurements;

using Clock = std::chrono::steady_clock;

constexpr int kReferenceSamples = 48;     // sampled output rows per group-size set
// Round 1 times each candidate at least twice and for 20 ms; round 2 (the
// survivors) at least five times and for 60 ms.
constexpr int kFirstSamples = 2;
constexpr double kFirstSeconds = 0.02;
constexpr int kFinalSamples = 5;
constexpr double kFinalSeconds = 0.06;
constexpr int kMaxSamples = 64;
constexpr double kCostMargin = 1.5;       // a measurement may take this much longer than the last
// A candidate whose checked calls alone take this many times the best
// candidate's time so far cannot survive pruning: it is not timed further.
// (A v1 tgmm on skewed groups ran 19x slower than v2 at G = 128, 4 s for one
// measurement of a 10 s problem budget.)
constexpr double kHopelessOverBest = 3.0;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}


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
  Bench(const GmmShape& shape, const TuneOptions& options, const backends::Backend& backend)
      : shape_(shape),
        backend_(backend),
        threads_(options.threads),
        sabotage_(options.sabotage),
        before_run_(options.before_run) {
    require(shape.lhs_dtype == shape.rhs_dtype &&
                (shape.lhs_dtype == DType::kF32 || shape.lhs_dtype == DType::kBF16),
            "dtype", dtype_name(shape.lhs_dtype), "tuning supports f32 and bf16 inputs");
    require(shape.groups >= 1, "groups", shape.groups, "need at least one group to tune");
    const int64_t m = shape.m, k = shape.k, n = shape.n, g = shape.groups;
    std::vector<float> lhs(static_cast<size_t>(m * k));
    fill_inputs(lhs, 1, shape.lhs_dtype);
    const bool tgmm = shape.pass == Pass::kGradRhs;
    std::vector<float> rhs(static_cast<size_t>(tgmm ? m * n : g * k * n));
    fill_inputs(rhs, 2, shape.rhs_dtype);
    if (shape.quantization) {
      // Codes and scales as the quantized ops lay them out; the reference
      // sees the values the backend computes with.
      const QuantRecipe recipe = *shape.quantization;
      quantized_lhs_ = quantized_operand(shape, recipe, 0, lhs);
      quantized_rhs_ = quantized_operand(shape, recipe, 1, rhs);
      lhs = quantized_lhs_.values;
      rhs = quantized_rhs_.values;
      lhs_operand_ = quantized_lhs_.operand();
      rhs_operand_ = quantized_rhs_.operand();
    } else {
      lhs_ = to_storage(lhs, {m, k}, shape.lhs_dtype);
      const Shape rhs_shape = tgmm ? Shape{m, n} : shape.pass == Pass::kGradLhs ? Shape{g, n, k} : Shape{g, k, n};
      rhs_ = to_storage(rhs, rhs_shape, shape.rhs_dtype);
      lhs_operand_ = lhs_.view();
      rhs_operand_ = rhs_.view();
    }
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

  // One call of the backend on a spec of the tuning inputs (valid by
  // construction: the spec's derived fields are filled, not checked).
  void run(const TuneCandidate& c, const SizeSet& set) {
    if (before_run_) before_run_(c);
    backends::GmmSpec spec;
    spec.pass = shape_.pass;
    spec.lhs = lhs_operand_;
    spec.rhs = rhs_operand_;
    spec.group_sizes = set.group_sizes.view();
    spec.out = out_.view();
    spec.threads = threads_;
    backends::derive(spec);
    backend_.run(spec, c, &workspace_);
  }

  GmmShape shape_;
  const backends::Backend& backend_;
  // The candidates' scratch: freed with the bench, so the largest tile tried
  // does not stay in every thread's own buffers after tuning.
  backends::Workspace workspace_;
  int threads_;
  std::function<bool(const TuneCandidate&)> sabotage_;
  std::function<void(const TuneCandidate&)> before_run_;
  Tensor lhs_, rhs_, out_;
  QuantizedOperand quantized_lhs_, quantized_rhs_;
  backends::GmmOperand lhs_operand_, rhs_operand_;
  std::vector<SizeSet> sets_;
};

struct Timed {
  TuneCandidate candidate;
  double seconds = 0;
  bool passed = false;
};

}  // namespace

TuneResult tune_problem(const GmmShape& shape, const TuneOptions& options) {
  const auto start = Clock::now();
  const MachineModel machine = this_machine();
  const backends::Backend& backend = backends::default_backend();
  TuneResult result;
  result.heuristic = heuristic(shape, machine);
  const TuneCandidate heuristic_candidate{result.heuristic.tiles, result.heuristic.kernel,
                                          result.heuristic.input_buffer_count};
  Bench bench(shape, options, backend);
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
    // The budget bounds the search once it has an answer: until some
    // candidate passed the check (the baseline may not, on a broken kernel),
    // the search goes on past it.
    if (best_passing() && seconds_since(start) + kCostMargin * last_cost > options.budget_s) {
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
  // The backend proposes candidates round by round from what was measured
  // (round 0 starts with its heuristic's config: the baseline).
  for (int round = 0;; ++round) {
    Measurements measured;
    for (const Timed& t : timed) measured.push_back(CandidateTiming{t.candidate, t.seconds, t.passed});
    const std::vector<TuneCandidate> candidates = backend.candidates(shape, machine, round, measured);
    if (candidates.empty()) break;
    for (const TuneCandidate& c : candidates) try_candidate(c);
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
