// Process-CPU-time A/B of ours at M = 4096, uniform groups: f32 gmm_into
// against the quantized forward pass (int8, fp8 e4m3; activation
// quantization included, weights held quantized) into the same
// preallocated output, in alternating rounds, best of each. On a shared
// machine, wall-clock times at 1 thread include the time other processes
// held the core; process CPU time does not.
//
//   quant_cpu_time_bench K N GROUPS THREADS ROUNDS [best|AVX2] [auto|AVX512_VNNI|AVX_VNNI|AVX2|SCALAR]
//
// The 6th argument forces the f32 kernels' Highway target down to AVX2
// (`raggemm bench --target AVX2`), the 7th the int8 microkernel
// (`--int8-kernel`). With THREADS > 1, CPU time also counts OpenMP's
// spin-waits, so read the wall column there.
#include <hwy/targets.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "kernels/microkernel_registry.h"
#include "raggemm/gmm.h"
#include "raggemm/quant.h"

using namespace raggemm;

namespace {
double cpu_ms() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) * 1e-6;
}
double wall_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s K N GROUPS THREADS ROUNDS [best|AVX2] [int8 kernel]\n", argv[0]);
    return 2;
  }
  const int64_t k = std::atoll(argv[1]), n = std::atoll(argv[2]), groups = std::atoll(argv[3]);
  const int threads = std::atoi(argv[4]), rounds = std::atoi(argv[5]);
  const std::string target = argc > 6 ? argv[6] : "best";
  const std::string int8_kernel = argc > 7 ? argv[7] : "auto";
  if (target == "AVX2") hwy::SetSupportedTargetsForTest(HWY_AVX2);
  if (!kernels::force_int8_microkernel(int8_kernel)) {
    std::fprintf(stderr, "this CPU cannot run int8 kernel %s\n", int8_kernel.c_str());
    return 2;
  }
  const int64_t m = 4096;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  Tensor a(DType::kF32, {m, k}), w(DType::kF32, {groups, k, n}), out(DType::kF32, {m, n});
  Tensor sizes(DType::kI32, {groups});
  for (int64_t i = 0; i < a.numel(); ++i) a.as<float>()[i] = uniform(rng);
  for (int64_t i = 0; i < w.numel(); ++i) w.as<float>()[i] = uniform(rng);
  for (int64_t g = 0; g < groups; ++g) {
    sizes.as<int32_t>()[g] = static_cast<int32_t>(m / groups + (g < m % groups ? 1 : 0));
  }
  GmmOptions options;
  options.threads = threads;
  options.kernel = KernelVersion::kV2;
  const QuantRecipe recipes[2] = {QuantRecipe::kInt8, QuantRecipe::kFp8};
  const QuantizedTensor weights[2] = {quantize_weight(w.view(), recipes[0], {}),
                                      quantize_weight(w.view(), recipes[1], {})};
  const char* names[3] = {"f32", "int8", "fp8"};
  double cpu[3] = {1e300, 1e300, 1e300}, wall[3] = {1e300, 1e300, 1e300};
  double quantize[3] = {0, 1e300, 1e300};
  for (int round = 0; round <= rounds; ++round) {  // round 0 warms up
    for (int v = 0; v < 3; ++v) {
      const double c0 = cpu_ms(), w0 = wall_ms();
      double cq = 0;
      if (v == 0) {
        gmm_into(a.view(), w.view(), sizes.view(), out.view(), options);
      } else {
        QuantGmmOptions quant;
        quant.recipe = recipes[v - 1];
        const QuantizedGmmOperands operands =
            prepare_quantized_gmm(a.view(), weights[v - 1], sizes.view(), options, quant);
        cq = cpu_ms() - c0;
        run_quantized_gmm_into(operands, sizes.view(), out.view(), options, quant);
      }
      if (round == 0) continue;
      cpu[v] = std::min(cpu[v], cpu_ms() - c0);
      wall[v] = std::min(wall[v], wall_ms() - w0);
      if (v > 0) quantize[v] = std::min(quantize[v], cq);
    }
  }
  std::printf("K=%lld N=%lld G=%lld threads=%d f32 target=%s int8=%s:", static_cast<long long>(k),
              static_cast<long long>(n), static_cast<long long>(groups), threads, target.c_str(),
              kernels::select_int8_microkernel().target);
  for (int v = 0; v < 3; ++v) {
    std::printf(" %s cpu %.1f ms (quantize %.1f) wall %.1f;", names[v], cpu[v], quantize[v], wall[v]);
  }
  std::printf(" int8/f32 cpu %.2fx wall %.2fx, fp8/f32 cpu %.2fx wall %.2fx\n", cpu[0] / cpu[1],
              wall[0] / wall[1], cpu[0] / cpu[2], wall[0] / wall[2]);
  return 0;
}
