// The public grouped-matmul ops: gmm (forward, and grad wrt lhs through
// transpose_rhs) and tgmm (grad wrt rhs). Semantics: ../docs and DESIGN.md s.1.
//
//   gmm:  out[i,:] = lhs[i,:] @ rhs[group(i)]        rhs [G,K,N]
//         out[i,:] = lhs[i,:] @ rhs[group(i)]^T      rhs [G,N,K] (transpose_rhs)
//   tgmm: out[g]   = lhs[rows of g]^T @ dout[rows of g]        out [G,K,N]
//
// Rows past sum(group_sizes) come out zero; empty groups give zero tgmm
// slices; accumulation is f32; results do not depend on the thread count.
// The output is f32 or bf16 (out_dtype, jax's preferred_element_type): a bf16
// output is the f32 result rounded once to nearest even in the kernels' store
// stage, bit for bit, with no f32 copy of the output. tgmm can add into its
// output (accumulate: out[g] += ..., for gradient accumulation).
// Every argument is validated before anything is written.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "raggemm/gmm_workspace.h"
#include "raggemm/problem.h"
#include "raggemm/quant_types.h"
#include "raggemm/swiglu_stage.h"
#include "raggemm/tensor.h"
#include "raggemm/tiles.h"

namespace raggemm {

struct QuantizedTensor;  // raggemm/quant.h

// An operand of gmm and tgmm: a plain tensor (f32, bf16, f16), or quantized
// codes with their f32 scales, computing as value = decode(code) *
// scale(cell) (the format: include/raggemm/quant.h). Plain tensors,
// tensor views and quantized tensors convert to it, so one gmm() and one
// tgmm() take either.
struct GmmOperand {
  TensorView values;                // plain values, or the codes
  std::optional<TensorView> scales;  // set: quantized
  QuantType type = QuantType::kFp8E4M3;
  Granularity granularity;
  const QuantizedTensor* source = nullptr;  // the quantized tensor it views, if any

  GmmOperand(const TensorView& plain) : values(plain) {}  // NOLINT: plain operands convert
  GmmOperand(const Tensor& plain) : values(plain.view()) {}  // NOLINT
  GmmOperand(const QuantizedTensor& quantized);  // NOLINT: quantized operands convert
  GmmOperand(const TensorView& codes, const TensorView& scales, QuantType type,
             const Granularity& granularity)
      : values(codes), scales(scales), type(type), granularity(granularity) {}
  bool quantized() const { return scales.has_value(); }
};

struct GmmOptions {
  bool transpose_rhs = false;
  Tiles tiles{};
  KernelVersion kernel = KernelVersion::kV1;
  int threads = 0;                 // 0: OpenMP's default
  int input_buffer_count = 1;      // prefetch depth of packed panels, 1..4
  // Expert parallelism: with local_groups = E >= 0, rhs holds only groups
  // [group_offset, group_offset + E) of group_sizes ([E,K,N]) and rows of
  // other groups come out zero. -1: rhs holds every group (group_offset 0).
  int64_t group_offset = 0;
  int64_t local_groups = -1;

  // v2 output stage (fused into the kernel; v1 refuses them):
  bool fuse_swiglu = false;                  // rhs is gate|up along N; out [M,N/2]
  // out = act(acc * row_scale[i] * col_scale[j] + col_bias[j]), with j over
  // the rhs columns (before the SwiGLU halves them).
  std::optional<TensorView> col_scale;       // f32 [N] or [G_rhs, N]
  std::optional<TensorView> col_bias;        // f32 [N] or [G_rhs, N]
  std::optional<TensorView> row_scale;       // f32 [M]

