// The quantization flags of the compute subcommands:
//   gmm, tgmm:  --quant fp8|int8  --rhs-scales channel|block:SIZE
//   bench:      --dtype int8|fp8_e4m3 (besides f32|bf16)
// and the quantized runner `raggemm bench` times (activation quantization
// and kernel timed apart, weights held quantized at 1 byte per value).
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "cli/common.h"
#include "raggemm/gmm.h"
#include "raggemm/quant.h"

namespace raggemm::cli {

struct QuantFlags {
  std::string quant;
  std::string rhs_scales = "channel";
  const CLI::App* app = nullptr;
  bool given(const std::string& flag) const { return app && app->count(flag) > 0; }
};

void add_quant_flags(CLI::App& app, QuantFlags& flags);

// nullopt without --quant. Refused: --rhs-scales without --quant, block-wise
// scales with --kernel v1, and (weight_pass false: tgmm, which has no weight)
// block-wise scales at all. Block-wise scales without --kernel fix the kernel
// to v2 in `kernel` (only v2 applies them), so nothing resolves it to v1.
std::optional<QuantGmmOptions> parse_quant_flags(const QuantFlags& flags, KernelSettings& kernel,
                                                 bool weight_pass);

// bench --dtype: the recipe of "int8" or "fp8_e4m3", nullopt for f32 and
// bf16 (which go through the usual parser); anything else is refused.
std::optional<QuantRecipe> bench_quant_dtype(const std::string& dtype);

// One quantized bench problem: a = lhs [M,K] (gmm, tgmm) or dout [M,N]
// (dlhs), f32; b = the weight [G,K,N], held quantized (gmm, dlhs), or dout
// [M,N] f32 (tgmm). Values as bench::fill_symmetric(seed) draws them.
struct QuantBenchTimes {
  double quantize_seconds = 0;  // median of the activation quantization
  double kernel_seconds = 0;    // median of the kernel on quantized operands
  double total_seconds = 0;     // median of the sum, per run
  double weight_mib = 0;        // bytes the held weight takes (codes + scales)
  double tensors_mib = 0;       // f32 activations + held weight + f32 output
};

class QuantBench {
 public:
  // op: 0 gmm, 1 dlhs, 2 tgmm (bench::BenchOp's order).
  QuantBench(int op, int64_t m, int64_t k, int64_t n, int64_t groups, QuantRecipe recipe,
             const Shape& a_shape, const Shape& b_shape, uint64_t a_seed, uint64_t b_seed);
  QuantBenchTimes time(const TensorView& group_sizes, Tensor* out, const Tiles& tiles,
                       KernelVersion kernel, int threads, int buffers, int warmup, int reps);

 private:
  int op_;
  QuantRecipe recipe_;
  Tensor a_;
  Tensor b_activations_;    // tgmm only
  QuantizedTensor weight_;  // gmm, dlhs
};

}  // namespace raggemm::cli
