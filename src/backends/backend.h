// A backend runs grouped matmuls described by a GmmSpec (DESIGN.md s.5). The
// CPU kernels are one (backends/cpu/), the f64 reference another
// (backends/reference/); both are listed in backends/registry.cc, and a new
// backend is one more folder here and one more line there
// (docs/kernels.md, "Adding a backend").
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "backends/gmm_spec.h"
#include "backends/workspace.h"
#include "kernels/machine_model.h"
#include "raggemm/problem.h"

namespace raggemm::backends {

// The search state the tuner hands back to a backend for its next round of
// candidates: every configuration timed so far, with its time.
using Measurements = std::vector<CandidateTiming>;

class Backend {
 public:
  virtual ~Backend() = default;

  // The name callers select it by (GmmOptions::backend, the case table).
  virtual const char* name() const = 0;

  // "" when this backend runs `spec` (validated); otherwise why not, in
  // words an error message can carry.
  virtual std::string unsupported(const GmmSpec& spec) const = 0;

  // The kernel generations it offers as configurations (GmmOptions::kernel
  // fixes one; the case table crosses every one). Empty: one configuration,
  // and the kernel setting does not apply.
  virtual std::vector<KernelVersion> kernel_versions() const = 0;

  // The configuration to run a problem of this shape with when the caller
  // fixes none, on `machine`; `kernel`, when set, is the generation the
  // caller fixed (its tiles are then chosen for it).
  virtual TuneCandidate heuristic(const GmmShape& shape, const kernels::MachineModel& machine,
                                  std::optional<KernelVersion> kernel = std::nullopt) const = 0;

  // Candidates for the tuner, in rounds: round 0 from the heuristic alone,
  // each later round from the measurements so far. An empty list ends the
  // search. The tuner times them (through run) and never calls the ops.
  virtual std::vector<TuneCandidate> candidates(const GmmShape& shape,
                                                const kernels::MachineModel& machine, int round,
                                                const Measurements& measured) const = 0;

  // Runs `spec` with `config` (all tiles set), its scratch in `workspace`
  // (this backend's part of it, made on first use) or, null, in the
  // backend's own (the CPU kernels: each thread's packing buffers, kept for
  // the thread's life). A workspace held by another call is refused.
  virtual void run(const GmmSpec& spec, const TuneCandidate& config,
                   Workspace* workspace) const = 0;
};

}  // namespace raggemm::backends
