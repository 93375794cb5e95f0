// One grouped matmul, described once (DESIGN.md s.5): the pass, its two
// operands (each plain or quantized), the groups, the output stage and the
// output. The public ops build a spec from their arguments and validate it
// once (ops/validate.cc); the tuner builds specs of its synthetic inputs; a
// backend only reads specs. Nothing here allocates or computes.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "raggemm/problem.h"
#include "raggemm/quant_types.h"
#include "raggemm/swiglu_stage.h"
#include "raggemm/tensor.h"

namespace raggemm::backends {

// The scales of a quantized operand: value = decode(code) * scale(cell).
struct OperandScales {
  TensorView scales;  // f32, granularity.scale_shape(codes' shape)
  QuantType type = QuantType::kFp8E4M3;
  Granularity granularity;
  // false: the scales were folded into the other operand before it was
  // quantized, so the backend reads the codes alone (quantized dlhs and drhs).
  bool in_kernel = true;
};

// A plain tensor (f32, bf16, f16) or quantized codes with their scales.
struct GmmOperand {
  TensorView values;
  std::optional<OperandScales> quant;

  GmmOperand() = default;
  GmmOperand(const TensorView& plain) : values(plain) {}  // NOLINT: plain operands convert
  GmmOperand(const TensorView& codes, const OperandScales& scales) : values(codes), quant(scales) {}
  bool quantized() const { return quant.has_value(); }
};

struct GmmSpec {
  // fwd:  out [M, N]   = lhs [M, K] @ rhs[g] [K, N]           (rhs [G, K, N])
  // dlhs: out [M, N']  = lhs [M, K'] @ rhs[g]^T               (rhs [G, N', K'])
  // drhs: out [G, K, N] = lhs[rows g]^T [K, rows] @ rhs[rows g] (rhs is dout [M, N])
  Pass pass = Pass::kForward;
  GmmOperand lhs;
  GmmOperand rhs;
  TensorView group_sizes;  // i32 or i64 [G]
  // Expert parallelism: rhs (fwd, dlhs) or out (drhs) holds groups
  // [group_offset, group_offset + local_groups); -1: all of them.
  int64_t group_offset = 0;
  int64_t local_groups = -1;

  // Output stage (fwd and dlhs; kernel v2): out = act(acc * row_scale[i] *
  // col_scale[j] + col_bias[j]), SwiGLU over gate|up halves of the columns.
  bool fuse_swiglu = false;
  std::optional<TensorView> col_scale;  // f32 [N] or [G_rhs, N]
  std::optional<TensorView> col_bias;   // f32 [N] or [G_rhs, N]
  std::optional<TensorView> row_scale;  // f32 [M]
  // The SwiGLU stage on the stored output (fwd and dlhs, f32 output, not
  // accumulated; include/raggemm/swiglu_stage.h): at most one of the two.
  std::optional<SwigluForwardStage> swiglu_forward_stage;
  std::optional<SwigluBackwardStage> swiglu_backward_stage;

  TensorView out;                // f32 or bf16, contiguous
  bool accumulate = false;       // out += result for the rows (groups) computed
  int threads = 0;               // 0: OpenMP's default

  // Derived from the above by derive() (the ops call it through validate()).
  int64_t m = 0, k = 0, n = 0;   // op terms: lhs [m, k]; n: the rhs columns (before SwiGLU)
  int64_t out_cols = 0;          // columns of a gmm output (n, or n / 2 with SwiGLU)
  int64_t rhs_groups = 0;        // groups rhs (or drhs's out) holds
  int64_t resolved_local_groups = 0;
  std::vector<int64_t> starts;   // group_sizes' prefix sum, G + 1 entries
  // Tile k (the contracted axis) must be a multiple of this, or cover all
  // of k: block-wise scales along the contracted dim (0: no constraint).
  int64_t contracted_block = 0;

  bool transpose_rhs() const { return pass == Pass::kGradLhs; }
  bool staged() const { return fuse_swiglu || col_scale || col_bias || row_scale; }
  int64_t num_groups() const { return group_sizes.numel(); }
  // The shape as the heuristic, the candidates and the tune cache see it.
  GmmShape shape() const;
};

// Fills the derived fields from the views, trusting them (the ops validate
// first; the tuner's own inputs are valid by construction).
void derive(GmmSpec& spec);

// The OpenMP thread count a spec runs with.
int resolved_threads(const GmmSpec& spec);

}  // namespace raggemm::backends
