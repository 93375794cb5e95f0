// raggemm.trace(path): a process-wide trace (raggemm/profiler.h) that the
// numpy, torch and JAX entry points record their GMM events into while it is
// open, plus the spans Python code opens with raggemm.trace_span (steps,
// layers). One process per trace (pid = the rank given to trace()), one track
// per calling thread (JAX runs its custom calls on its own threads).
#pragma once

#include <memory>
#include <string>

#include "raggemm/plan.h"
#include "raggemm/profiler.h"
#include "raggemm/tensor.h"

namespace raggemm::python {

// The open trace, or null. The pointer keeps it alive for one call even if
// another thread closes the trace meanwhile.
std::shared_ptr<Profiler> active_trace();

// Runs `op` (one GMM pass on operands a, b: see resolve_call) inside a GMM
// event of the open trace, if any, with the args of raggemm/profiler.h.
template <class Op>
void traced_gmm(Pass pass, const std::string& weight, const ResolvedPassConfig& config,
                const TensorView& a, const TensorView& b, const TensorView& group_sizes,
                int64_t local_groups, Op&& op);

// The weight's problem dims (M, K, N, G) and useful flops of a call, for its event.
struct GmmEventDims {
  int64_t m = 0, k = 0, n = 0, groups = 0;
  double flops = 0;
};
GmmEventDims gmm_event_dims(Pass pass, const TensorView& a, const TensorView& b,
                            const TensorView& group_sizes, int64_t local_groups);

template <class Op>
void traced_gmm(Pass pass, const std::string& weight, const ResolvedPassConfig& config,
                const TensorView& a, const TensorView& b, const TensorView& group_sizes,
                int64_t local_groups, Op&& op) {
  const std::shared_ptr<Profiler> trace = active_trace();
  if (!trace) return op();
  const GmmEventDims dims = gmm_event_dims(pass, a, b, group_sizes, local_groups);
  auto scope = profile(trace.get(), pass_op_name(pass), OpKind::kExpertGmm, dims.flops);
  annotate_gmm(scope, pass, weight, &config, dims.m, dims.k, dims.n, dims.groups);
  op();
}

}  // namespace raggemm::python
