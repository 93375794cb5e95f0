// v2 gmm, group-aligned (DESIGN.md s.3): each group's rows are tiled from the
// group's own first row, only valid rows are packed, and the ragged last
// panel of a tile runs the microkernel's narrower row bucket. A work item is
// (group, row range of up to kRowTilesPerItem m-tiles, n-tile): it packs each
// k-slice of its B tile once and reuses it for all of its m-tiles. bf16
// operands go to the bf16 dot-product configuration of the same driver where
// the CPU has one; every other operand type to the f32 one (f32_gmm_policy.h).
#include "kernels/b_packing_choice.h"
#include "kernels/bf16_gmm.h"
#include "kernels/f32_gmm_policy.h"
#include "kernels/gmm_driver.h"
#include "kernels/gmm_kernel.h"
#include "kernels/group_items.h"
#include "kernels/machine_model.h"
#include "kernels/swiglu_stage.h"

namespace raggemm::kernels {

void gmm_v2(const GmmProblem& p, const Schedule& s) {
  // bf16 x bf16 runs on bf16 dot products where the CPU has them.
  if (bf16_dot_fits(p)) {
    if (const Bf16Microkernel* bf16 = select_bf16_microkernel()) {
      bf16_gmm(p, s, *bf16);
      return;
    }
  }
  const Microkernel uk = select_microkernel();
  // Only a weight whose chunks the microkernel may pack asks (and, the
  // first time, measures) which way pays.
  gmm_v2_f32(p, s, uk,
             weight_packable_in_microkernel(p, uk) && b_packing_rates(uk).in_microkernel);
}

void gmm_v2_f32(const GmmProblem& p, const Schedule& s, const Microkernel& uk,
                bool b_in_microkernel, bool dlhs_from_weight_rows) {
  const int64_t l2 = this_machine_model(s.threads).caches.l2;
  const int64_t chunk_cols =
      b_chunk_cols(l2, s.tiles.k, uk.nr, /*streamed_by_rows=*/!p.transpose_rhs);
  const DriverItems d{p.starts, p.group_offset, p.local_groups, p.m, p.out_cols(),
                      s.tiles.m * kRowTilesPerItem, s.tiles.n, /*row_overhead=*/0};
  zero_swiglu_stage_uncovered(p);
  F32GmmPolicy policy(p, s, uk, chunk_cols, b_in_microkernel);
  if (dlhs_from_weight_rows) policy.weight_rows_max_rows = dlhs_weight_rows_max_rows(p, uk, l2);
  run_driver(policy, d, p.output(), s.threads);
}

}  // namespace raggemm::kernels
