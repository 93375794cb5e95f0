// Whether bf16 x bf16 passes run on the bf16 dot kernel or widen to f32:
// decided by measuring both on this CPU, once per process, because the
// answer differs between CPUs that have the same instructions. vdpbf16ps
// does twice the multiply-adds of an f32 FMA of the same width, but on a
// Zen 5 it issues like an FMA (the dot kernel ran bf16 gmm at 1.7x dense
// f32) while on Intel Xeons with AMX (family 6, 2 MiB L2 per core, under
// KVM) it is slow: 0.58x the f32 microkernel on model 167, where widening
// ran bf16 gmm 1.2-1.5x faster than the dot kernel (docs/kernels.md).
//
// The registry (microkernel_registry.cc) asks this before it chooses a dot
// kernel automatically; a forced kernel (--bf16-kernel, tests) is not asked.
#pragma once

#include "kernels/bf16_microkernel.h"

namespace raggemm::kernels {

// The dot kernel's rate against the f32 microkernel's, each on one thread
// with L1-resident panels (the same contraction length), best of a few
// interleaved rounds. GFLOP/s count 2 flops a multiply-add for both.
struct Bf16DotRates {
  const char* dot_target = "";
  const char* f32_target = "";
  double dot_gflops = 0;
  double f32_gflops = 0;
  bool dot_chosen = false;  // bf16_dot_pays_off(dot_gflops, f32_gflops)
};

// The rule: the dot kernel runs only when it is clearly faster, by
// kBf16DotMargin. Near a tie the widening path keeps the job (it is bit for
// bit the f32 kernels on widened values, and packs no pairs), and timing
// noise cannot flip the choice between two runs on the same machine.
inline constexpr double kBf16DotMargin = 1.15;
inline bool bf16_dot_pays_off(double dot_gflops, double f32_gflops) {
  return dot_gflops >= kBf16DotMargin * f32_gflops;
}

// Measured the first time it is asked about `dot` (about 5 ms on one
// thread, in the caller's thread, with buffers of its own: no thread's or
// lent workspace is touched), against the f32 microkernel the Highway
// dispatch runs then. Later calls about the same kernel return the same
// answer.
const Bf16DotRates& bf16_dot_rates(const Bf16Microkernel& dot);

// Measures now, every time (raggemm peak reports it).
Bf16DotRates measure_bf16_dot_rates(const Bf16Microkernel& dot);

}  // namespace raggemm::kernels
