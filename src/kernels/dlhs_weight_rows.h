// dlhs of a small group with the weight's rows as the microkernel's A,
// unpacked: out^T = W_g @ dout_g^T instead of out = dout_g @ W_g^T.
//
// dlhs contracts over the weight's last axis, so the driver's B micro-panel
// (NR output columns, the contracted dim along them) is a transpose of NR
// weight rows, packed for every group: at 128 groups of 32 rows that pack
// took more samples than the FMAs (perf, Zen 4, one thread: the interleave
// 11.1% against 9.6% for the microkernel; dlhs at 44% of the FMA peak
// where gmm, which reads its weight's rows untransposed, runs at 83%). Here
// the weight's rows are read where they lie, a broadcast per row and step
// (Microkernel::run_strided_a), and only the group's few dout rows are
// packed, transposed, as B; the register tile holds output columns x
// tokens, and each A micro-panel's finished tile is transposed into the
// output through its store stage. Each output element is the same sequence
// of FMAs, K-block after K-block, as the driver's: the same bits.
#pragma once

#include <cstdint>

#include "kernels/gmm_kernel.h"
#include "kernels/group_items.h"
#include "kernels/microkernel.h"

namespace raggemm::kernels {

// The most rows an item may have for this path (0: the problem cannot take
// it): the group's whole transposed dout, padded to whole B micro-panels,
// takes at most a quarter of L2, where it is re-read by every A micro-panel.
// It needs a dlhs (transpose_rhs) with a plain f32 weight, no output stage
// (epilogue, SwiGLU stage) and a microkernel with run_strided_a.
int64_t dlhs_weight_rows_max_rows(const GmmProblem& p, const Microkernel& uk, int64_t l2_bytes);

// The item's output block, K-blocks of kc_max as the driver's.
void run_dlhs_weight_rows_item(const GmmProblem& p, const Microkernel& uk, int64_t kc_max,
                               const GroupItem& item);

}  // namespace raggemm::kernels
