// Google Benchmark binary for developers: the cases of `raggemm bench`
// (issue 3's table: M = 4096, (K, N) in {(1024, 1024), (2048, 768)}, groups
// 8, 32, 128, dist uniform, zipf:1.2, empty:0.25; gmm, dlhs, tgmm) for ours
// (v1 and v2, f32 and bf16) and the two OpenBLAS peers, sharing the problem
// generation and runners with the CLI (src/cli/bench_*.h).
//
// Every "ours" benchmark also times both peers right after its own loop
// (median of 3) and reports GFLOP (per second) plus the ratios vs_loop and vs_dense,
// so one line compares ours with peers measured in the same run.
//
//   build/release/bench/gmm_bench --threads=2 --benchmark_filter='gmm/.*/g128/uniform'
//
// --threads=T (default: OpenMP's default) sets ours and OpenBLAS alike.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "cli/bench_problem.h"
#include "cli/bench_runners.h"
#include "raggemm/dtype.h"
#include "raggemm/gmm.h"
#include "raggemm/tensor.h"

namespace raggemm::bench {
namespace {

int g_threads = 0;

struct Case {
  BenchOp op;
  int64_t m, k, n, groups;
  std::string dist;
};

// Inputs of one case in f32 (for the peers) and, when asked, bf16 (for
// ours). The largest case holds ~800 MiB of rhs, so only the most recent one
// is kept.
struct Problem {
  std::vector<int32_t> sizes;
  Tensor group_sizes, a, b, a_bf16, b_bf16, out, loop_out, dense_out;
};

Tensor to_bf16(const Tensor& f32) {
  Tensor out(DType::kBF16, f32.shape());
  for (int64_t i = 0; i < f32.numel(); ++i) {
    out.as<uint16_t>()[i] = f32_to_bf16(f32.as<float>()[i]);
  }
  return out;
}

Tensor to_f32(const Tensor& bf16) {
  Tensor out(DType::kF32, bf16.shape());
  for (int64_t i = 0; i < bf16.numel(); ++i) {
    out.as<float>()[i] = bf16_to_f32(bf16.as<uint16_t>()[i]);
  }
  return out;
}

Problem& problem_for(const Case& c, DType dtype) {
  static std::tuple<BenchOp, int64_t, int64_t, int64_t, int64_t, std::string, DType> key;
  static std::unique_ptr<Problem> cached;
  auto wanted = std::make_tuple(c.op, c.m, c.k, c.n, c.groups, c.dist, dtype);
  if (cached && key == wanted) return *cached;
  cached.reset();  // free the previous case before allocating this one
  auto p = std::make_unique<Problem>();
  p->sizes = draw_group_sizes(c.m, c.groups, parse_group_dist(c.dist, "dist"));
  p->group_sizes = Tensor(DType::kI32, {c.groups});
  std::memcpy(p->group_sizes.data(), p->sizes.data(), p->sizes.size() * sizeof(int32_t));
  const BenchShapes shapes = bench_shapes(c.op, c.m, c.k, c.n, c.groups);
  p->a = Tensor(DType::kF32, shapes.a);
  p->b = Tensor(DType::kF32, shapes.b);
  fill_symmetric(p->a.as<float>(), p->a.numel(), 1);
  fill_symmetric(p->b.as<float>(), p->b.numel(), 2);
  if (dtype == DType::kBF16) {
    // The peers see exactly the values ours reads.
    p->a_bf16 = to_bf16(p->a);
    p->b_bf16 = to_bf16(p->b);
    p->a = to_f32(p->a_bf16);
    p->b = to_f32(p->b_bf16);
  }
  p->out = Tensor(DType::kF32, shapes.out);
  p->loop_out = Tensor(DType::kF32, shapes.out);
  p->dense_out = Tensor(DType::kF32, {dense_out_elements(c.op, c.m, c.k, c.n)});
  key = wanted;
  cached = std::move(p);
  return *cached;
}

PeerOperands peer_operands(const Case& c, Problem& p, float* out) {
  return PeerOperands{c.op, c.m, c.k, c.n, &p.sizes, p.a.as<float>(), p.b.as<float>(), out};
}

void report_gflops(benchmark::State& state, const Case& c) {
  state.counters["GFLOP"] = benchmark::Counter(2.0 * double(c.m) * double(c.k) * double(c.n) * 1e-9,
                                               benchmark::Counter::kIsIterationInvariantRate);
}

void bench_ours(benchmark::State& state, Case c, KernelVersion kernel, DType dtype) {
  Problem& p = problem_for(c, dtype);
  const Tensor& a = dtype == DType::kBF16 ? p.a_bf16 : p.a;
  const Tensor& b = dtype == DType::kBF16 ? p.b_bf16 : p.b;
  auto ours = [&] { run_ours(c.op, a, b, p.group_sizes, p.out, Tiles{}, kernel, g_threads, 1); };
  ours();  // warm-up
  for (auto _ : state) {
    ours();
    benchmark::ClobberMemory();
  }
  report_gflops(state, c);
  // The peers, in this same run, for the ratios.
  const double ours_s = median_seconds(ours, 0, 3);
  PeerOperands loop = peer_operands(c, p, p.loop_out.as<float>());
  PeerOperands dense = peer_operands(c, p, p.dense_out.as<float>());
  const double loop_s = median_seconds([&] { run_openblas_loop(loop); }, 1, 3);
  const double dense_s = median_seconds([&] { run_openblas_dense(dense); }, 1, 3);
  state.counters["vs_loop"] = loop_s / ours_s;
  state.counters["vs_dense"] = dense_s / ours_s;
}

void bench_loop(benchmark::State& state, Case c) {
  Problem& p = problem_for(c, DType::kF32);
  PeerOperands loop = peer_operands(c, p, p.loop_out.as<float>());
  run_openblas_loop(loop);
  for (auto _ : state) {
    run_openblas_loop(loop);
    benchmark::ClobberMemory();
  }
  report_gflops(state, c);
}

void bench_dense(benchmark::State& state, Case c) {
  Problem& p = problem_for(c, DType::kF32);
  PeerOperands dense = peer_operands(c, p, p.dense_out.as<float>());
  run_openblas_dense(dense);
  for (auto _ : state) {
    run_openblas_dense(dense);
    benchmark::ClobberMemory();
  }
  report_gflops(state, c);
}

std::string case_name(const Case& c) {
  return std::string(bench_op_name(c.op)) + "/m" + std::to_string(c.m) + "_k" +
         std::to_string(c.k) + "_n" + std::to_string(c.n) + "/g" + std::to_string(c.groups) + "/" +
         c.dist;
}

void register_cases() {
  const int64_t m = 4096;
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{1024, 1024}, {2048, 768}};
  for (BenchOp op : {BenchOp::kGmm, BenchOp::kDlhs, BenchOp::kTgmm}) {
    for (auto [k, n] : shapes) {
      // Dense does not depend on the routing: once per shape.
      Case dense{op, m, k, n, 1, "uniform"};
      benchmark::RegisterBenchmark(
          (std::string(bench_op_name(op)) + "/m4096_k" + std::to_string(k) + "_n" +
           std::to_string(n) + "/openblas_dense")
              .c_str(),
          bench_dense, dense)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
      for (int64_t groups : {8, 32, 128}) {
        for (const char* dist : {"uniform", "zipf:1.2", "empty:0.25"}) {
          Case c{op, m, k, n, groups, dist};
          const std::string name = case_name(c);
          // f32 first, then the loop (same f32 inputs), then bf16: the
          // cached problem is rebuilt once per dtype, not per benchmark.
          for (DType dtype : {DType::kF32, DType::kBF16}) {
            for (KernelVersion kernel : {KernelVersion::kV1, KernelVersion::kV2}) {
              benchmark::RegisterBenchmark(
                  (name + "/ours_" + kernel_name(kernel) + "_" + dtype_name(dtype)).c_str(),
                  bench_ours, c, kernel, dtype)
                  ->UseRealTime()
                  ->Unit(benchmark::kMillisecond);
            }
            if (dtype == DType::kF32) {
              benchmark::RegisterBenchmark((name + "/openblas_loop").c_str(), bench_loop, c)
                  ->UseRealTime()
                  ->Unit(benchmark::kMillisecond);
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace raggemm::bench

int main(int argc, char** argv) {
  // Our own flag, removed before Google Benchmark sees the rest.
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--threads=", 10) == 0) {
      raggemm::bench::g_threads = std::atoi(argv[i] + 10);
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (raggemm::bench::g_threads <= 0) raggemm::bench::g_threads = omp_get_max_threads();
  raggemm::bench::set_blas_threads(raggemm::bench::g_threads);
  int rest_count = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_count, rest.data());
  if (benchmark::ReportUnrecognizedArguments(rest_count, rest.data())) return 2;
  benchmark::AddCustomContext("threads", std::to_string(raggemm::bench::g_threads));
  raggemm::bench::register_cases();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
