// raggemm bench: times one grouped-matmul pass against its peers (OpenBLAS,
// oneDNN: each a per-group loop and one dense product) in the same run.
//
//   raggemm bench {gmm,dlhs,tgmm} --m M --k K --n N --groups G
//       --dist uniform|zipf:S|empty:F --dtype f32|bf16|int8|fp8_e4m3 --kernel v1|v2
//       [--tiles M,K,N] --threads T --reps R [--json] [--buffers N] [--no-cache]
//       [--warmup W] [--check]
//   raggemm bench --cases [FILTER] [--case-scale S] [--list-cases] [--json]
//       [--json-file FILE] [--threads T] [--reps R] [--warmup W] [--check]
//
// --cases times the case table (bench/cases, the list tests/cases_tests
// checks against the reference) instead of one problem: see cli/bench_cases.h.
//
// Ours runs first, on inputs in the chosen storage dtype, and peak RSS is
// read right after it, before any buffer that only the peers need exists;
// so peak_rss_mib bounds what ours needs (inputs, output, workspace, the
// binary). The peers then run in f32 on the same values (bf16 inputs are
// widened), on the same thread count, each at its best here
// (cli/bench_peers.h): oneDNN, OpenBLAS as loaded, and OpenBLAS lifted to
// the CPU's best core in a child process when the environment restricts it.
// Then the roofline probes (FMA peak, DRAM read bandwidth) run, so
// bound_ms and roofline_efficiency compare with this machine as it is now.
#include <omp.h>
#include <sys/resource.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/bench_cases.h"
#include "cli/bench_peers.h"
#include "cli/bench_problem.h"
#include "cli/bench_runners.h"
#include "cli/onednn_peer.h"
#include "cli/peer_child.h"
#include "cli/target_flag.h"
#include "cli/command.h"
#include "cli/common.h"
#include "cli/compute_flags.h"
#include "cli/quant_flags.h"
#include "raggemm/error.h"
#include "kernels/bandwidth.h"
#include "kernels/microkernel_registry.h"
#include "kernels/peak.h"
#include "raggemm/plan.h"
#include "tune/cpu_info.h"

