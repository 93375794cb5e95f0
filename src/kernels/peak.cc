#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/peak.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <omp.h>

#include <algorithm>
#include <chrono>

#include "kernels/int8_microkernel.h"
#include "kernels/microkernel.h"
#include "kernels/microkernel_registry.h"
#include "kernels/peak.h"
#include "kernels/unsanitized.h"
#include "kernels/workspace.h"

HWY_BEFORE_NAMESPACE();
namespace raggemm::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Independent accumulators must cover the FMA latency times the FMA pipes
// (4 x 2 on Zen 4/5 and Skylake-X) with room to spare, so the loop is
// throughput-bound. 12 chains measured only 58% of the microkernel's rate on a
// Zen 5 core with 512-bit vectors, so targets with 32 vector registers use 24;
// 16-register targets keep 12 (plus the two constants) to avoid spilling.
constexpr int kChains = HWY_MAX_BYTES >= 64 ? 24 : 12;

RAGGEMM_UNSANITIZED double FmaLoop(int64_t iterations, float seed) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  V acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = hn::Set(d, seed * static_cast<float>(i));
  const V a = hn::Set(d, 0.999999f);
  const V b = hn::Set(d, 1e-7f);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 24
    for (int i = 0; i < kChains; ++i) acc[i] = hn::MulAdd(acc[i], a, b);
  }
  V sum = acc[0];
  for (int i = 1; i < kChains; ++i) sum = hn::Add(sum, acc[i]);
  return static_cast<double>(hn::GetLane(sum));
}

double FlopsPerIteration() {
  const hn::ScalableTag<float> d;
  return 2.0 * kChains * static_cast<double>(hn::Lanes(d));
}

const char* Name() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace raggemm::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace raggemm::kernels {

HWY_EXPORT(FmaLoop);
HWY_EXPORT(FlopsPerIteration);
HWY_EXPORT(Name);

namespace {
double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

PeakResult measure_fma_peak(int64_t iterations) {
  const auto start = std::chrono::steady_clock::now();
  volatile double sink = HWY_DYNAMIC_DISPATCH(FmaLoop)(iterations, 1e-3f);
  (void)sink;
  const double seconds = seconds_since(start);
  return {HWY_DYNAMIC_DISPATCH(Name)(), seconds,
          HWY_DYNAMIC_DISPATCH(FlopsPerIteration)() * static_cast<double>(iterations)};
}

PeakResult measure_microkernel_peak(int64_t calls, int64_t kc) {
  const Microkernel uk = select_microkernel();
  // Packed panels must be vector-aligned: take them from the workspace.
  float* a = workspace(Slot::kPackedA, kc * uk.mr);
  float* b = workspace(Slot::kPackedB, kc * uk.nr);
  float* c = workspace(Slot::kAccumulator, uk.mr * uk.nr);
  std::fill(a, a + kc * uk.mr, 1e-3f);
  std::fill(b, b + kc * uk.nr, 1e-3f);
  std::fill(c, c + uk.mr * uk.nr, 0.0f);
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < calls; ++i) uk.run(kc, a, b, c, uk.nr, uk.mr, uk.nr, Store::kAccumulate, nullptr, nullptr);
  const double seconds = seconds_since(start);
  return {uk.target, seconds, 2.0 * kc * uk.mr * uk.nr * static_cast<double>(calls)};
}

PeakResult measure_int8_microkernel_peak(int64_t calls, int64_t kq) {
  const Int8Microkernel& uk = select_int8_microkernel();
  const int64_t a_bytes = kq * uk.mr * 4 * (uk.a_int16 ? 2 : 1);
  uint8_t* a = workspace_as<uint8_t>(Slot::kPackedA, a_bytes);
  int8_t* b = workspace_as<int8_t>(Slot::kPackedB, kq * uk.nr * 4);
  int32_t* c = workspace_as<int32_t>(Slot::kAccumulator, uk.mr * uk.nr);
  std::fill(a, a + a_bytes, uint8_t{1});
  std::fill(b, b + kq * uk.nr * 4, int8_t{1});
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < calls; ++i) uk.run(kq, a, b, c, uk.nr, uk.mr, uk.nr, true);
  const double seconds = seconds_since(start);
  return {uk.target, seconds, 2.0 * 4 * kq * uk.mr * uk.nr * static_cast<double>(calls)};
}

