// The machine the kernels run on, in one struct: what the tile heuristic
// (tune/heuristic.h) derives every block size from, and what a backend's
// heuristic(spec, machine) receives (DESIGN.md sections 5 and 7). It lives
// below the drivers so that every layer above can reach it; nothing in it
// is fitted to one CPU: caches come from sysfs (then sysconf, then typical
// values), the register tile and vector width from the microkernel the
// dispatch picked, cores from the OS, bandwidth from a probe when one ran.
//
// Recorded models of machines we do not have (tests/tune/machines/*.json)
// are the same struct filled from a file, so the heuristic can be held
// against each of them in a test.
#pragma once

#include <cstdint>
#include <string>

namespace raggemm::kernels {

struct CacheSizes {
  int64_t l1d = 0;  // bytes, per core
  int64_t l2 = 0;   // bytes, per core
  int64_t l3 = 0;   // bytes, shared by l3_sharing_cpus
};

struct MachineModel {
  std::string cpu_model;     // "model name" of /proc/cpuinfo
  CacheSizes caches;
  int l3_sharing_cpus = 0;   // logical CPUs sharing the L3 (sysfs shared_cpu_list); 0: all
  int line_bytes = 64;       // cache line
  std::string isa;           // the dispatched f32 target, e.g. "AVX3_ZEN4", "AVX2"
  int mr = 8;                // the dispatched f32 microkernel's register tile rows
  int nr = 16;               // and columns (two vectors)
  int vector_bytes = 32;     // of that target
  int cores = 1;             // logical CPUs online
  int threads = 1;           // threads the ops will use
  double dram_read_gbps = 0; // measured (raggemm peak / bench), 0 when not probed

  // The L3 bytes one of `threads` threads may plan for: the L3 divided
  // among the threads of this process that share it (at most its sharers:
  // threads on other L3s have their own; 0 sharers: all threads share it).
  int64_t l3_per_thread() const;
};

// Detected once (caches, line, cores, model name) and combined with the
// microkernel dispatched now (tests force targets) and `threads` (0: the
// OpenMP maximum).
MachineModel this_machine_model(int threads = 0);

// Parses "48K", "1024K", "32M", "65536" (the format of sysfs cache/size).
int64_t parse_cache_size(const std::string& text);

// Parses a sysfs CPU list ("0-3,8,10-11") into its count of CPUs (0 if bad).
int count_cpu_list(const std::string& text);

}  // namespace raggemm::kernels
