// DRAM read bandwidth, the memory side of a case's roofline
// (bound = max(flops / FMA peak, bytes / bandwidth), docs/performance.md).
#pragma once

#include <cstdint>

namespace raggemm::kernels {

// A buffer size far larger than the last-level cache (`l3_bytes`), so a
// pass over it is served by DRAM: 8 x L3, at least 256 MiB, at most 1 GiB.
int64_t dram_probe_bytes(int64_t l3_bytes);

// Reads a `bytes`-byte buffer (first touched by the same threads, so its
// pages sit on their nodes) with `threads` OpenMP threads, each a
// contiguous share, `passes` times after one untimed pass; returns the best
// pass's rate in GB/s (1e9 bytes per second): another process sharing a
// core can only lower a pass.
double measure_read_bandwidth(int64_t bytes, int threads, int passes);

}  // namespace raggemm::kernels
