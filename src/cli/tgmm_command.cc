// raggemm tgmm: the grad wrt rhs of a grouped matmul on .npy files,
// out[g] = lhs[rows of g]^T @ dout[rows of g].
//
//   raggemm tgmm --lhs L.npy --dout D.npy --group-sizes S.npy --out O.npy
//       [--tiles M,K,N] [--kernel v1|v2] [--threads T] [--dtype f32|bf16]
//       [--buffers N] [--quant fp8|int8] [--no-cache]
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
  ComputeFlags flags;
  add_compute_flags(app, flags);
  parse_command_line(app, args);

  const ComputeSettings settings = parse_compute_flags(flags, /*weight_pass=*/false, out_path);
  Tensor lhs = load_f32_array(lhs_path, "--lhs", 2, "[M,K]");
  Tensor dout = load_f32_array(dout_path, "--dout", 2, "[M,N]");
  const int64_t rows = lhs.dim(0);
  if (dout.dim(0) != rows) {
    fail("--dout", dout_path,
         "shape " + shape_string(dout.shape()) + " has " + std::to_string(dout.dim(0)) +
             " rows but --lhs has M = " + std::to_string(rows));
  }
  Tensor group_sizes = load_group_sizes(sizes_path, "--group-sizes", rows, "M (rows of --lhs)");

  const OpProblem problem{Pass::kGradRhs, rows, lhs.dim(1), dout.dim(1), group_sizes.dim(0)};
  // Three small files can multiply into an output no machine holds.
  require_allocatable("the output [G,K,N] (G of --group-sizes, K of --lhs, N of --dout)",
                      {{"--group-sizes", problem.groups}, {"--lhs", problem.k}, {"--dout", problem.n}},
                      4);
  TgmmOptions options = op_options<TgmmOptions>(flags, settings, problem, group_sizes);
  options.quantize = settings.quant;  // one op: plain, or the recipe's quantized pass
  const DType dtype = settings.kernel.dtype;
  Tensor out = tgmm(to_storage(lhs, dtype), to_storage(dout, dtype), group_sizes, options);
  write_op_output(out_path, out);
  return 0;
}

const CommandRegistrar kTgmmRegistrar("tgmm",
                                      "grad wrt rhs: lhs[M,K]^T @ dout[M,N] per group -> [G,K,N]",
                                      run_tgmm);

}  // namespace
}  // namespace raggemm::cli
