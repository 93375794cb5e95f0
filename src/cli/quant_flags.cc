#include "cli/quant_flags.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "cli/bench_problem.h"
#include "cli/common.h"
#include "raggemm/error.h"

namespace raggemm::cli {

void add_quant_flags(CLI::App& app, QuantFlags& flags) {
  flags.app = &app;
  app.add_option("--quant", flags.quant,
                 "quantize the pass: fp8 (fp8_full: e4m3 lhs and weights, e5m2 gradients) or "
                 "int8; lhs per row, dynamic; the output stays f32");
  app.add_option("--rhs-scales", flags.rhs_scales,
                 "weight scales with --quant: channel (per expert and column) or block:SIZE "
                 "(also per SIZE rows of K, 32..512; --kernel v2)")
      ->capture_default_str();
}

std::optional<QuantGmmOptions> parse_quant_flags(const QuantFlags& flags, KernelSettings& kernel,
                                                 bool weight_pass) {
  if (!flags.given("--quant")) {
    require(!flags.given("--rhs-scales"), "--rhs-scales", flags.rhs_scales,
            "needs --quant fp8|int8");
    return std::nullopt;
  }
  QuantGmmOptions options;
  options.recipe = parse_quant_recipe(flags.quant, "--quant");
  options.rhs_scaling = parse_rhs_scaling(flags.rhs_scales, "--rhs-scales");
  if (options.rhs_scaling.block()) {
    require(weight_pass, "--rhs-scales", flags.rhs_scales,
            "tgmm has no weight operand (lhs is quantized per row, dout per column); "
            "use channel");
    require(!kernel.kernel_given || kernel.kernel == KernelVersion::kV2, "--rhs-scales",
            flags.rhs_scales,
            std::string("block-wise scales need --kernel v2 (got --kernel ") +
                kernel_name(kernel.kernel) + ")");
    kernel.kernel = KernelVersion::kV2;
    kernel.kernel_given = true;
  }
  return options;
}

std::optional<QuantRecipe> bench_quant_dtype(const std::string& dtype) {
  if (dtype == "int8") return QuantRecipe::kInt8;
  if (dtype == "fp8_e4m3") return QuantRecipe::kFp8;
  require(dtype == "f32" || dtype == "bf16", "--dtype", dtype,
          "expected f32, bf16, int8 or fp8_e4m3");
  return std::nullopt;
}

namespace {

Tensor random_f32(const Shape& shape, uint64_t seed) {
  Tensor t(DType::kF32, shape);
  bench::fill_symmetric(t.as<float>(), t.numel(), seed);
  return t;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

}  // namespace

QuantBench::QuantBench(int op, int64_t m, int64_t k, int64_t n, int64_t groups, QuantRecipe recipe,
                       const Shape& a_shape, const Shape& b_shape, uint64_t a_seed, uint64_t b_seed)
    : op_(op), recipe_(recipe) {
  (void)m;
  a_ = random_f32(a_shape, a_seed);
  if (op_ == 2) {
    b_activations_ = random_f32(b_shape, b_seed);
    return;
  }
  // The weight is made one expert at a time from the same random stream,
  // so its f32 form never exists whole: peak memory shows 1 byte a value.
  const Granularity granularity = weight_granularity({});
  weight_.type = recipe_operand_type(recipe);
  weight_.granularity = granularity;
  weight_.values = Tensor(quant_storage_dtype(weight_.type), b_shape);
  weight_.scales = Tensor(DType::kF32, granularity.scale_shape(b_shape, "weight"));
  bench::SplitMix rng(b_seed);
  Tensor slice(DType::kF32, {1, k, n});
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t i = 0; i < k * n; ++i) slice.as<float>()[i] = rng.symmetric_unit();
    QuantizedTensor q = quantize(slice, weight_.type, granularity);
    std::copy_n(static_cast<const char*>(q.values.data()), q.values.nbytes(),
                static_cast<char*>(weight_.values.data()) + g * k * n);
    std::copy_n(q.scales.as<const float>(), n, weight_.scales.as<float>() + g * n);
  }
}

QuantBenchTimes QuantBench::time(const TensorView& group_sizes, Tensor* out, const Tiles& tiles,
                                 KernelVersion kernel, int threads, int buffers, int warmup,
                                 int reps) {
  const QuantGmmOptions quant{recipe_, {}, 0};
  std::vector<double> quantize_times, kernel_times, totals;
  for (int run = 0; run < warmup + reps; ++run) {
    const auto start = std::chrono::steady_clock::now();
    double quantize_seconds = 0;
    if (op_ == 2) {
      const auto options = kernel_options<TgmmOptions>(tiles, kernel, threads, buffers);
      QuantizedTgmmOperands operands =
          prepare_quantized_tgmm(a_, b_activations_, group_sizes, options, quant);
      quantize_seconds = seconds_since(start);
      // Into the caller's output, as the f32 runs write: a fresh [G,K,N]
      // output each run cost its page faults (at 128 groups, K = 2048,
      // N = 768, 805 MB zeroed by the kernel: 0.14x f32).
      run_quantized_tgmm_into(operands, group_sizes, out->view(), options);
    } else {
      GmmOptions options = kernel_options<GmmOptions>(tiles, kernel, threads, buffers);
      options.transpose_rhs = op_ == 1;
      QuantizedGmmOperands operands =
          prepare_quantized_gmm(a_, weight_, group_sizes, options, quant);
      quantize_seconds = seconds_since(start);
      run_quantized_gmm_into(operands, group_sizes, out->view(), options, quant);
    }
    const double total = seconds_since(start);
    if (run < warmup) continue;
    quantize_times.push_back(quantize_seconds);
    kernel_times.push_back(total - quantize_seconds);
    totals.push_back(total);
  }
  QuantBenchTimes times;
  times.quantize_seconds = median(quantize_times);
  times.kernel_seconds = median(kernel_times);
  times.total_seconds = median(totals);
  constexpr double kMiB = 1024.0 * 1024.0;
  if (op_ != 2) times.weight_mib = double(weight_.values.nbytes() + weight_.scales.nbytes()) / kMiB;
  times.tensors_mib =
      times.weight_mib +
      double(a_.nbytes() + (op_ == 2 ? b_activations_.nbytes() : 0) + out->nbytes()) / kMiB;
  return times;
}

}  // namespace raggemm::cli
