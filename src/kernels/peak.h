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

// The same for the selected int8 microkernel (kq quads of k); `flops`
// counts 2 operations a multiply-add, as GFLOP/s figures of int8 runs do.
// It shows what int8 can reach on this CPU against the f32 FMA peak: the
// AVX2 kernel's vpmaddwd + vpaddd pairs cap it near 1.5x on a Zen 3.
PeakResult measure_int8_microkernel_peak(int64_t calls, int64_t kq);

// The same for the bf16 dot kernel (kp pairs of k; 2 flops a multiply-add):
// the selected one, else the SIMD one the automatic choice turned down, or
// {"WIDEN", 0, 0} when this CPU has none. It shows whether the dot kernel
// beats the f32 microkernel here: its instruction does twice the
// multiply-adds of an FMA, at a rate that differs between CPUs
// (bf16_dot_choice.h).
PeakResult measure_bf16_microkernel_peak(int64_t calls, int64_t kp);

// Both probes on `threads` OpenMP threads started together behind a
// barrier, best of `rounds` (one thread descheduled for a moment would
// otherwise stretch the slowest thread's time, which the aggregate rate
// divides by). The microkernel probes (f32, int8, bf16) run only when
// `microkernel`.
struct PeakRates {
  const char* fma_target = "";
  double fma_gflops = 0;
  const char* microkernel_target = "";
  double microkernel_gflops = 0;
  const char* int8_microkernel_target = "";
  double int8_microkernel_gops = 0;
  const char* bf16_microkernel_target = "";
  double bf16_microkernel_gflops = 0;  // 0: no bf16 dot kernel selected (WIDEN)
};
PeakRates measure_peaks(int threads, int rounds, bool microkernel);

}  // namespace raggemm::kernels
