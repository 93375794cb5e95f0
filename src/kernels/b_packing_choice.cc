// The measured choice of where a small f32 item's B chunks are packed
// (b_packing_choice.h).
#include "kernels/b_packing_choice.h"

#include <hwy/cache_control.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "kernels/f32_gmm_policy.h"
#include "kernels/machine_model.h"
#include "kernels/measured_once.h"

namespace raggemm::kernels {
namespace {

constexpr int64_t kGroups = 2;
constexpr int64_t kRowsPerGroup = 32;  // one m-tile: the items that chunk their B
constexpr int64_t kK = 256;
constexpr int kRounds = 3;

struct Probe {
  int64_t n = 0;
  std::vector<float> lhs, rhs, out;
  std::vector<int64_t> starts;
  GmmProblem problem;
  Schedule schedule;

  explicit Probe(const Microkernel& uk) {
    // Four chunks a row of items, whatever the L2 (b_chunk_cols sizes them).
    const int64_t l2 = this_machine_model(1).caches.l2;
    n = 4 * b_chunk_cols(l2, kK, uk.nr, /*streamed_by_rows=*/true);
    const int64_t m = kGroups * kRowsPerGroup;
    lhs.assign(static_cast<size_t>(m * kK), 1e-3f);
    rhs.assign(static_cast<size_t>(kGroups * kK * n), 1e-3f);
    out.assign(static_cast<size_t>(m * n), 0.0f);
    for (int64_t g = 0; g <= kGroups; ++g) starts.push_back(g * kRowsPerGroup);
    problem.lhs = {lhs.data(), DType::kF32, kK};
    problem.rhs = {{rhs.data(), DType::kF32, n}, kK * n, 0};
    problem.m = m;
    problem.k = kK;
    problem.n = n;
    problem.starts = starts.data();
    problem.num_groups = problem.local_groups = kGroups;
    problem.out = out.data();
    schedule.tiles = {kRowsPerGroup, kK, n};
    schedule.threads = 1;
  }

  double gflops(const Microkernel& uk, bool in_microkernel) {
    // The weights come from DRAM, as a real model's do: the regime the
    // chunk streaming is for, and the one where the two ways differ most.
    // (Left in cache, 8 groups of these weights ran the microkernel's
    // packing 1.1-1.2x faster on the Xeon model 167; flushed, pack_b's
    // 1.2x, as `raggemm bench gmm` did there at 32 and 128 groups, 1.04-1.31x.
    // The flush is most of the probe's time: 2 groups and 3 rounds take
    // about 20 ms where 8 and 5 took 110, with the same answer.)
    for (size_t i = 0; i < rhs.size(); i += 16) hwy::FlushCacheline(rhs.data() + i);
    hwy::FlushStream();
    const auto start = std::chrono::steady_clock::now();
    gmm_v2_f32(problem, schedule, uk, in_microkernel);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return 2.0 * problem.m * kK * n / seconds / 1e9;
  }
};

}  // namespace

BPackingRates measure_b_packing_rates(const Microkernel& uk) {
  BPackingRates rates;
  rates.target = uk.target;
  if (!uk.run_packing_b) {
    rates.in_microkernel = false;
    return rates;
  }
  // On a thread of its own: its per-thread buffers are its own and freed
  // with it, and no workspace a caller lent is bound there.
  std::thread([&] {
    Probe probe(uk);
    probe.gflops(uk, true);  // warm-up: pages faulted in, clocks ramped
    probe.gflops(uk, false);
    // Interleaved, best of each: noise slows one round of one way.
    for (int round = 0; round < kRounds; ++round) {
      rates.in_microkernel_gflops = std::max(rates.in_microkernel_gflops, probe.gflops(uk, true));
      rates.separate_gflops = std::max(rates.separate_gflops, probe.gflops(uk, false));
    }
  }).join();
  rates.in_microkernel =
      b_packing_in_microkernel_pays(rates.in_microkernel_gflops, rates.separate_gflops);
  return rates;
}

const BPackingRates& b_packing_rates(const Microkernel& uk) {
  // One answer per target serves the process (tests force targets).
  struct Tag {};
  return measured_once<BPackingRates, Tag>(uk.target,
                                           [&] { return measure_b_packing_rates(uk); });
}

}  // namespace raggemm::kernels
