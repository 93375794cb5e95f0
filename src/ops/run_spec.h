// Running a validated spec: the configuration (explicit tiles and kernel >
// the chosen backend's heuristic on the call's own group sizes, tile k
// rounded to block-wise scales), then the backend.
#pragma once

#include "backends/backend.h"
#include "ops/validate.h"

namespace raggemm::ops {

// The backend the settings name, or the first that runs `spec`.
const backends::Backend& backend_for(const backends::GmmSpec& spec, const CallSettings& settings);

// The configuration `spec` runs with on `backend`: the settings' tiles
// where set, the rest from the backend's heuristic for the settings' kernel
// (never larger than the dims); tile k a multiple of spec.contracted_block
// (an explicit tile k that is not is refused, naming "tiles").
TuneCandidate resolve_config(const backends::Backend& backend, const backends::GmmSpec& spec,
                             const CallSettings& settings);

// Validates the output, then runs.
void run(const backends::GmmSpec& spec, const CallSettings& settings);

}  // namespace raggemm::ops
