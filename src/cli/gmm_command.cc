// raggemm gmm: the forward grouped matmul (and, with --transpose-rhs, the
// grad wrt lhs) on .npy files.
//
//   raggemm gmm --lhs L.npy --rhs R.npy --group-sizes S.npy --out O.npy
//       [--transpose-rhs] [--tiles M,K,N] [--kernel v1|v2] [--threads T]
//       [--dtype f32|bf16] [--buffers N] [--no-cache] [--quant fp8|int8 [--rhs-scales channel|block:SIZE]]
//
// Everything is read and checked before computing, and the output is written
// atomically at the end, so a rejected run leaves no file behind.
#include <iostream>

#include "cli/command.h"
#include "cli/common.h"
#include "cli/quant_flags.h"
#include "raggemm/error.h"
#include "raggemm/gmm.h"
#include "raggemm/npy.h"
#include "raggemm/plan.h"

namespace raggemm::cli {
namespace {

int run_gmm(const std::vector<std::string>& args) {
  CLI::App app{
      "Grouped matmul: out[i] = lhs[i] @ rhs[g] for the group g that owns row i "
      "(rhs[g]^T with --transpose-rhs); rows past sum(group sizes) are zero.",
      "raggemm gmm"};
  std::string lhs_path, rhs_path, sizes_path, out_path;
  bool transpose_rhs = false;
  app.add_option("--lhs", lhs_path, "lhs [M,K] float32 .npy")->required();
  app.add_option("--rhs", rhs_path, "rhs [G,K,N] float32 .npy ([G,N,K] with --transpose-rhs)")
      ->required();
  app.add_option("--group-sizes", sizes_path, "group sizes [G] int32 or int64 .npy")->required();
  app.add_option("--out", out_path, "output [M,N] float32 .npy")->required();
  app.add_flag("--transpose-rhs", transpose_rhs, "rhs is [G,N,K]: out[i] = lhs[i] @ rhs[g]^T");
  KernelFlags kernel_flags;
  add_kernel_flags(app, kernel_flags);
  QuantFlags quant_flags;
  add_quant_flags(app, quant_flags);
  bool no_cache = false;
  app.add_flag("--no-cache", no_cache, "do not take unset tiles, kernel and buffers from the tune cache");
  parse_command_line(app, args);

  const KernelSettings settings = parse_kernel_flags(kernel_flags);
  const auto quant = parse_quant_flags(quant_flags, settings.kernel, /*weight_pass=*/true);
  check_output_path(out_path, "--out");
  Tensor lhs = load_f32_array(lhs_path, "--lhs", 2, "[M,K]");
  Tensor rhs = load_f32_array(rhs_path, "--rhs", 3, transpose_rhs ? "[G,N,K]" : "[G,K,N]");
  const int64_t rows = lhs.dim(0);
  const int64_t depth = lhs.dim(1);
  Tensor group_sizes = load_group_sizes(sizes_path, "--group-sizes", rows, "M (rows of --lhs)");
  const int64_t rhs_depth = rhs.dim(transpose_rhs ? 2 : 1);
  if (rhs_depth != depth) {
    fail("--rhs", rhs_path,
         "shape " + shape_string(rhs.shape()) + " read as " +
             (transpose_rhs ? "[G,N,K]" : "[G,K,N]") + " has K = " + std::to_string(rhs_depth) +
             " but --lhs has K = " + std::to_string(depth));
  }
  if (rhs.dim(0) != group_sizes.dim(0)) {
    fail("--group-sizes", sizes_path,
         std::to_string(group_sizes.dim(0)) +
             " groups but --rhs has G = " + std::to_string(rhs.dim(0)));
  }

  GmmOptions options;
  options.transpose_rhs = transpose_rhs;
  options.tiles = settings.tiles;
  options.kernel = settings.kernel;
  options.threads = settings.threads;
  options.input_buffer_count = settings.buffers;
  if (!no_cache) {
    const GmmShape shape{.pass = transpose_rhs ? Pass::kGradLhs : Pass::kForward, .m = rows, .k = depth,
                         .n = rhs.dim(transpose_rhs ? 1 : 2), .groups = rhs.dim(0), .lhs_dtype = settings.dtype,
                         .rhs_dtype = settings.dtype, .quantization = quant ? "quantized" : "", .group_sizes = {}};
    fill_from_tune_cache(shape, &TuneCache::shared_default(), options.tiles,
                         kernel_flags.given("--kernel") ? nullptr : &options.kernel,
                         kernel_flags.given("--buffers") ? nullptr : &options.input_buffer_count);
  }
  Tensor out = quant ? quantized_gmm(to_storage(lhs, settings.dtype),
                                     to_storage(rhs, settings.dtype), group_sizes, options, *quant)
                     : gmm(to_storage(lhs, settings.dtype), to_storage(rhs, settings.dtype),
                           group_sizes, options);
  write_npy(out_path, out);
  std::cout << "wrote " << out_path << ": f32 " << shape_string(out.shape()) << "\n";
  return 0;
}

const CommandRegistrar kRegistrar("gmm", "grouped matmul lhs[M,K] @ rhs[G,K,N] on .npy files",
                                  run_gmm);

}  // namespace
}  // namespace raggemm::cli
