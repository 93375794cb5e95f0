// The autotuner: races the candidate configs the backend proposes for one
// grouped-matmul problem (backends/cpu/candidates.h: powers of two and
// divisors of the dims, aligned to the microkernel's MR/NR, around the
// heuristic's choice; both kernel versions; input buffer counts 1..4) on
// synthetic inputs, plain or quantized, running them through the backend
// (never the public ops), and returns the fastest that passes the
// equivalence check. Search and pruning: docs/tiling.md.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <vector>

#include "backends/cpu/candidates.h"
#include "raggemm/plan.h"

namespace raggemm::tune {

struct TuneOptions {
  double budget_s = 10.0;         // wall-clock budget for this problem
  int threads = 0;                // as the ops take it (0: OpenMP's default)
  std::ostream* log = nullptr;    // progress lines, if set
  double prune_ratio = 1.25;      // after round 1, drop candidates slower than this x the best
  // Test hook: corrupts the output of the candidates it returns true for,
  // after they ran and before the check, to prove they are never picked.
  std::function<bool(const TuneCandidate&)> sabotage;
  // Test hook: called before every run of a candidate (to count or slow
  // down the runs of chosen candidates).
  std::function<void(const TuneCandidate&)> before_run;
};

struct TuneResult {
  TuneEntry entry;                 // winner, every timing, the heuristic's time
  ResolvedPassConfig heuristic;    // what the heuristic picked
  double winner_seconds = 0;       // the winner's time in the same run
  int candidates_timed = 0;
  bool budget_cut = false;         // the budget stopped the search early
};

// Tunes `shape` on its group sizes (when given) and on balanced sizes m/G.
// Never returns a candidate that failed the equivalence check; throws Error
// if none passes (a broken kernel, not a tuning outcome).
TuneResult tune_problem(const GmmShape& shape, const TuneOptions& options);

// The candidate values of one kernel axis (the CPU backend's rule).
using backends::cpu::axis_candidates;

}  // namespace raggemm::tune
