// Checks a peer's output against the f64 reference on a sample of its
// elements, so a peer run with a kernel its environment did not choose
// (cli/peer_child.h) is only trusted once it computes the right thing. A
// sample keeps the check cheap at benchmark sizes (a full f64 reference of
// M = 4096, K = N = 1024 costs seconds); a wrong kernel is wrong almost
// everywhere, so 512 elements spread over the output find it.
#pragma once

#include "cli/bench_runners.h"

namespace raggemm::bench {

// ||peer - reference|| / ||reference|| over sampled elements of `out`:
// the op's full output (dense = false, as the per-group loop writes it) or
// the dense peer's (dense = true: gmm and dlhs against group 0's weights,
// tgmm over all M rows).
double sampled_relative_error(const PeerOperands& p, const float* out, bool dense);

}  // namespace raggemm::bench
