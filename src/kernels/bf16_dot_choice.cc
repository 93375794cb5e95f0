// The measured choice between the bf16 dot kernel and widening to f32
// (bf16_dot_choice.h).
#include "kernels/bf16_dot_choice.h"

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "kernels/measured_once.h"
#include "kernels/microkernel.h"
#include "kernels/workspace.h"

namespace raggemm::kernels {
namespace {

// 256 k: the kernels' panels stay in L1 (a dot kernel's B panel is
// nr x 256 bf16, the f32 one's nr x 256 f32; AMX_BF16's A and B panels 16
// KiB each) and the tile's loads and stores are a few percent of its work,
// so the rate is the instruction's. 128 pairs are whole 32-k AMX blocks.
constexpr int64_t kK = 256;
constexpr int64_t kCalls = 200;  // about 0.4 ms a round at 100 GFLOP/s
constexpr int kRounds = 5;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Panels of small values (no overflow, no subnormals over kCalls
// accumulations), the output accumulated into so no call is dead.
struct Panels {
  ScratchBuffer a, b, c;
};

double dot_round(const Bf16Microkernel& uk, Panels& p) {
  const int64_t kp = kK / 2;
  uint16_t* a = reinterpret_cast<uint16_t*>(p.a.at_least(kp * uk.mr));
  uint16_t* b = reinterpret_cast<uint16_t*>(p.b.at_least(kp * uk.nr));
  float* c = p.c.at_least(int64_t{uk.mr} * uk.nr);
  std::fill(a, a + kp * uk.mr * 2, uint16_t{0x3a83});  // bf16 of about 1e-3
  std::fill(b, b + kp * uk.nr * 2, uint16_t{0x3a83});
  std::fill(c, c + uk.mr * uk.nr, 0.0f);
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < kCalls; ++i) uk.run(kp, a, b, c, uk.nr, uk.mr, uk.nr, Store::kAccumulate);
  return 2.0 * kK * uk.mr * uk.nr * kCalls / seconds_since(start) / 1e9;
}

double f32_round(const Microkernel& uk, Panels& p) {
  float* a = p.a.at_least(kK * uk.mr);
  float* b = p.b.at_least(kK * uk.nr);
  float* c = p.c.at_least(int64_t{uk.mr} * uk.nr);
  std::fill(a, a + kK * uk.mr, 1e-3f);
  std::fill(b, b + kK * uk.nr, 1e-3f);
  std::fill(c, c + uk.mr * uk.nr, 0.0f);
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < kCalls; ++i) {
    uk.run(kK, a, b, c, uk.nr, uk.mr, uk.nr, Store::kAccumulate, nullptr, nullptr);
  }
  return 2.0 * kK * uk.mr * uk.nr * kCalls / seconds_since(start) / 1e9;
}

}  // namespace

Bf16DotRates measure_bf16_dot_rates(const Bf16Microkernel& dot) {
  const Microkernel f32 = select_microkernel();
  Panels dot_panels, f32_panels;
  dot_round(dot, dot_panels);  // warm-up: clocks ramp, panels reach L1
  f32_round(f32, f32_panels);
  Bf16DotRates rates{dot.target, f32.target, 0, 0, false};
  // Interleaved, best of each: a moment of noise slows one round of one
  // kernel, not the other's best.
  for (int round = 0; round < kRounds; ++round) {
    rates.dot_gflops = std::max(rates.dot_gflops, dot_round(dot, dot_panels));
    rates.f32_gflops = std::max(rates.f32_gflops, f32_round(f32, f32_panels));
  }
  rates.dot_chosen = bf16_dot_pays_off(rates.dot_gflops, rates.f32_gflops);
  return rates;
}

const Bf16DotRates& bf16_dot_rates(const Bf16Microkernel& dot) {
  // One answer per kernel serves the process (the registry asks about its
  // automatic kernels in order, AMX_BF16 before AVX512_BF16).
  struct Tag {};
  return measured_once<Bf16DotRates, Tag>(dot.target,
                                          [&] { return measure_bf16_dot_rates(dot); });
}

}  // namespace raggemm::kernels
