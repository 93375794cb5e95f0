#include "backends/cpu/cpu_backend.h"

#include <optional>

#include "backends/cpu/candidates.h"
#include "backends/cpu/heuristic.h"
#include "backends/kernel_problem.h"
#include "kernels/workspace.h"

namespace raggemm::backends::cpu {
namespace {

// The CPU backend's part of a caller's workspace: the kernels' packing
// buffers, one set per thread of the teams its calls start.
struct PackingBuffers final : Workspace::Part {
  kernels::Workspace buffers;
  int64_t bytes() const override { return buffers.bytes(); }
};

class CpuBackend final : public Backend {
 public:
  const char* name() const override { return "cpu"; }

  // Everything a valid spec can say runs here.
  std::string unsupported(const GmmSpec&) const override { return ""; }

  std::vector<KernelVersion> kernel_versions() const override {
    return {KernelVersion::kV1, KernelVersion::kV2};
  }

  TuneCandidate heuristic(const GmmShape& shape, const MachineModel& machine,
                          std::optional<KernelVersion> kernel) const override {
    return cpu::heuristic(shape, machine, kernel);
  }

  std::vector<TuneCandidate> candidates(const GmmShape& shape, const MachineModel& machine,
                                        int round, const Measurements& measured) const override {
    return tuning_candidates(shape, machine, round, measured);
  }

  void run(const GmmSpec& spec, const TuneCandidate& config,
           Workspace* workspace) const override {
    std::optional<Workspace::InUse> held;
    std::optional<kernels::WorkspaceBinding> lent;
    if (workspace) {
      held.emplace(*workspace);
      lent.emplace(&workspace->part<PackingBuffers>(name()).buffers, 0);
    }
    kernels::Schedule schedule;
    schedule.tiles = config.tiles;
    schedule.threads = resolved_threads(spec);
    schedule.input_buffer_count = config.input_buffer_count;
    const bool v1 = config.kernel == KernelVersion::kV1;
    if (spec.pass == Pass::kGradRhs) {
      const kernels::TgmmProblem problem = tgmm_problem(spec);
      v1 ? kernels::tgmm_v1(problem, schedule) : kernels::tgmm_v2(problem, schedule);
      return;
    }
    if (const std::optional<kernels::Int8GmmProblem> int8 = int8_problem(spec)) {
      kernels::int8_gmm(*int8, schedule);
      return;
    }
    const kernels::GmmProblem problem = gmm_problem(spec);
    v1 ? kernels::gmm_v1(problem, schedule) : kernels::gmm_v2(problem, schedule);
  }
};

}  // namespace

const Backend& cpu_backend() {
  static const CpuBackend backend;
  return backend;
}

}  // namespace raggemm::backends::cpu
