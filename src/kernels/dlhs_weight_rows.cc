#include "kernels/dlhs_weight_rows.h"

#include <algorithm>

#include "kernels/pack.h"
#include "kernels/row_panels.h"
#include "kernels/workspace.h"

namespace raggemm::kernels {

int64_t dlhs_weight_rows_max_rows(const GmmProblem& p, const Microkernel& uk, int64_t l2_bytes) {
  const Operand& w = p.rhs.base;
  const bool plain_weight = w.dtype == DType::kF32 && !w.scale.data;
  if (!p.transpose_rhs || !uk.run_strided_a || !plain_weight || p.epilogue.active() ||
      p.swiglu_stage.active() || p.k <= 0) {
    return 0;
  }
  const int64_t panel_bytes = uk.nr * p.k * int64_t{sizeof(float)};  // one B micro-panel
  return (l2_bytes / 4) / panel_bytes * uk.nr;
}

void run_dlhs_weight_rows_item(const GmmProblem& p, const Microkernel& uk, int64_t kc_max,
                               const GroupItem& item) {
  const int64_t rows = item.rows(), k = p.k;
  if (rows <= 0 || item.cols() <= 0) return;
  const int nr = uk.nr;
  const int64_t padded = (rows + nr - 1) / nr * nr;
  const int64_t b_panels = padded / nr;
  // B: the group's dout rows, transposed into NR-token micro-panels, one
  // K-block after the other (K-block k0 at k0 * padded).
  float* b = workspace(Slot::kPackedB, padded * k);
  for (int64_t k0 = 0; k0 < k; k0 += kc_max) {
    pack_b(p.lhs, /*transposed=*/true, k0, std::min(kc_max, k - k0), item.row_begin, rows, nr,
           b + k0 * padded);
  }
  // One A micro-panel's tile (its output columns x the padded tokens), and
  // the same values as tokens x columns for the store stage.
  float* tile = workspace(Slot::kAccumulator, uk.mr * padded);
  float* block = workspace(Slot::kLine, rows * uk.mr);
  const Operand w = p.rhs.group(item.group);
  const float* w_rows = static_cast<const float*>(w.data) + item.col_begin * w.ld;
  const OutputView out = p.output();
  const RowPanels split = row_panels(item.cols(), uk.mr);
  // A micro-panels outer, K-blocks inner: each weight row is read from
  // start to end, one K-block a call, which DRAM and the hardware
  // prefetchers serve far better than a K-block of every row in turn (a
  // 1 KiB run every 4 KiB: 0.6-0.7x the rate, microkernel calls on a
  // weight in DRAM, Zen 4). Call c multiplies panel c / blocks, K-block
  // c % blocks; each call fetches the rows of the call two after it.
  const int64_t blocks = (k + kc_max - 1) / kc_max;
  const int64_t calls = split.count * blocks;
  auto rows_of_call = [&](int64_t c) {
    return w_rows + split.first_row(c / blocks) * w.ld + (c % blocks) * kc_max;
  };
  for (int64_t panel = 0; panel < split.count; ++panel) {
    const int height = split.rows(panel);
    for (int64_t kb = 0; kb < blocks; ++kb) {
      const int64_t k0 = kb * kc_max, kc = std::min(kc_max, k - k0);
      const int64_t call = panel * blocks + kb;
      const float* ahead = call + 2 < calls ? rows_of_call(call + 2) : nullptr;
      const Store store = k0 > 0 ? Store::kAccumulate : Store::kOverwrite;
      const float* b_block = b + k0 * padded;
      for (int64_t j = 0; j < b_panels; ++j) {
        const int width = static_cast<int>(std::min<int64_t>(nr, rows - j * nr));
        uk.run_strided_a(kc, rows_of_call(call), w.ld, b_block + j * nr * kc, tile + j * nr,
                         padded, height, width, store, j == 0 ? ahead : nullptr);
      }
    }
    for (int64_t i = 0; i < rows; ++i) {
      for (int r = 0; r < height; ++r) block[i * height + r] = tile[r * padded + i];
    }
    out.store(item.row_begin, item.col_begin + split.first_row(panel), block, height, rows,
              height);
  }
}

}  // namespace raggemm::kernels
