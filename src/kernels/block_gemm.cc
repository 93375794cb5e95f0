#include "kernels/block_gemm.h"

#include <algorithm>

#include "kernels/macro_kernel.h"
#include "kernels/microkernel.h"
#include "kernels/pack.h"
#include "kernels/workspace.h"

namespace raggemm::kernels {

void block_gemm(int64_t m, int64_t n, int64_t k, BlockOperand a, BlockOperand b, float* c,
                int64_t ldc, bool accumulate, int64_t kc) {
  if (m <= 0 || n <= 0) return;
  static const Microkernel uk = select_microkernel();
  if (k <= 0) {
    if (!accumulate) {
      for (int64_t i = 0; i < m; ++i) std::fill_n(c + i * ldc, n, 0.0f);
    }
    return;
  }
  kc = std::max<int64_t>(1, std::min(kc, k));
  const Operand a_src{a.data, DType::kF32, a.ld, {}};
  const Operand b_src{b.data, DType::kF32, b.ld, {}};
  for (int64_t k0 = 0; k0 < k; k0 += kc) {
    const int64_t depth = std::min(kc, k - k0);
    float* packed_a = workspace(Slot::kPackedA, packed_size(m, depth, uk.mr));
    float* packed_b = workspace(Slot::kPackedB, packed_size(n, depth, uk.nr));
    if (a.transposed) {
      pack_a_transposed(a_src, k0, depth, 0, m, 0, k, uk.mr, packed_a);
    } else {
      pack_a(a_src, 0, m, k0, depth, uk.mr, packed_a);
    }
    pack_b(b_src, b.transposed, k0, depth, 0, n, uk.nr, packed_b);
    macro_kernel(uk, depth, packed_a, m, packed_b, n, c, ldc, accumulate || k0 > 0, 0);
  }
}

}  // namespace raggemm::kernels
