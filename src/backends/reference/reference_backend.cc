#include "backends/reference/reference_backend.h"

#include <optional>

#include "backends/kernel_problem.h"
#include "kernels/reference.h"

namespace raggemm::backends::reference {
namespace {

class ReferenceBackend final : public Backend {
 public:
  const char* name() const override { return "reference"; }

  // The oracle reads every operand through the kernels' decode and applies
  // the same output stage, so it runs every valid spec.
  std::string unsupported(const GmmSpec&) const override { return ""; }

  // One naive loop nest: no generations to choose between.
  std::vector<KernelVersion> kernel_versions() const override { return {}; }

  // No tiles: one configuration, whatever the shape.
  TuneCandidate heuristic(const GmmShape&, const kernels::MachineModel&,
                          std::optional<KernelVersion> kernel) const override {
    return TuneCandidate{Tiles{1, 1, 1}, kernel.value_or(KernelVersion::kV2), 1};
  }

  // Nothing to tune.
  std::vector<TuneCandidate> candidates(const GmmShape& shape, const kernels::MachineModel& machine,
                                        int round, const Measurements&) const override {
    if (round > 0) return {};
    return {heuristic(shape, machine, std::nullopt)};
  }

  // The f64 accumulators are the oracle's own; a lent workspace is only
  // held, so the one-call-at-a-time contract is the same on every backend.
  void run(const GmmSpec& spec, const TuneCandidate&, Workspace* workspace) const override {
    std::optional<Workspace::InUse> held;
    if (workspace) held.emplace(*workspace);
    if (spec.pass == Pass::kGradRhs) {
      kernels::reference_tgmm(tgmm_problem(spec));
    } else {
      kernels::reference_gmm(gmm_problem(spec));
    }
  }
};

}  // namespace

const Backend& reference_backend() {
  static const ReferenceBackend backend;
  return backend;
}

}  // namespace raggemm::backends::reference
