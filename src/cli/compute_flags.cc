#include "cli/compute_flags.h"

#include <iostream>

#include "raggemm/npy.h"

namespace raggemm::cli {

void add_no_cache_flag(CLI::App& app, bool& no_cache) {
  app.add_flag("--no-cache", no_cache,
               "do not take unset tiles, kernel and buffers from the tune cache");
}

void fill_unset_from_tune_cache(const OpProblem& problem, bool quantized, bool no_cache,
                                const KernelFlags& flags, KernelSettings& settings) {
  if (no_cache) return;
  const GmmShape shape{.pass = problem.pass,
                       .m = problem.m,
                       .k = problem.k,
                       .n = problem.n,
                       .groups = problem.groups,
                       .lhs_dtype = settings.dtype,
                       .rhs_dtype = settings.dtype,
                       .quantization = quantized ? "quantized" : "",
                       .group_sizes = {}};
  fill_from_tune_cache(shape, &TuneCache::shared_default(), settings.tiles,
                       flags.given("--kernel") ? nullptr : &settings.kernel,
                       flags.given("--buffers") ? nullptr : &settings.buffers);
}

void add_compute_flags(CLI::App& app, ComputeFlags& flags) {
  add_kernel_flags(app, flags.kernel);
  add_quant_flags(app, flags.quant);
  add_no_cache_flag(app, flags.no_cache);
}

ComputeSettings parse_compute_flags(const ComputeFlags& flags, bool weight_pass,
                                    const std::string& out_path) {
  ComputeSettings settings;
  settings.kernel = parse_kernel_flags(flags.kernel);
  settings.quant = parse_quant_flags(flags.quant, settings.kernel.kernel, weight_pass);
  check_output_path(out_path, "--out");
  return settings;
}

void write_op_output(const std::string& out_path, const Tensor& out) {
  write_npy(out_path, out, "--out");
  std::cout << "wrote " << out_path << ": f32 " << shape_string(out.shape()) << "\n";
}

}  // namespace raggemm::cli
