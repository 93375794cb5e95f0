// The register-tile microkernel (contract in docs/kernels.md):
//
//   C[0:rows, 0:cols] (=|+=) A_panel * B_panel
//
// A_panel: kc steps of `mr` floats (column p of an MR-row micro-panel, rows past
//          `rows` zero-padded), i.e. a[p * mr + i].
// B_panel: kc steps of `nr` floats, b[p * nr + j], 64-byte aligned, columns past
//          `cols` zero-padded.
// C:       row-major with leading dimension ldc.
// store: kOverwrite stores the product, kAccumulate adds it to C, kStream
// stores it with non-temporal (streaming) stores where a row is
// vector-aligned (final results nobody reads soon: no read-for-ownership
// of C's lines; the caller issues hwy::FlushStream() before publishing). Each element is
// computed as acc = 0; acc = fma(a_ip, b_pj, acc) for p = 0..kc-1 in order;
// then C = acc or C = C + acc. That sequence does not depend on rows, cols,
// the target or the neighbours in the panel, which makes results independent
// of tiling of the output and of the thread count.
#pragma once

#include <cstdint>

namespace raggemm::kernels {

// Source memory the caller packs next, streamed towards the caches while the
// FMAs run, lines_per_step 64-byte lines per k step: the call's step p
// fetches lines first_line + p * lines_per_step + j, j < lines_per_step,
// where line q lies at base + (q >> row_shift) * row_stride +
// (q & ((1 << row_shift) - 1)) * 64, i.e. rows of 2^row_shift lines,
// row_stride bytes apart (row_shift 0 and row_stride 64: one contiguous
// range). The caller derives lines_per_step from how many lines it must
// bring in over how many k steps it has to do it in (macro_kernel).
struct PrefetchStream {
  const char* base = nullptr;
  int64_t row_stride = 64;
  int row_shift = 0;
  int64_t first_line = 0;
  int lines_per_step = 1;
  int64_t end_line = INT64_MAX;  // lines from here on are not fetched
};

enum class Store : int { kOverwrite, kAccumulate, kStream };

// prefetch: the A micro-panel multiplied input_buffer_count - 1 calls later,
// or null. stream: see PrefetchStream, or null.
using MicrokernelFn = void (*)(int64_t kc, const float* a, const float* b, float* c,
                               int64_t ldc, int rows, int cols, Store store,
                               const float* prefetch, const PrefetchStream* stream);

// The same product for a full-width B micro-panel (cols == nr) read from its
// f32 source rows, b_src[p * ldb + j], which it also writes packed,
// b_packed[p * nr + j] (64-byte aligned), as pack_b would: the first A
// micro-panel of a freshly loaded B micro-panel packs it while its FMAs run,
// and the later A micro-panels read the packed copy from L1 (the separate
// pack_b pass before them ran with no FMA in flight: a quarter of the time
// of a 32-row group's item with its B in L3). Same results, bit for bit, as
// packing first and calling run.
using PackingMicrokernelFn = void (*)(int64_t kc, const float* a, const float* b_src,
                                      int64_t ldb, float* b_packed, float* c, int64_t ldc,
                                      int rows, Store store, const float* prefetch,
                                      const PrefetchStream* stream);

// The same product for A read from its f32 source rows, a[i * lda + p]
// (lda > 0), rather than a packed micro-panel: dlhs of a small group
// multiplies the weight's rows this way, unpacked
// (kernels/dlhs_weight_rows.h). B is a packed micro-panel (nr floats a
// step) of which the first `cols` columns count: the tile is one vector
// wide where cols fits in one, else two, and writes whole vectors of C
// (the caller's C rows have room for them; columns past cols hold the
// padding's products). prefetch: the first of the `rows` rows (lda apart)
// a later call reads at the same steps, or null. Same per-element
// sequence, so the same bits as packing A first.
using StridedAMicrokernelFn = void (*)(int64_t kc, const float* a, int64_t lda, const float* b,
                                       float* c, int64_t ldc, int rows, int cols, Store store,
                                       const float* prefetch);

struct Microkernel {
  int mr = 0;              // rows of the register tile (A micro-panel height)
  int nr = 0;              // columns (B micro-panel width), a multiple of the vector
  const char* target = ""; // Highway target name, e.g. "AVX3", "AVX2", "EMU128"
  MicrokernelFn run = nullptr;
  PackingMicrokernelFn run_packing_b = nullptr;
  StridedAMicrokernelFn run_strided_a = nullptr;
};

// The microkernel for the best target this CPU supports (honouring
// hwy::SetSupportedTargetsForTest, so tests can force each target). The
// registry of every compute type's kernels: microkernel_registry.h.
Microkernel select_microkernel();

// Bitmask of Highway targets compiled in and supported here (for tests).
int64_t microkernel_targets();
const char* target_name(int64_t target);

// For the registry: the Highway target the dispatch runs on now, the
// targets compiled in, and the description of one compiled target's kernel
// (call it only for a target the CPU supports; run == null if not compiled).
int64_t dispatched_target();
int64_t compiled_targets();
Microkernel microkernel_of_target(int64_t target);

}  // namespace raggemm::kernels
