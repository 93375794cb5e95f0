// One grouped matmul as the layers from the backends up reason about it
// (the heuristic, the backends' candidates, the tuner and its cache): its
// pass, its shape in op terms, and one configuration of a kernel to run it.
// Plain data, so it lives in core.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "raggemm/dtype.h"
#include "raggemm/quant_types.h"
#include "raggemm/tiles.h"

namespace raggemm {

// ---------------------------------------------------------------------------
// Passes.

enum class Pass : uint8_t { kForward, kGradLhs, kGradRhs };

inline constexpr std::array<Pass, 3> kAllPasses = {Pass::kForward, Pass::kGradLhs,
                                                   Pass::kGradRhs};

const char* pass_name(Pass pass);              // "fwd", "dlhs", "drhs"
// The op that runs a pass: "gmm" for fwd and dlhs (dlhs transposes rhs), "tgmm" for drhs.
const char* pass_op_name(Pass pass);
Pass parse_pass(const std::string& name, const std::string& argument);

// ---------------------------------------------------------------------------
// Problems, as the cache and the heuristic see them.

// One grouped matmul in op terms. lhs is [m, k]; fwd: rhs [G, k, n];
// dlhs: rhs [G, n, k] (gmm with transpose_rhs); drhs: tgmm of lhs [m, k] and
// dout [m, n] into [G, k, n]. m is always the token (ragged) dimension.
struct GmmShape {
  Pass pass = Pass::kForward;
  int64_t m = 0;
  int64_t k = 0;
  int64_t n = 0;
  int64_t groups = 0;
  DType lhs_dtype = DType::kF32;
  DType rhs_dtype = DType::kF32;
  // The recipe of a quantized pass (its spelling in cache keys:
  // quantization_name), or none.
  Quantization quantization;
  std::vector<int32_t> group_sizes;  // empty: unknown, balanced m/groups assumed
};

// Kernel-axis extents of a shape: gmm (m, k, n); tgmm (k, m, n), since tgmm's
// kernel tiles its [k, n] output and contracts the tokens.
Tiles kernel_extents(const GmmShape& shape);

// One configuration of a kernel: what a backend offers as a candidate,
// what its heuristic picks and what the tuner times and caches.
struct TuneCandidate {
  Tiles tiles;  // kernel tiles, all > 0
  KernelVersion kernel = KernelVersion::kV1;
  int input_buffer_count = 1;
  bool operator==(const TuneCandidate&) const = default;
};

// One candidate as the tuner measured it.
struct CandidateTiming {
  TuneCandidate candidate;
  double seconds = 0;         // median time of one call, summed over the tuning inputs
  bool passed_check = false;  // agreed with the reference on the tuning inputs
};

}  // namespace raggemm
