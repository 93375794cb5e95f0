// Fast defaults for the Python entry points (numpy, torch, XLA FFI): what a
// call leaves unset (tiles, kernel, buffers) is resolved as the CLI resolves
// it, explicit > tune cache > heuristic (src/tune/resolve.cc), on the call's
// own shape, dtypes and group sizes, so a call with no options runs the
// fastest known path.
#pragma once

#include <optional>
#include <string>

#include "raggemm/gmm.h"
#include "raggemm/plan.h"
#include "raggemm/tensor.h"

namespace raggemm::python {

// What the caller fixed; zero tiles, "auto" kernel and 0 buffers are unset.
struct CallSettings {
  Tiles tiles{};
  std::string kernel = "auto";  // "v1", "v2" or "auto"
  int buffers = 0;              // 1..4, 0: unset
  int threads = 0;              // 0: OpenMP's default
  Quantization quantization;  // a quantized call's recipe: its tune-cache entries
};

// Resolves one call. `a` and `b` are the op's two operands as the op takes
// them: fwd (lhs [M,K], rhs [G,K,N]); dlhs (dout [M,N], rhs [G,K,N]); drhs
// (lhs [M,K], dout [M,N]). group_offset/local_groups select the groups that
// run (expert parallelism; local_groups -1: all). Uses the default tune cache
// ($RAGGEMM_TUNE_CACHE) unless RAGGEMM_NO_TUNE_CACHE is set.
ResolvedPassConfig resolve_call(Pass pass, const TensorView& a, const TensorView& b,
                                const TensorView& group_sizes, const CallSettings& settings,
                                int64_t group_offset = 0, int64_t local_groups = -1);

// The resolved config as GmmOptions / TgmmOptions fields.
void apply(const ResolvedPassConfig& config, int threads, GmmOptions& options);
void apply(const ResolvedPassConfig& config, int threads, TgmmOptions& options);

}  // namespace raggemm::python
