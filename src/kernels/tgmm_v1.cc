// v1 tgmm, megablox-style: token tiles of tiles.k rows are laid over the
// global row space, and each output tile of out[g] (group, K-tile, N-tile)
// accumulates over the token tiles that touch the group's rows, in row
// order: the lhs tile packed with the rows of other groups masked to zero,
// the first token tile written, each later one added (f32 or bf16,
// overwritten or accumulated into: kernels/output_store.h). Groups with no
// rows are zero, or left as they are when accumulating. The loop is the
// tgmm driver's (kernels/tgmm_driver.h) on the f32 microkernel, whatever
// the operands' dtypes, with v1's slicing of the tokens, which is v1's
// summation order.
#include "kernels/gmm_kernel.h"
#include "kernels/tgmm_driver.h"

namespace raggemm::kernels {

void tgmm_v1(const TgmmProblem& p, const Schedule& s) {
  run_tgmm(p, s, F32TgmmPolicy(p, s), TgmmSlicing::kGlobalTokenTiles);
}

}  // namespace raggemm::kernels
