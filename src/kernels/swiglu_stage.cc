#include "kernels/swiglu_stage.h"

#include "kernels/glue_simd.h"
#include "kernels/group_items.h"

namespace raggemm::kernels {

void apply_swiglu_stage(const SwigluStage& s, const float* out, int64_t ld, int64_t row0,
                        int64_t rows, int64_t col0, int64_t cols) {
  if (!s.active()) return;
  for (int64_t r = row0; r < row0 + rows; ++r) {
    const int64_t at = r * ld + col0;
    if (s.kind == SwigluStage::Kind::kForward) {
      swiglu_forward_f32(s.gate + at, out + at, cols, s.act + at);
    } else {
      swiglu_backward_f32(s.gate + at, s.up + at, out + at, cols, s.dgate + at, s.dup + at);
    }
  }
}

void zero_swiglu_stage_uncovered(const SwigluStage& s, const int64_t* starts,
                                 int64_t group_offset, int64_t local_groups, int64_t m,
                                 int64_t cols) {
  if (!s.active()) return;
  for (float* written : {s.act, s.dgate, s.dup}) {
    if (!written) continue;
    zero_uncovered_rows(starts, group_offset, local_groups, m,
                        OutputView{written, nullptr, cols, false}, cols);
  }
}

}  // namespace raggemm::kernels
