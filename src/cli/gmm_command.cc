// raggemm gmm: the forward grouped matmul (and, with --transpose-rhs, the
// grad wrt lhs) on .npy files.
//
//   raggemm gmm --lhs L.npy --rhs R.npy --group-sizes S.npy --out O.npy
//       [--transpose-rhs] [--tiles M,K,N] [--kernel v1|v2] [--threads T]
//       [--dtype f32|bf16] [--buffers N] [--no-cache]
//       [--quant fp8|int8 [--rhs-scales channel|block:SIZE]]
//
// Everything is read and checked before computing, and the output is written
// atomically at the end, so a rejected run leaves no file behind.
#include "cli/command.h"
#include "cli/common.h"
#include "cli/compute_flags.h"
#include "raggemm/error.h"
#include "raggemm/gmm.h"
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
  ComputeFlags flags;
  add_compute_flags(app, flags);
  parse_command_line(app, args);

  const ComputeSettings settings = parse_compute_flags(flags, /*weight_pass=*/true, out_path);
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

  const OpProblem problem{transpose_rhs ? Pass::kGradLhs : Pass::kForward, rows, depth,
                          rhs.dim(transpose_rhs ? 1 : 2), rhs.dim(0)};
  // Two small files can multiply into an output no machine holds.
  require_allocatable("the output [M,N] (M rows of --lhs, N columns of --rhs)",
                      {{"--lhs", rows}, {"--rhs", problem.n}}, 4);
  GmmOptions options = op_options<GmmOptions>(flags, settings, problem, group_sizes);
  options.transpose_rhs = transpose_rhs;
  options.quantize = settings.quant;  // one op: plain, or the recipe's quantized pass
  const DType dtype = settings.kernel.dtype;
  Tensor out = gmm(to_storage(lhs, dtype), to_storage(rhs, dtype), group_sizes, options);
  write_op_output(out_path, out);
  return 0;
}

const CommandRegistrar kGmmRegistrar("gmm", "grouped matmul lhs[M,K] @ rhs[G,K,N] on .npy files",
                                     run_gmm);

}  // namespace
}  // namespace raggemm::cli
