// Machine-peak probes for the benchmark reports: the FMA throughput of the
// chosen Highway target with operands in registers, and the microkernel's own
// throughput on panels that sit in L1. Both run on the calling thread.
#pragma once

#include <cstdint>

namespace raggemm::kernels {

struct PeakResult {
  const char* target;
  double seconds;
  double flops;
};

// `iterations` rounds of 2 x MR independent FMA chains (no memory traffic).
PeakResult measure_fma_peak(int64_t iterations);

// Repeated microkernel calls on one L1-resident A and B micro-panel pair.
PeakResult measure_microkernel_peak(int64_t calls, int64_t kc);

}  // namespace raggemm::kernels