PeakResult measure_bf16_microkernel_peak(int64_t calls, int64_t kp) {
  // The kernel bf16 passes run on, else the SIMD one the automatic choice
  // measured (and may have turned down for widening).
  const Bf16Microkernel* uk = select_bf16_microkernel();
  if (uk == nullptr) uk = bf16_dot_candidate();
  if (uk == nullptr) return {"WIDEN", 0, 0};
  uint16_t* a = workspace_as<uint16_t>(Slot::kPackedA, kp * uk->mr * 2);
  uint16_t* b = workspace_as<uint16_t>(Slot::kPackedB, kp * uk->nr * 2);
  float* c = workspace(Slot::kAccumulator, uk->mr * uk->nr);
  std::fill(a, a + kp * uk->mr * 2, uint16_t{0x3a83});  // bf16 of about 1e-3
  std::fill(b, b + kp * uk->nr * 2, uint16_t{0x3a83});
  std::fill(c, c + uk->mr * uk->nr, 0.0f);
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < calls; ++i) uk->run(kp, a, b, c, uk->nr, uk->mr, uk->nr, Store::kAccumulate);
  const double seconds = seconds_since(start);
  return {uk->target, seconds, 2.0 * 2 * kp * uk->mr * uk->nr * static_cast<double>(calls)};
}

PeakRates measure_peaks(int threads, int rounds, bool microkernel) {
  PeakRates rates;
  for (int round = 0; round < rounds; ++round) {
    double fma_flops = 0, fma_seconds = 0, uk_flops = 0, uk_seconds = 0, i8_ops = 0,
           i8_seconds = 0, bf_flops = 0, bf_seconds = 0;
    const char* fma_target = "";
    const char* uk_target = "";
    const char* i8_target = "";
    const char* bf_target = "";
#pragma omp parallel num_threads(threads) reduction(+ : fma_flops, uk_flops, i8_ops, bf_flops) \
    reduction(max : fma_seconds, uk_seconds, i8_seconds, bf_seconds)
    {
      measure_fma_peak(2000000);  // warm-up: clocks ramp, caches fill
#pragma omp barrier
      const PeakResult fma = measure_fma_peak(20000000);
      fma_flops += fma.flops;
      fma_seconds = fma.seconds;
      PeakResult uk{"", 0, 0}, i8{"", 0, 0}, bf{"", 0, 0};
      if (microkernel) {
        measure_microkernel_peak(2000, 256);
#pragma omp barrier
        uk = measure_microkernel_peak(20000, 256);
        uk_flops += uk.flops;
        uk_seconds = uk.seconds;
        // 128 quads: the int8 B panel (nr x 512 bytes) and A panel in L1.
        measure_int8_microkernel_peak(2000, 128);
#pragma omp barrier
        i8 = measure_int8_microkernel_peak(20000, 128);
        i8_ops += i8.flops;
        i8_seconds = i8.seconds;
        // 128 pairs: the bf16 B panel (nr x 512 bytes) and A panel in L1.
        measure_bf16_microkernel_peak(2000, 128);
#pragma omp barrier
        bf = measure_bf16_microkernel_peak(20000, 128);
        bf_flops += bf.flops;
        bf_seconds = bf.seconds;
      }
#pragma omp critical
      {
        fma_target = fma.target;
        uk_target = uk.target;
        i8_target = i8.target;
        bf_target = bf.target;
      }
    }
    rates.fma_target = fma_target;
    rates.fma_gflops = std::max(rates.fma_gflops, fma_flops / fma_seconds / 1e9);
    if (microkernel) {
      rates.microkernel_target = uk_target;
      rates.microkernel_gflops = std::max(rates.microkernel_gflops, uk_flops / uk_seconds / 1e9);
      rates.int8_microkernel_target = i8_target;
      rates.int8_microkernel_gops =
          std::max(rates.int8_microkernel_gops, i8_ops / i8_seconds / 1e9);
      rates.bf16_microkernel_target = bf_target;
      if (bf_seconds > 0) {
        rates.bf16_microkernel_gflops =
            std::max(rates.bf16_microkernel_gflops, bf_flops / bf_seconds / 1e9);
      }
    }
  }
  return rates;
}

}  // namespace raggemm::kernels
#endif  // HWY_ONCE
