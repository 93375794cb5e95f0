// Whether a small f32 gmm item's B chunks are packed by the microkernel
// calls of the first A micro-panel (Microkernel::run_packing_b) or by
// pack_b just before them: decided by measuring both on this CPU, once per
// process and microkernel, because the answer differs between CPUs. On a
// Zen 3 (AVX2) packing inside the microkernel ran 128 groups of 32 rows
// 1.07-1.10x faster (docs/performance.md, 5 December); on the Xeon model 167
// (AVX-512, 2 MiB L2) the separate pack_b ran them 1.08-1.16x faster on the
// AVX3 microkernel and 1.0-1.40x on the AVX2 one, and the default training
// step's GMMs 211 -> 220 GFLOP/s (7 December). Both give the same bits.
//
// gmm_v2 asks this only for problems that have such chunks (a plain f32
// [K,N] weight); tests run both ways through gmm_v2_f32 (f32_gmm_policy.h).
#pragma once

#include "kernels/microkernel.h"

namespace raggemm::kernels {

// Each way's rate on the same small-group problem (2 groups of 32 rows,
// K = 256, N four chunks wide, so each item streams its chunks in as in a
// real call), its weights flushed from the caches before every run (they
// come from DRAM, as a model's do), one thread, best of 3 interleaved
// rounds.
struct BPackingRates {
  const char* target = "";
  double in_microkernel_gflops = 0;
  double separate_gflops = 0;
  bool in_microkernel = true;  // the choice: b_packing_in_microkernel_pays(...)
};

// The rule: the separate pack_b must be faster by kSeparatePackingMargin to
// take the job from the microkernel's packing (the default this path was
// measured into), so timing noise near a tie cannot flip it between runs.
inline constexpr double kSeparatePackingMargin = 1.03;
inline bool b_packing_in_microkernel_pays(double in_microkernel_gflops, double separate_gflops) {
  return separate_gflops < kSeparatePackingMargin * in_microkernel_gflops;
}

// Measured the first time it is asked about `uk`'s target (about 20 ms, on a
// thread of its own, so no caller's workspace is touched); later calls
// return the same answer. A microkernel without run_packing_b gets false
// without a measurement.
const BPackingRates& b_packing_rates(const Microkernel& uk);

// Measures now, every time.
BPackingRates measure_b_packing_rates(const Microkernel& uk);

}  // namespace raggemm::kernels
