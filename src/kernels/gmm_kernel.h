// Kernel-level entry points of the grouped matmuls. Arguments arrive already
// validated by ops/ (shapes, tiles, group sizes); these functions only compute.
// Both generations (v1, v2) implement the same contract (DESIGN.md s.1, s.3).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/operand.h"
#include "kernels/output_store.h"
#include "raggemm/tiles.h"

namespace raggemm::kernels {

// One operand per group: group g's matrix is `base` moved by g * stride
// elements (and its scales by g * scale_stride floats).
struct GroupedOperand {
  Operand base;
  int64_t stride = 0;
  int64_t scale_stride = 0;

  Operand group(int64_t g) const {
    Operand op = base;
    op.data = static_cast<const char*>(base.data) + g * stride * static_cast<int64_t>(dtype_size(base.dtype));
    if (op.scale.data) op.scale.data += g * scale_stride;
    return op;
  }
};

// Output stage applied once a tile's contraction is complete (v2 only):
// out = act(acc * row_scale[i] * col_scale[g][j] + col_bias[g][j]).
struct Epilogue {
  bool swiglu = false;  // acc columns are gate|up halves; out = silu(gate) * up
  const float* row_scale = nullptr;   // [M]
  const float* col_scale = nullptr;   // [N_acc] per group (stride below)
  int64_t col_scale_group_stride = 0;
  const float* col_bias = nullptr;    // [N_out] per group
  int64_t col_bias_group_stride = 0;
  bool active() const { return swiglu || row_scale || col_scale || col_bias; }
};

// The SwiGLU stage of a gmm with a plain f32 output (include/raggemm/
// swiglu_stage.h): run on each output tile once it is stored, by every gmm
// policy's finish, v1's and v2's (kernels/swiglu_stage.h). Every array is
// [M, out_cols] with the output's row stride. Forward: act from gate and
// the output (up). Backward: dgate and dup from gate, up and the output
// (dact).
struct SwigluStage {
  enum class Kind { kNone, kForward, kBackward };
  Kind kind = Kind::kNone;
  const float* gate = nullptr;
  const float* up = nullptr;     // backward
  float* act = nullptr;          // forward
  float* dgate = nullptr;        // backward
  float* dup = nullptr;          // backward
  bool active() const { return kind != Kind::kNone; }
};

struct Schedule {
  Tiles tiles;            // all fields > 0
  int threads = 1;        // >= 1
  int input_buffer_count = 1;
};

struct GmmProblem {
  Operand lhs;             // [M, K]
  GroupedOperand rhs;      // [K, N] per group, or [N, K] if transpose_rhs
  bool transpose_rhs = false;
  int64_t m = 0, k = 0, n = 0;   // n: accumulator columns (2x out cols with swiglu)
  const int64_t* starts = nullptr;  // size num_groups + 1
  int64_t num_groups = 0;
  int64_t group_offset = 0;   // rhs group 0 is global group group_offset
  int64_t local_groups = 0;
  float* out = nullptr;       // [M, n_out], contiguous f32 output, or null:
  uint16_t* out_bf16 = nullptr;  // the bf16 output instead (see kernels/output_store.h)
  // out[i] += result for rows of the local groups; other rows are left as they are.
  bool accumulate = false;
  Epilogue epilogue{};
  SwigluStage swiglu_stage{};
  int64_t out_cols() const { return epilogue.swiglu ? n / 2 : n; }
  OutputView output() const { return OutputView{out, out_bf16, out_cols(), accumulate}; }
};

struct TgmmProblem {
  Operand lhs;    // [M, K]
  Operand dout;   // [M, N]
  int64_t m = 0, k = 0, n = 0;
  const int64_t* starts = nullptr;
  int64_t num_groups = 0;
  int64_t group_offset = 0;
  int64_t local_groups = 0;
  float* out = nullptr;  // [local_groups, K, N], contiguous f32 output, or null:
  uint16_t* out_bf16 = nullptr;  // the bf16 output instead (see kernels/output_store.h)
  // out[g] += result instead of =; groups with no rows leave out[g] as it is.
  bool accumulate = false;
  const float* out_group_scale = nullptr;  // optional per local group scalar scale
  OutputView output() const { return OutputView{out, out_bf16, n, accumulate}; }
};

void gmm_v1(const GmmProblem& problem, const Schedule& schedule);
void gmm_v2(const GmmProblem& problem, const Schedule& schedule);
void tgmm_v1(const TgmmProblem& problem, const Schedule& schedule);
void tgmm_v2(const TgmmProblem& problem, const Schedule& schedule);

}  // namespace raggemm::kernels
