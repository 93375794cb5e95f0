#include "cli/compute_flags.h"

#include <algorithm>
#include <iostream>

#include "raggemm/npy.h"

namespace raggemm::cli {

void add_no_cache_flag(CLI::App& app, bool& no_cache) {
  app.add_flag("--no-cache", no_cache,
               "do not take unset tiles, kernel and buffers from the tune cache");
}

ResolvedPassConfig::Sources resolve_unset(const OpProblem& problem,
                                          const std::vector<int32_t>& group_sizes,
                                          Quantization quantization, bool no_cache,
                                          KernelSettings& settings) {
  const GmmShape shape{.pass = problem.pass,
                       .m = problem.m,
                       .k = problem.k,
                       .n = problem.n,
                       .groups = problem.groups,
                       .lhs_dtype = settings.dtype,
                       .rhs_dtype = settings.dtype,
                       .quantization = quantization,
                       .group_sizes = group_sizes};
  KernelOverrides overrides;
  overrides.tiles = settings.tiles;
  if (settings.kernel_given) overrides.kernel = settings.kernel;
  if (settings.buffers_given) overrides.input_buffer_count = settings.buffers;
  const ResolvedPassConfig config = resolve_problem(
      shape, overrides, no_cache ? nullptr : &TuneCache::shared_default(), settings.threads);
  settings.tiles = config.tiles;
  settings.kernel = config.kernel;
  settings.buffers = config.input_buffer_count;
  return config.source;
}

void round_k_to_weight_blocks(const OpProblem& problem, ComputeSettings& settings) {
  if (!settings.quant || !settings.quant->rhs_scaling.block() || problem.pass != Pass::kForward) {
    return;
  }
  const int64_t block = settings.quant->rhs_scaling.block_size;
  int64_t& k = settings.kernel.tiles.k;
  k = std::min(problem.k, (k + block - 1) / block * block);
}

std::vector<int32_t> group_size_values(const Tensor& group_sizes) {
  const int32_t* sizes = group_sizes.as<const int32_t>();  // load_group_sizes gives int32
  return std::vector<int32_t>(sizes, sizes + group_sizes.numel());
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
  settings.quant = parse_quant_flags(flags.quant, settings.kernel, weight_pass);
  check_output_path(out_path, "--out");
  return settings;
}

void write_op_output(const std::string& out_path, const Tensor& out) {
  write_npy(out_path, out, "--out");
  std::cout << "wrote " << out_path << ": f32 " << shape_string(out.shape()) << "\n";
}

}  // namespace raggemm::cli