namespace raggemm::cli {
namespace {

using bench::BenchOp;

struct BenchFlags {
  std::string op;
  std::string m = "4096", k = "1024", n = "1024", groups = "8";
  std::string dist = "uniform";
  std::string threads, reps = "5", warmup = "1";
  std::string bandwidth_mib = "0";
  std::string target = "best";
  std::string int8_kernel = "auto";
  std::string bf16_kernel = "auto";
  bool json = false;
  bool check = false;
  bool no_roofline = false;
  bool no_child_peer = false;
  bool peer_child = false;  // internal: this process is the unrestricted OpenBLAS peer
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

// Bytes a case must move at least: every operand read once in its storage
// type (f32 4, bf16 2, int8 and fp8 1 byte per element) and the f32 output
// written once.
double roofline_bytes(BenchOp op, int64_t m, int64_t k, int64_t n, int64_t groups,
                      const std::string& dtype) {
  const double element = dtype == "f32" ? 4 : dtype == "bf16" ? 2 : 1;
  const bench::BenchShapes shapes = bench::bench_shapes(op, m, k, n, groups);
  auto count = [](const Shape& shape) {
    double total = 1;
    for (int64_t d : shape) total *= double(d);
    return total;
  };
  return element * (count(shapes.a) + count(shapes.b)) + 4.0 * count(shapes.out);
}

nlohmann::ordered_json peers_json(const std::vector<bench::PeerResult>& peers, int64_t m,
                                  int64_t k, int64_t n) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const bench::PeerResult& p : peers) {
    nlohmann::ordered_json entry = {{"name", p.name},
                                    {"kernel", p.kernel},
                                    {"dense_gflops", bench::gflops(m, k, n, p.dense_seconds)},
                                    {"loop_gflops", bench::gflops(m, k, n, p.loop_seconds)},
                                    {"checked", p.trusted()},
                                    {"child_process", p.child_process}};
    if (!p.restricted_by.empty()) entry["restricted_by"] = p.restricted_by;
    list.push_back(entry);
  }
  return list;
}

// The child process of an unrestricted OpenBLAS peer (cli/peer_child.h):
// the same inputs as the parent (same seeds, bf16 values widened), OpenBLAS
// alone, one JSON line out.
int run_peer_child(BenchOp op, int64_t m, int64_t k, int64_t n, int64_t groups,
                   const std::vector<int32_t>& sizes, DType storage, int threads, int warmup,
                   int reps) {
  const bench::BenchShapes shapes = bench::bench_shapes(op, m, k, n, groups);
  bench::set_blas_threads(threads);
  Tensor a32 = widened_to_f32(random_tensor(shapes.a, storage, 1));
  Tensor b32 = widened_to_f32(random_tensor(shapes.b, storage, 2));
  Tensor loop_out(DType::kF32, shapes.out);
  Tensor dense_out(DType::kF32, {bench::dense_out_elements(op, m, k, n)});
  bench::PeerOperands peer{
      op, m, k, n, &sizes, a32.as<float>(), b32.as<float>(), loop_out.as<float>()};
  bench::PeerResult result =
      bench::time_openblas(peer, loop_out.as<float>(), dense_out.as<float>(), warmup, reps);
  result.restricted_by.clear();  // the parent set the variable to lift a restriction
  std::cout << bench::peer_to_json(result).dump() << "\n";
  return 0;
}

int run_bench(const std::vector<std::string>& args) {
  CLI::App app{
      "Times a grouped-matmul pass (ours) against a per-group OpenBLAS sgemm loop and one "
      "dense OpenBLAS sgemm of the same total size, in the same run; prints GFLOP/s "
      "(2*M*K*N/time, median of R runs after warm-up) and the ratios.",
      "raggemm bench"};
  BenchFlags flags;
  KernelFlags kernel_flags;
  app.add_option("op", flags.op,
                 "pass: gmm, dlhs (gmm with transposed rhs) or tgmm (required without --cases)");
  CaseBenchOptions case_bench;
  app.add_option("--cases", case_bench.filter,
                 "time the case table instead (bench/cases): the cases whose id contains every "
                 "comma-separated word of FILTER (none: all)")
      ->expected(0, 1);
  std::string case_scale = "8";
  app.add_option("--case-scale", case_scale,
                 "with --cases: multiply the table's M, K and N (1: the test size) and let the "
                 "op pick tiles")
      ->capture_default_str();
  app.add_flag("--list-cases", case_bench.list,
               "with --cases: list the cases, the path each takes and each refusal's error; "
               "time nothing");
  app.add_option("--json-file", case_bench.json_file,
                 "with --cases: also write the JSON object to FILE (atomically)");
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
  app.add_option("--bandwidth-mib", flags.bandwidth_mib,
                 "DRAM probe buffer for the roofline in MiB (0: 8 x L3, within 256 MiB..1 GiB)")
      ->capture_default_str();
  app.add_flag("--no-roofline", flags.no_roofline,
               "skip the FMA-peak and DRAM-bandwidth probes (no bound_ms)");
  app.add_flag("--no-child-peer", flags.no_child_peer,
               "never run OpenBLAS unrestricted in a child process");
  app.add_option("--target", flags.target,
                 "SIMD target of ours: best, or a Highway target this CPU supports (AVX3, AVX2, "
                 "SSE4, EMU128); the peers dispatch as they do")
      ->capture_default_str();
  app.add_option("--int8-kernel", flags.int8_kernel,
                 "int8 microkernel: auto, AVX512_VNNI, AVX_VNNI, AVX2 or SCALAR")
      ->capture_default_str();
  app.add_option("--bf16-kernel", flags.bf16_kernel,
                 "bf16 x bf16 kernel: auto, AMX_BF16, AVX512_BF16, SCALAR or WIDEN (to f32)")
      ->capture_default_str();
  app.add_flag("--peer-child", flags.peer_child, "internal: run as the child OpenBLAS peer")
      ->group("");
  parse_command_line(app, args);

  if (app.count("--cases") > 0) {
    case_bench.scale = static_cast<int>(parse_int(case_scale, "--case-scale", 1, 64));
    case_bench.threads =
        kernel_flags.threads.empty() ? 0 : static_cast<int>(parse_int(kernel_flags.threads, "--threads", 1, 1024));
    case_bench.reps = static_cast<int>(parse_int(flags.reps, "--reps", 1, 100000));
    case_bench.warmup = static_cast<int>(parse_int(flags.warmup, "--warmup", 0, 1000));
    case_bench.json = flags.json;
    case_bench.check = flags.check;
    return run_case_bench(case_bench);
  }
  require(!flags.op.empty(), "op", flags.op, "required: gmm, dlhs or tgmm (or --cases)");
  force_simd_target(flags.target, "--target");
  force_int8_kernel(flags.int8_kernel, "--int8-kernel");
  force_bf16_kernel(flags.bf16_kernel, "--bf16-kernel");
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
  if (flags.peer_child) {
    return run_peer_child(op, m, k, n, groups, sizes, quant ? DType::kF32 : settings.dtype,
                          threads, warmup, reps);
  }
  settings.threads = threads;  // the heuristic shares the caches between these
  const ResolvedPassConfig::Sources source = resolve_unset(
      {pass, m, dlhs ? n : k, dlhs ? k : n, groups}, sizes, quant, no_cache, settings);
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
  omp_set_num_threads(threads);  // oneDNN's OpenMP team
  Tensor a32 = quant ? random_tensor(shapes.a, DType::kF32, 1) : widened_to_f32(a);
  Tensor b32 = quant ? random_tensor(shapes.b, DType::kF32, 2) : widened_to_f32(b);
  Tensor loop_out(DType::kF32, shapes.out);
  Tensor dense_out(DType::kF32, {bench::dense_out_elements(op, m, k, n)});
  bench::PeerOperands peer{
      op, m, k, n, &sizes, a32.as<float>(), b32.as<float>(), loop_out.as<float>()};
  std::vector<bench::PeerResult> peers;
  std::vector<std::string> peer_notes;
  // oneDNN first: the OpenBLAS loop's output stays in loop_out for --check.
  if (bench::onednn_available()) {
    peers.push_back(bench::time_onednn(peer, loop_out.as<float>(), dense_out.as<float>(),
                                       warmup, reps));
  } else {
    peer_notes.push_back("no oneDNN in this build");
  }
  peers.push_back(
      bench::time_openblas(peer, loop_out.as<float>(), dense_out.as<float>(), warmup, reps));
  const bench::PeerResult openblas_here = peers.back();  // a copy: peers grows
  const double loop_seconds = openblas_here.loop_seconds;
  const double dense_seconds = openblas_here.dense_seconds;
  const std::string lift_to = flags.no_child_peer ? "" : bench::openblas_core_to_lift_to();
  if (!lift_to.empty()) {
    std::vector<std::string> child_args = args;
    child_args.push_back("--peer-child");
    const ChildResult child = run_self(child_args, "OPENBLAS_CORETYPE", lift_to);
    std::string why;
    try {
      if (child.exit_code != 0) throw std::runtime_error("exit status " +
                                                         std::to_string(child.exit_code));
      bench::PeerResult lifted = bench::peer_from_json(nlohmann::json::parse(child.out));
      if (lifted.trusted()) {
        peers.push_back(lifted);
      } else {
        why = "computed wrong (sampled relative error " + std::to_string(lifted.loop_check) +
              " loop, " + std::to_string(lifted.dense_check) + " dense)";
      }
    } catch (const std::exception& e) {
      if (why.empty()) why = std::string("failed: ") + e.what();
    }
    if (!why.empty()) {
      peer_notes.push_back("openblas with OPENBLAS_CORETYPE=" + lift_to + " " + why +
                           "; kept the restricted one (" + openblas_here.kernel + ")");
    }
  }
  double best_loop_seconds = 0, best_dense_seconds = 0;
  for (const bench::PeerResult& p : peers) {
    if (!p.trusted()) {
      peer_notes.push_back(p.name + " (" + p.kernel + ") computed wrong; not counted as best");
      continue;
    }
    if (best_loop_seconds == 0 || p.loop_seconds < best_loop_seconds) {
      best_loop_seconds = p.loop_seconds;
    }
    if (best_dense_seconds == 0 || p.dense_seconds < best_dense_seconds) {
      best_dense_seconds = p.dense_seconds;
    }
  }

  // The roofline of this case, probed in the same run: the FMA peak at this
  // thread count and the DRAM read bandwidth.
  double fma_peak_gflops = 0, dram_gbps = 0;
  if (!flags.no_roofline) {
    fma_peak_gflops = kernels::measure_peaks(threads, 2, false).fma_gflops;
    const int64_t mib = parse_int(flags.bandwidth_mib, "--bandwidth-mib", 0, 1 << 16);
    const int64_t probe_bytes =
        mib > 0 ? mib * 1024 * 1024 : kernels::dram_probe_bytes(tune::cache_sizes().l3);
    dram_gbps = kernels::measure_read_bandwidth(probe_bytes, threads, 3);
  }
  const double bytes_moved = roofline_bytes(op, m, k, n, groups, dtype_text);
  const double flops = 2.0 * double(m) * double(k) * double(n);
  const double bound_ms =
      fma_peak_gflops > 0 && dram_gbps > 0
          ? std::max(flops / (fma_peak_gflops * 1e9), bytes_moved / (dram_gbps * 1e9)) * 1e3
          : 0;

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
      {"simd_target", tune::isa_target_name()},
      {"openblas_core", openblas_here.kernel},
      {"peer_dense_best_gflops", bench::gflops(m, k, n, best_dense_seconds)},
      {"peer_loop_best_gflops", bench::gflops(m, k, n, best_loop_seconds)},
      {"ratio_vs_best_dense", ours_gflops / bench::gflops(m, k, n, best_dense_seconds)},
      {"ratio_vs_best_loop", ours_gflops / bench::gflops(m, k, n, best_loop_seconds)},
      {"peers", peers_json(peers, m, k, n)},
      {"peak_rss_mib", ours_rss_mib},
      {"tensors_mib", tensors_mib},
      {"peak_rss_total_mib", peak_rss_mib()},
      {"empty_groups", empty_groups},
      {"min_group", smallest_group},
      {"max_group", largest_group},
  };
  if (!peer_notes.empty()) result["peer_notes"] = peer_notes;
  if (bound_ms > 0) {
    result["fma_peak_gflops"] = fma_peak_gflops;
    result["dram_read_gbps"] = dram_gbps;
    result["bytes_moved"] = bytes_moved;
    result["bound_ms"] = bound_ms;
    result["roofline_efficiency"] = bound_ms / (ours_seconds * 1e3);
  }
  if (quant && *quant == QuantRecipe::kInt8) {
    result["int8_microkernel"] = kernels::selected_microkernel(kernels::ComputeType::kInt8Dot);
  }
  if (settings.dtype == DType::kBF16) {
    result["bf16_microkernel"] = kernels::selected_microkernel(kernels::ComputeType::kBf16Dot);
  }
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
    for (const bench::PeerResult& p : peers) {
      std::printf("  %-16s %12.3f %10.1f   dense %.3f ms %.1f GFLOP/s  [%s%s%s]\n",
                  (p.name + " loop").c_str(), p.loop_seconds * 1e3,
                  bench::gflops(m, k, n, p.loop_seconds), p.dense_seconds * 1e3,
                  bench::gflops(m, k, n, p.dense_seconds), p.kernel.c_str(),
                  p.restricted_by.empty() ? "" : ", ", p.restricted_by.c_str());
    }
    std::printf("ratio vs loop %.3f, ratio vs dense %.3f\n", ours_gflops / loop_gflops,
                ours_gflops / dense_gflops);
    std::printf("ratio vs best loop %.3f, ratio vs best dense %.3f\n",
                ours_gflops / bench::gflops(m, k, n, best_loop_seconds),
                ours_gflops / bench::gflops(m, k, n, best_dense_seconds));
    for (const std::string& note : peer_notes) std::printf("peer note: %s\n", note.c_str());
    if (bound_ms > 0) {
      std::printf(
          "roofline: fma peak %.1f GFLOP/s, dram read %.1f GB/s, %.1f MB moved: bound %.3f ms, "
          "efficiency %.2f\n",
          fma_peak_gflops, dram_gbps, bytes_moved / 1e6, bound_ms,
          bound_ms / (ours_seconds * 1e3));
    }
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

const CommandRegistrar kBenchRegistrar(
    "bench", "time gmm/dlhs/tgmm against an OpenBLAS per-group loop and one dense sgemm",
    run_bench);

}  // namespace
}  // namespace raggemm::cli
