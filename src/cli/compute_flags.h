// What the compute commands share beyond their input files: the kernel and
// quantization flags (gmm, tgmm), --no-cache with the tune-cache fill (gmm,
// tgmm, bench), and writing the result to --out (gmm, tgmm). One place, so the
// commands keep the same flags, messages and order of checks.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/common.h"
#include "cli/quant_flags.h"
#include "raggemm/plan.h"
#include "raggemm/tensor.h"

namespace raggemm::cli {

void add_no_cache_flag(CLI::App& app, bool& no_cache);

// The pass and dims of one raw op call, as the tune cache keys them.
struct OpProblem {
  Pass pass;
  int64_t m, k, n, groups;
};

// Resolves what the user left unset, per field: the command line > the tune
// cache's winner for `problem` at the dtype in `settings`, quantized or not
// (skipped with no_cache) > the heuristic on the call's own group sizes (the
// rule the ops apply to unset tiles). Fills `settings` and returns where each
// field came from. A quantized call finds the entries tuned for its recipe
// (raggemm tune, gmm_autotune in training).
ResolvedPassConfig::Sources resolve_unset(const OpProblem& problem,
                                          const std::vector<int32_t>& group_sizes,
                                          Quantization quantization, bool no_cache,
                                          KernelSettings& settings);

inline Quantization recipe_of(const std::optional<QuantGmmOptions>& quant) {
  if (!quant) return std::nullopt;
  return quant->recipe;
}

// The values of a --group-sizes tensor from load_group_sizes (int32).
std::vector<int32_t> group_size_values(const Tensor& group_sizes);

// gmm and tgmm: the kernel flags, --quant and --rhs-scales, --no-cache.
struct ComputeFlags {
  KernelFlags kernel;
  QuantFlags quant;
  bool no_cache = false;
};
void add_compute_flags(CLI::App& app, ComputeFlags& flags);

struct ComputeSettings {
  KernelSettings kernel;
  std::optional<QuantGmmOptions> quant;  // nullopt without --quant
};

// Parses the flags (weight_pass: see parse_quant_flags) and checks that
// out_path can be written, so a bad flag fails before any input is read.
ComputeSettings parse_compute_flags(const ComputeFlags& flags, bool weight_pass,
                                    const std::string& out_path);

// Block-wise weight scales along the contracted dim (the forward pass only)
// need a tile k that the block divides: a resolved k is rounded up to one
// (the op refuses such a k only when the user set it).
void round_k_to_weight_blocks(const OpProblem& problem, ComputeSettings& settings);

// The op options (GmmOptions or TgmmOptions) for `problem`: the settings,
// with what the user left unset resolved (resolve_unset).
template <class Options>
Options op_options(const ComputeFlags& flags, ComputeSettings settings, const OpProblem& problem,
                   const Tensor& group_sizes) {
  const ResolvedPassConfig::Sources source = resolve_unset(
      problem, group_size_values(group_sizes), recipe_of(settings.quant), flags.no_cache,
      settings.kernel);
  if (source.k != PlanSource::kExplicit) round_k_to_weight_blocks(problem, settings);
  const KernelSettings& kernel = settings.kernel;
  return kernel_options<Options>(kernel.tiles, kernel.kernel, kernel.threads, kernel.buffers);
}

// Writes the f32 result atomically to --out (a failure names --out and leaves
// no file behind) and says so on stdout.
void write_op_output(const std::string& out_path, const Tensor& out);

}  // namespace raggemm::cli
