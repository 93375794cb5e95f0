// v2 tgmm, group-aligned: out[g] = lhs[rows g]^T @ dout[rows g]. A work item
// is one output tile (group, K-tile, N-tile); it walks the group's own tokens
// from the group's first row in slices of tiles.k, in order, so the
// reduction over tokens is fixed and independent of the thread count. Empty
// groups produce zero slices (left as they are when accumulating into out).
// The loop is the tgmm driver's (kernels/tgmm_driver.h) on the f32
// microkernel, or on bf16 dot products (bf16_tgmm).
#include "kernels/bf16_gmm.h"
#include "kernels/gmm_kernel.h"
#include "kernels/tgmm_driver.h"

namespace raggemm::kernels {

void tgmm_v2(const TgmmProblem& p, const Schedule& s) {
  // bf16 x bf16 runs on bf16 dot products where the CPU has them.
  if (bf16_dot_fits(p)) {
    if (const Bf16Microkernel* bf16 = select_bf16_microkernel()) {
      bf16_tgmm(p, s, *bf16);
      return;
    }
  }
  run_tgmm(p, s, F32TgmmPolicy(p, s), TgmmSlicing::kFromGroupStart);
}

}  // namespace raggemm::kernels
