#include "kernels/bandwidth.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>

#include "kernels/unsanitized.h"

namespace raggemm::kernels {
namespace {

constexpr int64_t kMiB = 1024 * 1024;
constexpr int kLanes = 16;  // independent accumulators: loads never wait on one

// OR of every word of [begin, end): integer ops vectorize at -O3 without
// reassociating floating point, and an OR costs far less than a DRAM load.
RAGGEMM_UNSANITIZED uint64_t or_reduce(const uint64_t* begin, const uint64_t* end) {
  uint64_t acc[kLanes] = {};
  const uint64_t* p = begin;
  for (; p + kLanes <= end; p += kLanes) {
    for (int i = 0; i < kLanes; ++i) acc[i] |= p[i];
  }
  uint64_t total = 0;
  for (; p < end; ++p) total |= *p;
  for (uint64_t a : acc) total |= a;
  return total;
}

}  // namespace

int64_t dram_probe_bytes(int64_t l3_bytes) {
  return std::clamp<int64_t>(8 * l3_bytes, 256 * kMiB, 1024 * kMiB);
}

double measure_read_bandwidth(int64_t bytes, int threads, int passes) {
  threads = std::max(1, threads);
  const int64_t words = std::max<int64_t>(bytes / 8, kLanes * threads);
  struct Free {
    void operator()(uint64_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint64_t, Free> buffer(
      static_cast<uint64_t*>(std::aligned_alloc(64, size_t((words * 8 + 63) / 64 * 64))));
  uint64_t* data = buffer.get();
  const int64_t share = (words + threads - 1) / threads;
  double best = 0;
  volatile uint64_t sink = 0;
  for (int pass = -1; pass < passes; ++pass) {
    uint64_t seen = 0;
    double seconds = 0;
#pragma omp parallel num_threads(threads) reduction(| : seen) reduction(max : seconds)
    {
      const int64_t t = omp_get_thread_num();
      const int64_t begin = std::min(words, t * share), end = std::min(words, begin + share);
      if (pass < 0) std::fill(data + begin, data + end, uint64_t(t + 1));
#pragma omp barrier
      const auto start = std::chrono::steady_clock::now();
      seen |= or_reduce(data + begin, data + end);
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    sink = sink | seen;
    if (pass >= 0 && seconds > 0) best = std::max(best, double(words) * 8.0 / seconds / 1e9);
  }
  return best;
}

}  // namespace raggemm::kernels