  // SwiGLU run by the kernel on each output tile as soon as it is stored
  // (v1 and v2, fwd and dlhs; include/raggemm/swiglu_stage.h): forward, the
  // call computes up and writes act = silu(gate) * up; backward, the call
  // computes dact and writes SwiGLU's dgate and dup. The same bits as the
  // separate elementwise pass; every tensor f32 [M, N_out], contiguous, none
  // overlapping another or out; out f32 and not accumulated; not with
  // fuse_swiglu. With quantize it runs on the recipe's f32 output. At most
  // one of the two.
  std::optional<SwigluForwardStage> swiglu_forward_stage;
  std::optional<SwigluBackwardStage> swiglu_backward_stage;

  // Element type of the output: kF32 or kBF16 (the epilogue's f32 value
  // rounded once). gmm_into's out must have this dtype.
  DType out_dtype = DType::kF32;
  // gmm_into only: out[i] += result for the rows of the local groups (f32:
  // out + value; bf16: bf16(float(out) + value), value the f32 the call
  // would otherwise write); rows of no local group are left as they are.
  // gmm() (which allocates its output) refuses it.
  bool accumulate = false;
  // The backend to run on, by name (src/backends/registry.cc: "cpu",
  // "reference"); "": the first registered that runs the call.
  std::string backend;
  // Set: run the quantized pass of this recipe (include/raggemm/quant.h,
  // "Per pass"): plain operands are quantized as the pass prescribes (lhs
  // per row, or dout per row for dlhs; a plain weight per rhs_scaling), a
  // quantized weight must be of the recipe's type. Unset: operands compute
  // as they are, quantized ones through their own scales.
  std::optional<QuantGmmOptions> quantize;
  // Set: the kernels' scratch comes from this workspace for the call
  // (raggemm/gmm_workspace.h); null: each thread's own buffers.
  GmmWorkspace* workspace = nullptr;
};

struct TgmmOptions {
  Tiles tiles{};
  KernelVersion kernel = KernelVersion::kV1;
  int threads = 0;
  int input_buffer_count = 1;
  // Expert parallelism: out holds only groups [group_offset, group_offset +
  // local_groups); -1: every group (group_offset 0).
  int64_t group_offset = 0;
  int64_t local_groups = -1;
  // Element type of the output: kF32 or kBF16. tgmm_into's out must have it.
  DType out_dtype = DType::kF32;
  // tgmm_into only: out[g] += lhs[rows g]^T @ dout[rows g] (f32: out + acc;
  // bf16: bf16(float(out) + acc)), where acc is the f32 result the call would
  // otherwise write; groups with no rows, and the rest of out, are left as
  // they are. tgmm() (which allocates its output) refuses it.
  bool accumulate = false;
  std::string backend;  // as GmmOptions::backend
  // Set: the drhs pass of this recipe (lhs per row, its scales folded into
  // dout, dout per column); both operands must be plain.
  std::optional<QuantGmmOptions> quantize;
  GmmWorkspace* workspace = nullptr;  // as GmmOptions::workspace
};

// Returns a new tensor [M, N] of options.out_dtype (or [M, N/2] with fuse_swiglu).
Tensor gmm(const GmmOperand& lhs, const GmmOperand& rhs, const TensorView& group_sizes,
           const GmmOptions& options = {});
// Writes into a caller-provided [M, N_out] contiguous tensor of
// options.out_dtype (f32 or bf16).
void gmm_into(const GmmOperand& lhs, const GmmOperand& rhs, const TensorView& group_sizes,
              const TensorView& out, const GmmOptions& options = {});

// Returns a new tensor [G_local, K, N] of options.out_dtype.
Tensor tgmm(const GmmOperand& lhs, const GmmOperand& dout, const TensorView& group_sizes,
            const TgmmOptions& options = {});
void tgmm_into(const GmmOperand& lhs, const GmmOperand& dout, const TensorView& group_sizes,
               const TensorView& out, const TgmmOptions& options = {});

// Options for the ops from a resolved config of raggemm/plan.h (other
// fields default); declared here, with the options they fill.
struct ResolvedPassConfig;
GmmOptions gmm_options(const ResolvedPassConfig& config, Pass pass);
TgmmOptions tgmm_options(const ResolvedPassConfig& config);

}  // namespace raggemm
