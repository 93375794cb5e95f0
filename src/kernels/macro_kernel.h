// The loops around the microkernel over one packed A block and one packed B
// block (BLIS's jr/ir loops), shared by every driver.
#pragma once

#include <cstdint>

#include "kernels/microkernel.h"

namespace raggemm::kernels {

// A region of source memory the caller packs next: `lines` 64-byte lines in
// rows of 2^row_shift lines, row_stride bytes apart (see PrefetchStream).
struct NextSource {
  PrefetchStream start;  // start.base == nullptr: nothing to stream
  int64_t lines = 0;
};

// Lines per k step that bring `lines` lines in over `steps` k steps: all of
// them, spread evenly (at least 1; 0 when there is nothing to stream).
// Streaming one line per step, as before, brought in a 128-column chunk of
// a small group's B (2048 lines at kc = 256) only half-way over the 1024
// steps of a one-panel item's four calls.
int stream_lines_per_step(int64_t lines, int64_t steps);

// C[0:rows, 0:cols] (= or +=) A_packed (rows x kc) * B_packed (kc x cols).
// prefetch_depth = input_buffer_count - 1: how many A micro-panels ahead of
// the one being multiplied are prefetched (0: none). `next` is handed to the
// microkernel calls in turn, kc * stream_lines_per_step lines each, so it
// arrives in cache while the FMAs run (the packing that reads it is then
// not waiting on DRAM).
// stream_stores (with accumulate false): C is final and not read soon, so it
// is written with streaming stores (see Store::kStream); with kc <= 16 the
// tiles then go along the rows and neither prefetch applies (the stores
// bound the call).
// When set, B is not packed yet: the first A micro-panel's call on each B
// micro-panel reads it from f32 rows (data[p * ld + j], j from the block's
// first column) and writes it packed into `packed`, the macro kernel's
// b_packed (Microkernel::run_packing_b); the later calls read that copy.
// Needs cols a multiple of nr.
struct BSource {
  const float* data = nullptr;
  int64_t ld = 0;
  float* packed = nullptr;
};

void macro_kernel(const Microkernel& uk, int64_t kc, const float* a_packed, int64_t rows,
                  const float* b_packed, int64_t cols, float* c, int64_t ldc, bool accumulate,
                  int prefetch_depth, const NextSource& next = {}, bool stream_stores = false,
                  const BSource& b_source = {});

}  // namespace raggemm::kernels
