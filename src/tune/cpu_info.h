// What the tuner knows of the CPU it runs on: the machine model's caches
// (kernels/machine_model.h, read at run time with fallbacks), the model
// name, and the SIMD target the kernels run.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/machine_model.h"

namespace raggemm::tune {

using kernels::CacheSizes;
using kernels::parse_cache_size;

// This machine's caches (kernels::this_machine_model()).
const CacheSizes& cache_sizes();

// "model name" of /proc/cpuinfo (or "unknown-cpu"), whitespace squeezed.
const std::string& cpu_model_name();

// The name of the SIMD target the microkernels dispatch to (e.g. "AVX3_ZEN4").
std::string isa_target_name();

}  // namespace raggemm::tune
