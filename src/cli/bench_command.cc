// raggemm bench: times one grouped-matmul pass against two OpenBLAS peers in
// the same run.
//
//   raggemm bench {gmm,dlhs,tgmm} --m M --k K --n N --groups G
//       --dist uniform|zipf:S|empty:F --dtype f32|bf16|int8|fp8_e4m3 --kernel v1|v2
//       [--tiles M,K,N] --threads T --reps R [--json] [--buffers N] [--no-cache]
//       [--warmup W] [--check]
//
// Ours runs first, on inputs in the chosen storage dtype, and peak RSS is
// read right after it, before any buffer that only the peers need exists;
// so peak_rss_mib bounds what ours needs (inputs, output, workspace, the
// binary). The peers then run in f32 on the same values (bf16 inputs are
// widened), with OpenBLAS on the same thread count.
#include <omp.h>
#include <sys/resource.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/bench_problem.h"
#include "cli/bench_runners.h"
#include "cli/command.h"
#include "cli/common.h"
#include "cli/compute_flags.h"
#include "cli/quant_flags.h"
#include "raggemm/error.h"
#include "raggemm/plan.h"

namespace raggemm::cli {
namespace {

using bench::BenchOp;

struct BenchFlags {
  std::string op;
  std::string m = "4096", k = "1024", n = "1024", groups = "8";
  std::string dist = "uniform";
  std::string threads, reps = "5", warmup = "1";
  bool json = false;
  bool check = false;
};

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

constexpr double kMiB = 1024.0 * 1024.0;

// A tensor of `shape` in `dtype` (f32 or bf16) with seeded values in [-1, 1),
// made without an f32 copy when the storage is bf16.
Tensor random_tensor(const Shape& shape, DType dtype, uint64_t seed) {
  Tensor tensor(dtype, shape);
  if (dtype == DType::kF32) {
    bench::fill_symmetric(tensor.as<float>(), tensor.numel(), seed);
    return tensor;
  }
  bench::SplitMix rng(seed);
  uint16_t* bits = tensor.as<uint16_t>();
  for (int64_t i = 0; i < tensor.numel(); ++i) bits[i] = f32_to_bf16(rng.symmetric_unit());
  return tensor;
}

Tensor widened_to_f32(const Tensor& tensor) {
  if (tensor.dtype() == DType::kF32) return tensor;
  Tensor out(DType::kF32, tensor.shape());
  const uint16_t* bits = tensor.as<const uint16_t>();
  for (int64_t i = 0; i < tensor.numel(); ++i) out.as<float>()[i] = bf16_to_f32(bits[i]);
  return out;
}

// ||x - y|| / ||y|| over `count` elements, in f64.
double relative_error(const float* x, const float* y, int64_t count) {
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < count; ++i) {
    diff += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    norm += double(y[i]) * y[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

// Ours and the peer loop sum the same products in different orders: f32
// rounding gives relative errors near 1e-6; a wrong result gives ~1.
constexpr double kCheckTolerance = 1e-4;

std::string tiles_text(const Tiles& tiles) {
  return std::to_string(tiles.m) + "," + std::to_string(tiles.k) + "," + std::to_string(tiles.n);
}

int run_bench(const std::vector<std::string>& args) {
  CLI::App app{
      "Times a grouped-matmul pass (ours) against a per-group OpenBLAS sgemm loop and one "
      "dense OpenBLAS sgemm of the same total size, in the same run; prints GFLOP/s "
      "(2*M*K*N/time, median of R runs after warm-up) and the ratios.",
      "raggemm bench"};
  BenchFlags flags;
  KernelFlags kernel_flags;
  app.add_option("op", flags.op, "pass: gmm, dlhs (gmm with transposed rhs) or tgmm")->required();
  app.add_option("--m", flags.m, "rows (tokens)")->capture_default_str();
  app.add_option("--k", flags.k, "lhs columns (the contracted dim of gmm)")->capture_default_str();
  app.add_option("--n", flags.n, "output columns of gmm")->capture_default_str();
  app.add_option("--groups", flags.groups, "number of groups (experts)")->capture_default_str();
  app.add_option("--dist", flags.dist, "group sizes: uniform, zipf:S or empty:F (fixed seed)")
      ->capture_default_str();
  add_kernel_flags(app, kernel_flags);
  app.add_option("--reps", flags.reps, "timed runs per implementation (median)")
      ->capture_default_str();
  app.add_option("--warmup", flags.warmup, "untimed runs before timing")->capture_default_str();
  app.add_flag("--json", flags.json, "print one JSON object instead of a table");
  app.add_flag("--check", flags.check,
               "compare ours with the OpenBLAS loop (relative error; exit 1 above 1e-4)");
  bool no_cache = false;
  add_no_cache_flag(app, no_cache);
  parse_command_line(app, args);

  const BenchOp op = bench::parse_bench_op(flags.op, "op");
  const int64_t m = parse_int(flags.m, "--m", 1, INT32_MAX);
  const int64_t k = parse_int(flags.k, "--k", 1, 1 << 24);
  const int64_t n = parse_int(flags.n, "--n", 1, 1 << 24);
  const int64_t groups = parse_int(flags.groups, "--groups", 1, 1 << 20);
  check_problem_allocations({"--m", m}, {"--k", k}, {"--n", n}, {"--groups", groups});
  const bench::GroupDist dist = bench::parse_group_dist(flags.dist, "--dist");
  // --dtype int8|fp8_e4m3: a quantized run (cli/quant_flags.h); the peers stay f32.
  const std::optional<QuantRecipe> quant = bench_quant_dtype(kernel_flags.dtype);
  const std::string dtype_text = kernel_flags.dtype;
  if (quant) kernel_flags.dtype = "f32";
  KernelSettings settings = parse_kernel_flags(kernel_flags);
  // bench's dlhs (m, k, n) is the op problem lhs [m, n] contracted with n.
  const bool dlhs = op == BenchOp::kDlhs;
  const Pass pass = op == BenchOp::kGmm ? Pass::kForward : dlhs ? Pass::kGradLhs : Pass::kGradRhs;
  const int threads = settings.threads > 0 ? settings.threads : omp_get_max_threads();
  const int reps = static_cast<int>(parse_int(flags.reps, "--reps", 1, 100000));
  const int warmup = static_cast<int>(parse_int(flags.warmup, "--warmup", 0, 1000));

  const std::vector<int32_t> sizes = bench::draw_group_sizes(m, groups, dist);
  settings.threads = threads;  // the heuristic shares the caches between these
  const ResolvedPassConfig::Sources source = resolve_unset(
      {pass, m, dlhs ? n : k, dlhs ? k : n, groups}, sizes, quant.has_value(), no_cache, settings);
  Tensor group_sizes(DType::kI32, {groups});
  std::copy(sizes.begin(), sizes.end(), group_sizes.as<int32_t>());
  const bench::BenchShapes shapes = bench::bench_shapes(op, m, k, n, groups);

  // Ours, alone in memory with its inputs and output.
  Tensor a, b;
  Tensor out(DType::kF32, shapes.out);
  double tensors_mib = 0, ours_seconds = 0;
  QuantBenchTimes quant_times;
  if (quant) {
    QuantBench bench(static_cast<int>(op), m, k, n, groups, *quant, shapes.a, shapes.b, 1, 2);
    quant_times = bench.time(group_sizes, &out, settings.tiles, settings.kernel, threads,
                             settings.buffers, warmup, reps);
    ours_seconds = quant_times.total_seconds;
    tensors_mib = quant_times.tensors_mib;
  } else {
    a = random_tensor(shapes.a, settings.dtype, 1);
    b = random_tensor(shapes.b, settings.dtype, 2);
    tensors_mib = double(a.nbytes() + b.nbytes() + out.nbytes()) / kMiB;
    ours_seconds = bench::median_seconds(
        [&] {
          bench::run_ours(op, a, b, group_sizes, out, settings.tiles, settings.kernel, threads,
                          settings.buffers);
        },
        warmup, reps);
  }
  const double ours_rss_mib = peak_rss_mib();

  // The peers, in f32 on the same values.
  bench::set_blas_threads(threads);
  Tensor a32 = quant ? random_tensor(shapes.a, DType::kF32, 1) : widened_to_f32(a);
  Tensor b32 = quant ? random_tensor(shapes.b, DType::kF32, 2) : widened_to_f32(b);
  Tensor loop_out(DType::kF32, shapes.out);
  bench::PeerOperands peer{
      op, m, k, n, &sizes, a32.as<float>(), b32.as<float>(), loop_out.as<float>()};
  const double loop_seconds =
      bench::median_seconds([&] { bench::run_openblas_loop(peer); }, warmup, reps);
  Tensor dense_out(DType::kF32, {bench::dense_out_elements(op, m, k, n)});
  bench::PeerOperands dense = peer;
  dense.out = dense_out.as<float>();
  const double dense_seconds =
      bench::median_seconds([&] { bench::run_openblas_dense(dense); }, warmup, reps);

  const double ours_gflops = bench::gflops(m, k, n, ours_seconds);
  const double loop_gflops = bench::gflops(m, k, n, loop_seconds);
  const double dense_gflops = bench::gflops(m, k, n, dense_seconds);
  const int64_t empty_groups = std::count(sizes.begin(), sizes.end(), 0);
  const int32_t largest_group = *std::max_element(sizes.begin(), sizes.end());
  const int32_t smallest_group = *std::min_element(sizes.begin(), sizes.end());

  nlohmann::ordered_json result = {
      {"op", bench::bench_op_name(op)},
      {"m", m},
      {"k", k},
      {"n", n},
      {"groups", groups},
      {"dist", dist.text},
      {"dtype", quant ? dtype_text : dtype_name(settings.dtype)},
      {"kernel", kernel_name(settings.kernel)},
      {"tiles", tiles_text(settings.tiles)},
      {"source",
       {{"m", source_name(source.m)},
        {"k", source_name(source.k)},
        {"n", source_name(source.n)},
        {"kernel", source_name(source.kernel)},
        {"buffers", source_name(source.buffers)}}},
      {"threads", threads},
      {"buffers", settings.buffers},
      {"reps", reps},
      {"warmup", warmup},
      {"ours_gflops", ours_gflops},
      {"openblas_loop_gflops", loop_gflops},
      {"openblas_dense_gflops", dense_gflops},
      {"ratio_vs_loop", ours_gflops / loop_gflops},
      {"ratio_vs_dense", ours_gflops / dense_gflops},
      {"ours_median_ms", ours_seconds * 1e3},
      {"openblas_loop_median_ms", loop_seconds * 1e3},
      {"openblas_dense_median_ms", dense_seconds * 1e3},
      {"peak_rss_mib", ours_rss_mib},
      {"tensors_mib", tensors_mib},
      {"peak_rss_total_mib", peak_rss_mib()},
      {"empty_groups", empty_groups},
      {"min_group", smallest_group},
      {"max_group", largest_group},
  };
  if (quant) {
    result["quantize_median_ms"] = quant_times.quantize_seconds * 1e3;
    result["kernel_median_ms"] = quant_times.kernel_seconds * 1e3;
    result["kernel_gflops"] = bench::gflops(m, k, n, quant_times.kernel_seconds);
    result["weight_mib"] = quant_times.weight_mib;
  }
  double check_error = 0;
  if (flags.check) {
    check_error = relative_error(out.as<float>(), loop_out.as<float>(), out.numel());
    result["check_rel_error"] = check_error;
  }

  if (flags.json) {
    std::cout << result.dump() << "\n";
  } else {
    std::printf(
        "bench %s: m=%lld k=%lld n=%lld groups=%lld dist=%s dtype=%s kernel=%s tiles=%s "
        "threads=%d buffers=%d reps=%d\n",
        bench::bench_op_name(op), (long long)m, (long long)k, (long long)n, (long long)groups,
        dist.text.c_str(), quant ? dtype_text.c_str() : dtype_name(settings.dtype),
        kernel_name(settings.kernel), tiles_text(settings.tiles).c_str(), threads, settings.buffers,
        reps);
    std::printf("from: m %s, k %s, n %s, kernel %s, buffers %s\n", source_name(source.m),
                source_name(source.k), source_name(source.n), source_name(source.kernel),
                source_name(source.buffers));
    std::printf("group sizes: min %d, max %d, %lld empty\n", smallest_group, largest_group,
                (long long)empty_groups);
    std::printf("  %-16s %12s %10s\n", "", "median ms", "GFLOP/s");
    std::printf("  %-16s %12.3f %10.1f\n", "ours", ours_seconds * 1e3, ours_gflops);
    std::printf("  %-16s %12.3f %10.1f\n", "openblas loop", loop_seconds * 1e3, loop_gflops);
    std::printf("  %-16s %12.3f %10.1f\n", "openblas dense", dense_seconds * 1e3, dense_gflops);
    std::printf("ratio vs loop %.3f, ratio vs dense %.3f\n", ours_gflops / loop_gflops,
                ours_gflops / dense_gflops);
    std::printf("peak RSS during ours %.1f MiB (tensors %.1f MiB), whole run %.1f MiB\n",
                ours_rss_mib, tensors_mib, peak_rss_mib());
    if (quant) {
      std::printf(
          "quantized: quantize %.3f ms + kernel %.3f ms (kernel alone %.1f GFLOP/s); "
          "weights held in %.1f MiB\n",
          quant_times.quantize_seconds * 1e3, quant_times.kernel_seconds * 1e3,
          bench::gflops(m, k, n, quant_times.kernel_seconds), quant_times.weight_mib);
    }
    if (flags.check) std::printf("check: relative error vs the loop %.3g\n", check_error);
    std::fflush(stdout);
  }
  // Quantized runs are checked against the formats' error bound instead.
  const double tolerance = !quant ? kCheckTolerance : *quant == QuantRecipe::kInt8 ? 0.02 : 0.12;
  if (flags.check && !(check_error <= tolerance)) {
    std::cerr << "error: --check=" << check_error
              << ": relative error vs the OpenBLAS loop exceeds " << tolerance << "\n";
    return 1;
  }
  return 0;
}

const CommandRegistrar kRegistrar(
    "bench", "time gmm/dlhs/tgmm against an OpenBLAS per-group loop and one dense sgemm",
    run_bench);

}  // namespace
}  // namespace raggemm::cli
