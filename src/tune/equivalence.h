// The equivalence check of the autotuner: every candidate's output on the
// tuning inputs is compared with an f64 reference at sampled output rows
// (gmm: whole output rows, including rows past sum(group sizes), which must
// be zero; tgmm: whole rows of sampled groups' [K, N] slices, including empty
// groups' zero slices). Sampling keeps the reference affordable at tuning
// sizes (a full f64 reference of one 4096 x 1024 x 1024 pass takes seconds).
#pragma once

#include <cstdint>
#include <vector>

#include "raggemm/plan.h"

namespace raggemm::tune {

struct SampledReference {
  // Offsets (in floats) of the first element of each sampled output row, and
  // the expected row values (n each) with their error bound.
  std::vector<int64_t> row_offsets;
  std::vector<double> expected;  // row_offsets.size() * n
  std::vector<double> bound;     // |error| allowed per element
  int64_t n = 0;
};

// lhs [m, k] f32; gmm fwd: rhs [G, k, n]; dlhs: rhs [G, n, k]; drhs: rhs is
// dout [m, n]. Samples about `samples` rows.
SampledReference sample_reference(const GmmShape& shape, const std::vector<int32_t>& group_sizes,
                                  const float* lhs, const float* rhs, int samples);

// Whether `out` (the op's full output) matches the sampled reference.
bool matches_reference(const SampledReference& reference, const float* out);

}  // namespace raggemm::tune
