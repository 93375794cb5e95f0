// The heuristic as the plans see it: the default backend's choice for a
// shape (backends/cpu/heuristic.h has the CPU rules), as a resolved config
// whose every field comes from the heuristic.
#pragma once

#include <optional>

#include "backends/cpu/heuristic.h"
#include "tune/cpu_info.h"
#include "raggemm/plan.h"

namespace raggemm::tune {

using backends::cpu::MachineModel;
using backends::cpu::representative_group_sizes;
using backends::cpu::this_machine;
using backends::cpu::v1_row_waste;

ResolvedPassConfig heuristic(const GmmShape& shape, const MachineModel& machine,
                             std::optional<KernelVersion> kernel = std::nullopt);

}  // namespace raggemm::tune
