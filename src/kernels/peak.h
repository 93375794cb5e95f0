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

// Both probes on `threads` OpenMP threads started together behind a
// barrier, best of `rounds` (one thread descheduled for a moment would
// otherwise stretch the slowest thread's time, which the aggregate rate
// divides by). The microkernel probe runs only when `microkernel`.
struct PeakRates {
  const char* fma_target = "";
  double fma_gflops = 0;
  const char* microkernel_target = "";
  double microkernel_gflops = 0;
};
PeakRates measure_peaks(int threads, int rounds, bool microkernel);

}  // namespace raggemm::kernels
