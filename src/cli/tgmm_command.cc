// raggemm tgmm: the grad wrt rhs of a grouped matmul on .npy files,
// out[g] = lhs[rows of g]^T @ dout[rows of g].
//
//   raggemm tgmm --lhs L.npy --dout D.npy --group-sizes S.npy --out O.npy
//       [--tiles M,K,N] [--kernel v1|v2] [--threads T] [--dtype f32|bf16]
//       [--buffers N] [--quant fp8|int8] [--no-cache]
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

int run_tgmm(const std::vector<std::string>& args) {
  CLI::App app{
      "Transposed grouped matmul: out[g] = lhs[rows of g]^T @ dout[rows of g]; "
      "empty groups give zero slices.",
      "raggemm tgmm"};
  std::string lhs_path, dout_path, sizes_path, out_path;
  app.add_option("--lhs", lhs_path, "lhs [M,K] float32 .npy")->required();
  app.add_option("--dout", dout_path, "dout [M,N] float32 .npy")->required();
  app.add_option("--group-sizes", sizes_path, "group sizes [G] int32 or int64 .npy")->required();
  app.add_option("--out", out_path, "output [G,K,N] float32 .npy")->required();
  KernelFlags kernel_flags;
  add_kernel_flags(app, kernel_flags);
  QuantFlags quant_flags;
  add_quant_flags(app, quant_flags);
  bool no_cache = false;
  app.add_flag("--no-cache", no_cache, "do not take unset tiles, kernel and buffers from the tune cache");
  parse_command_line(app, args);

  const KernelSettings settings = parse_kernel_flags(kernel_flags);
  const auto quant = parse_quant_flags(quant_flags, settings.kernel, /*weight_pass=*/false);
  check_output_path(out_path, "--out");
  Tensor lhs = load_f32_array(lhs_path, "--lhs", 2, "[M,K]");
  Tensor dout = load_f32_array(dout_path, "--dout", 2, "[M,N]");
  const int64_t rows = lhs.dim(0);
  if (dout.dim(0) != rows) {
    fail("--dout", dout_path,
         "shape " + shape_string(dout.shape()) + " has " + std::to_string(dout.dim(0)) +
             " rows but --lhs has M = " + std::to_string(rows));
  }
  Tensor group_sizes = load_group_sizes(sizes_path, "--group-sizes", rows, "M (rows of --lhs)");

  TgmmOptions options;
  options.tiles = settings.tiles;
  options.kernel = settings.kernel;
  options.threads = settings.threads;
  options.input_buffer_count = settings.buffers;
  if (!no_cache) {
    const GmmShape shape{.pass = Pass::kGradRhs, .m = rows, .k = lhs.dim(1), .n = dout.dim(1),
                         .groups = group_sizes.dim(0), .lhs_dtype = settings.dtype, .rhs_dtype = settings.dtype,
                         .quantization = quant ? "quantized" : "", .group_sizes = {}};
    fill_from_tune_cache(shape, &TuneCache::shared_default(), options.tiles,
                         kernel_flags.given("--kernel") ? nullptr : &options.kernel,
                         kernel_flags.given("--buffers") ? nullptr : &options.input_buffer_count);
  }
  Tensor out = quant
                   ? quantized_tgmm(to_storage(lhs, settings.dtype),
                                    to_storage(dout, settings.dtype), group_sizes, options, *quant)
                   : tgmm(to_storage(lhs, settings.dtype), to_storage(dout, settings.dtype),
                          group_sizes, options);
  write_npy(out_path, out);
  std::cout << "wrote " << out_path << ": f32 " << shape_string(out.shape()) << "\n";
  return 0;
}

const CommandRegistrar kRegistrar("tgmm",
                                  "grad wrt rhs: lhs[M,K]^T @ dout[M,N] per group -> [G,K,N]",
                                  run_tgmm);

}  // namespace
}  // namespace raggemm::cli
