// raggemm peak: this machine's fp32 FMA peak (registers only) and the
// microkernel's throughput on L1-resident panels, per thread and in total,
// for the best Highway target or a forced one. The benchmark reports quote
// their GFLOP/s against these figures.
#include <hwy/targets.h>
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/common.h"
#include "kernels/peak.h"
#include "raggemm/error.h"

namespace raggemm::cli {
namespace {

int run_peak(std::vector<std::string> args) {
  CLI::App app{"Measure the fp32 FMA peak and the microkernel's in-cache throughput", "peak"};
  std::string threads_text = "0";
  std::string target = "best";
  bool json = false;
  app.add_option("--threads", threads_text, "threads (0: OpenMP default)");
  app.add_option("--target", target, "best, or a Highway target name: AVX3, AVX2, SSE4, EMU128");
  app.add_flag("--json", json, "print one JSON object");
  parse_command_line(app, args);
  int threads = static_cast<int>(parse_int(threads_text, "--threads", 0, 1024));
  if (threads == 0) threads = omp_get_max_threads();
  if (target != "best") {
    int64_t chosen = 0;
    for (int64_t bit = 1; bit > 0 && bit <= hwy::SupportedTargets(); bit <<= 1) {
      if ((hwy::SupportedTargets() & bit) && target == hwy::TargetName(bit)) chosen = bit;
    }
    require(chosen != 0, "--target", target, "not a Highway target this CPU supports");
    hwy::SetSupportedTargetsForTest(chosen);
  }
  const char* fma_target = "";
  const char* uk_target = "";
  // Best of three rounds, each started together behind a barrier: one thread
  // descheduled for a moment (or started late) would otherwise stretch the
  // slowest thread's time, which is what the aggregate rate divides by.
  double fma_gflops = 0, uk_gflops = 0;
  for (int round = 0; round < 3; ++round) {
    double fma_flops = 0, fma_seconds = 0, uk_flops = 0, uk_seconds = 0;
#pragma omp parallel num_threads(threads) reduction(+ : fma_flops, uk_flops) \
    reduction(max : fma_seconds, uk_seconds)
    {
      kernels::measure_fma_peak(2000000);  // warm-up: clocks ramp, caches fill
#pragma omp barrier
      const kernels::PeakResult fma = kernels::measure_fma_peak(20000000);
      kernels::measure_microkernel_peak(2000, 256);
#pragma omp barrier
      const kernels::PeakResult uk = kernels::measure_microkernel_peak(20000, 256);
      fma_flops += fma.flops;
      fma_seconds = fma.seconds;
      uk_flops += uk.flops;
      uk_seconds = uk.seconds;
#pragma omp critical
      {
        fma_target = fma.target;
        uk_target = uk.target;
      }
    }
    fma_gflops = std::max(fma_gflops, fma_flops / fma_seconds / 1e9);
    uk_gflops = std::max(uk_gflops, uk_flops / uk_seconds / 1e9);
  }
  if (json) {
    nlohmann::json out = {{"threads", threads},
                          {"fma_target", fma_target},
                          {"fma_peak_gflops", fma_gflops},
                          {"microkernel_target", uk_target},
                          {"microkernel_gflops", uk_gflops}};
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("threads %d\n", threads);
    std::printf("fma peak (%s, registers only): %.1f GFLOP/s (%.1f per thread)\n", fma_target,
                fma_gflops, fma_gflops / threads);
    std::printf("microkernel (%s, L1-resident panels): %.1f GFLOP/s (%.1f%% of fma peak)\n",
                uk_target, uk_gflops, 100.0 * uk_gflops / fma_gflops);
  }
  return 0;
}

const CommandRegistrar kRegistrar("peak", "measure the fp32 FMA peak and microkernel throughput",
                                  run_peak);

}  // namespace
}  // namespace raggemm::cli
