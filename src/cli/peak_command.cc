// raggemm peak: this machine's fp32 FMA peak (registers only), the
// microkernel's throughput on L1-resident panels, per thread and in total,
// for the best Highway target or a forced one, and the DRAM read bandwidth
// for each thread count up to --threads. The benchmark reports quote
// their GFLOP/s against these figures.
#include <hwy/targets.h>
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "cli/command.h"
#include "cli/bench_peers.h"
#include "cli/common.h"
#include "cli/openblas_core.h"
#include "cli/target_flag.h"
#include "kernels/b_packing_choice.h"
#include "kernels/bandwidth.h"
#include "kernels/microkernel_registry.h"
#include "kernels/machine_model.h"
#include "kernels/peak.h"
#include "tune/cpu_info.h"
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
  std::string bandwidth_text = "0";
  std::string int8_kernel = "auto";
  app.add_option("--int8-kernel", int8_kernel,
                 "int8 microkernel to report as selected: auto, AVX512_VNNI, AVX_VNNI, AVX2, SCALAR");
  std::string bf16_kernel = "auto";
  app.add_option("--bf16-kernel", bf16_kernel,
                 "bf16 dot kernel bf16 passes run: auto (measured), AMX_BF16, AVX512_BF16, SCALAR or WIDEN; the probe times the fastest dot kernel either way");
  bool no_bandwidth = false;
  app.add_option("--bandwidth-mib", bandwidth_text,
                 "DRAM probe buffer in MiB (0: 8 x L3, within 256 MiB..1 GiB)");
  app.add_flag("--no-bandwidth", no_bandwidth, "skip the DRAM read-bandwidth probe");
  parse_command_line(app, args);
  int threads = static_cast<int>(parse_int(threads_text, "--threads", 0, 1024));
  if (threads == 0) threads = omp_get_max_threads();
  const int64_t bandwidth_mib = parse_int(bandwidth_text, "--bandwidth-mib", 0, 1 << 16);
  force_simd_target(target, "--target");
  force_int8_kernel(int8_kernel, "--int8-kernel");
  force_bf16_kernel(bf16_kernel, "--bf16-kernel");
  const kernels::PeakRates rates = kernels::measure_peaks(threads, 3, true);
  // What bf16 x bf16 passes run on: the dot kernel, or "WIDEN" (forced, none
  // here, or measured slower than the f32 microkernel).
  const std::string bf16_selected = kernels::selected_microkernel(kernels::ComputeType::kBf16Dot);
  const double fma_gflops = rates.fma_gflops, uk_gflops = rates.microkernel_gflops;
  // Where small f32 items pack their B chunks here, measured now (the ops
  // measure it once per process the same way).
  const kernels::BPackingRates packing =
      kernels::measure_b_packing_rates(kernels::select_microkernel());
  // DRAM read bandwidth for every thread count up to `threads`: the memory
  // side of the benchmarks' roofline (docs/performance.md).
  const int64_t probe_bytes = bandwidth_mib > 0 ? bandwidth_mib * 1024 * 1024
                                                : kernels::dram_probe_bytes(tune::cache_sizes().l3);
  std::vector<double> bandwidth_gbps;
  if (!no_bandwidth) {
    for (int t = 1; t <= threads; ++t) {
      bandwidth_gbps.push_back(kernels::measure_read_bandwidth(probe_bytes, t, 3));
    }
  }
  if (json) {
    nlohmann::ordered_json out = {{"threads", threads},
                                  {"fma_target", rates.fma_target},
                                  {"fma_peak_gflops", fma_gflops},
                                  {"microkernel_target", rates.microkernel_target},
                                  {"microkernel_gflops", uk_gflops},
                                  {"int8_microkernel_target", rates.int8_microkernel_target},
                                  {"int8_microkernel_gops", rates.int8_microkernel_gops},
                                  {"bf16_microkernel_target", rates.bf16_microkernel_target},
                                  {"bf16_microkernel_gflops", rates.bf16_microkernel_gflops},
                                  {"bf16_selected", bf16_selected},
                                  {"b_packing_target", packing.target},
                                  {"b_packing_in_microkernel_gflops", packing.in_microkernel_gflops},
                                  {"b_packing_separate_gflops", packing.separate_gflops},
                                  {"b_packing_selected",
                                   packing.in_microkernel ? "microkernel" : "separate"}};
    // The machine as the heuristic sees it, and what the peers run here:
    // the facts a docs/performance.md section names (read, not written).
    const kernels::MachineModel model = kernels::this_machine_model(threads);
    nlohmann::ordered_json int8 = kernels::microkernel_names(kernels::ComputeType::kInt8Dot);
    const std::string int8_selected = kernels::selected_microkernel(kernels::ComputeType::kInt8Dot);
    out["machine"] = {{"cpu_model", model.cpu_model},
                      {"l1d", model.caches.l1d},
                      {"l2", model.caches.l2},
                      {"l3", model.caches.l3},
                      {"l3_sharing_cpus", model.l3_sharing_cpus},
                      {"line_bytes", model.line_bytes},
                      {"isa", model.isa},
                      {"mr", model.mr},
                      {"nr", model.nr},
                      {"vector_bytes", model.vector_bytes},
                      {"cores", model.cores},
                      {"int8_microkernels", int8},
                      {"int8_selected", int8_selected},
                      {"openblas_core", openblas_core_name()},
                      {"openblas_best_core_for_cpu", best_openblas_core_for_cpu()},
                      {"openblas_coretype_env", bench::openblas_restriction()}};
    if (!no_bandwidth) {
      nlohmann::ordered_json per_threads = nlohmann::ordered_json::array();
      for (size_t t = 0; t < bandwidth_gbps.size(); ++t) {
        per_threads.push_back({{"threads", t + 1}, {"gbps", bandwidth_gbps[t]}});
      }
      out["dram_probe_mib"] = probe_bytes / (1024 * 1024);
      out["dram_read_gbps"] = per_threads;
    }
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("threads %d\n", threads);
    std::printf("fma peak (%s, registers only): %.1f GFLOP/s (%.1f per thread)\n",
                rates.fma_target, fma_gflops, fma_gflops / threads);
    std::printf("microkernel (%s, L1-resident panels): %.1f GFLOP/s (%.1f%% of fma peak)\n",
                rates.microkernel_target, uk_gflops, 100.0 * uk_gflops / fma_gflops);
    std::printf("int8 microkernel (%s, L1-resident panels): %.1f GOP/s (%.2fx fma peak)\n",
                rates.int8_microkernel_target, rates.int8_microkernel_gops,
                rates.int8_microkernel_gops / fma_gflops);
    if (rates.bf16_microkernel_gflops > 0) {
      std::printf(
          "bf16 dot microkernel (%s, L1-resident panels): %.1f GFLOP/s (%.2fx the f32 "
          "microkernel); bf16 passes run: %s\n",
          rates.bf16_microkernel_target, rates.bf16_microkernel_gflops,
          rates.bf16_microkernel_gflops / uk_gflops, bf16_selected.c_str());
    } else {
      std::printf("bf16 dot microkernel: none on this CPU (bf16 passes widen to f32)\n");
    }
    std::printf(
        "small-group f32 gmm (%s, one thread), B packed in the microkernel %.1f GFLOP/s, by "
        "pack_b %.1f: packed %s\n",
        packing.target, packing.in_microkernel_gflops, packing.separate_gflops,
        packing.in_microkernel ? "in the microkernel" : "by pack_b");
    for (size_t t = 0; t < bandwidth_gbps.size(); ++t) {
      std::printf("dram read bandwidth (%lld MiB buffer), %zu thread%s: %.1f GB/s\n",
                  (long long)(probe_bytes / (1024 * 1024)), t + 1, t ? "s" : "",
                  bandwidth_gbps[t]);
    }
  }
  return 0;
}

const CommandRegistrar kPeakRegistrar(
    "peak", "measure the fp32 FMA peak and microkernel throughput",
    run_peak);

}  // namespace
}  // namespace raggemm::cli
