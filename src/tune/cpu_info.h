// What the tuner knows of the CPU it runs on: data cache sizes (read at run
// time, with fallbacks), the model name, and the SIMD target the kernels run.
#pragma once

#include <cstdint>
#include <string>

namespace raggemm::tune {

struct CacheSizes {
  int64_t l1d = 0;  // bytes, per core
  int64_t l2 = 0;   // bytes, per core
  int64_t l3 = 0;   // bytes, shared
};

// Read once: /sys/devices/system/cpu/cpu0/cache first (sysconf reports the
// host's figures under some hypervisors), then sysconf, then typical values
// (48 KiB, 1 MiB, 16 MiB). Sizes outside a sane range are replaced by the
// fallback.
const CacheSizes& cache_sizes();

// Parses "48K", "1024K", "32M", "65536" (the format of sysfs cache/size).
int64_t parse_cache_size(const std::string& text);

// "model name" of /proc/cpuinfo (or "unknown-cpu"), whitespace squeezed.
const std::string& cpu_model_name();

// The name of the SIMD target the microkernels dispatch to (e.g. "AVX3_ZEN4").
std::string isa_target_name();

}  // namespace raggemm::tune
