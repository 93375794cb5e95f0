// The f64 oracle (kernels/reference.h) as a backend: the same kernel problem
// the CPU backend builds, computed naively with f64 accumulation. Selected
// only by name (GmmOptions::backend = "reference"); never for speed.
#pragma once

#include "backends/backend.h"

namespace raggemm::backends::reference {

const Backend& reference_backend();

}  // namespace raggemm::backends::reference
