// What the compute commands share beyond their input files: the kernel and
// quantization flags (gmm, tgmm), --no-cache with the tune-cache fill (gmm,
// tgmm, bench), and writing the result to --out (gmm, tgmm). One place, so the
// commands keep the same flags, messages and order of checks.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>

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

// Unless no_cache: the tune cache's winner for `problem` (at the dtype in
// `settings`, quantized or not) fills what the user did not give: unset
// tiles, and kernel and buffers unless --kernel / --buffers were on the
// command line.
void fill_unset_from_tune_cache(const OpProblem& problem, bool quantized, bool no_cache,
                                const KernelFlags& flags, KernelSettings& settings);

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

// The op options (GmmOptions or TgmmOptions) for `problem`: the settings,
// with what the user left unset taken from the tune cache.
template <class Options>
Options op_options(const ComputeFlags& flags, ComputeSettings settings, const OpProblem& problem) {
  fill_unset_from_tune_cache(problem, settings.quant.has_value(), flags.no_cache, flags.kernel,
                             settings.kernel);
  const KernelSettings& kernel = settings.kernel;
  return kernel_options<Options>(kernel.tiles, kernel.kernel, kernel.threads, kernel.buffers);
}

// Writes the f32 result atomically to --out (a failure names --out and leaves
// no file behind) and says so on stdout.
void write_op_output(const std::string& out_path, const Tensor& out);

}  // namespace raggemm::cli
