// The three grouped-matmul passes of one weight as the MoE layer and the
// model call them, on plain row-major buffers of T (float or double).
//
//   forward:  out[i] = x[i] @ w[g(i)]            x [M,K], w [G,K,N], out [M,N]
//   grad_lhs: dx[i]  = dy[i] @ w[g(i)]^T         dy [M,N], dx [M,K]
//   grad_rhs: dw[g]  = x[rows g]^T @ dy[rows g]  dw [G,K,N]
//
// T = float runs the public ops (raggemm::gmm / tgmm, or the quantized ones)
// with the pass's resolved plan, casting operands to the compute dtype (a
// bf16 weight, WeightRef, goes to the kernels as it is stored); the
// reference backend (and every T = double call) runs naive loops with double
// accumulation, the oracle of the layer tests. Each call is one profiler op.
// Outputs are overwritten; rows past sum(group sizes) come out zero.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "raggemm/moe.h"
#include "raggemm/plan.h"
#include "raggemm/profiler.h"

namespace raggemm::moe {

// bf16 copies of the f32 inputs the MoE layer hands to several GMMs of one
// step (x to wi_0 and wi_1 in the forward and the drhs, act to wo's forward
// and drhs, dy and dh to their dlhs and drhs): each source is cast once
// between two clear()s instead of once per GMM (11 casts a layer a step
// where 5 differ). The layer clears it at the start of each forward and
// writes no memoized source before the next clear (moe_layer.cc).
class CastMemo {
 public:
  // The bf16 bits of src[0:count]: the copy made since the last clear(),
  // else a new one.
  const uint16_t* cast(const float* src, int64_t count);
  // Forgets the copies; their buffers are kept for the next step.
  void clear();

 private:
  struct Entry {
    const float* src = nullptr;  // null: free
    int64_t count = 0;
    std::vector<uint16_t> bits;
  };
  std::vector<Entry> entries_;
};

struct MatmulContext {
  MatmulBackend backend = MatmulBackend::kOps;
  DType dtype = DType::kF32;  // storage of both operands handed to the kernels
  Quantization quantization;  // none: the plain ops
  std::string weight_scaling = "channel";
  int64_t activation_k_block = 0;  // quantized fwd: lhs scales per row and K-block
  int threads = 0;
  Profiler* profiler = nullptr;
  OpKind kind = OpKind::kExpertGmm;
  std::vector<GmmCall>* calls = nullptr;  // appended to by every call (the layer's call log)
  // Set (the MoE layer's experts, an attention layer's projections): bf16
  // casts of activations go through it, else into this thread's cast
  // buffers, once per call.
  std::shared_ptr<CastMemo> casts;
};

struct GroupedProblem {
  const int32_t* group_sizes = nullptr;
  int64_t groups = 0;
  int64_t m = 0;  // rows of x / dy
  int64_t k = 0;  // rows of each w[g]
  int64_t n = 0;  // columns of each w[g]
  // Local experts (ring of experts): w holds groups [group_offset,
  // group_offset + local_groups) only; rows of other groups come out zero
  // and dw is [local_groups, K, N]. -1: w holds every group.
  int64_t group_offset = 0;
  int64_t local_groups = -1;

  int64_t weight_groups() const { return local_groups < 0 ? groups : local_groups; }
};

template <class T>
void grouped_forward(const MatmulContext& context, const ResolvedPassConfig& config,
                     const char* name, const GroupedProblem& problem, const T* x, WeightArg<T> w,
                     T* out);
template <class T>
void grouped_grad_lhs(const MatmulContext& context, const ResolvedPassConfig& config,
                      const char* name, const GroupedProblem& problem, const T* dy, WeightArg<T> w,
                      T* dx);
template <class T>
void grouped_grad_rhs(const MatmulContext& context, const ResolvedPassConfig& config,
                      const char* name, const GroupedProblem& problem, const T* x, const T* dy,
                      T* dw);

// fwd with the v2 fused SwiGLU output stage: w is gate|up along N ([G,K,2F]),
// out [M,F] = silu(x @ gate) * (x @ up). Float, ops backend, unquantized only.
void grouped_forward_swiglu(const MatmulContext& context, const ResolvedPassConfig& config,
                            const char* name, const GroupedProblem& problem, const float* x,
                            WeightRef w, float* out);

// The unfused layer's SwiGLU run by the kernels' store stage
// (raggemm/swiglu_stage.h), float on the ops backend (swiglu_stage_runs):
// the same bits as the separate pass of moe/swiglu.h, on each output tile
// while it is in cache and on the GMM's threads. Every buffer is [M, out
// columns]; rows no local group covers come out zero.
//   forward of the up weight: up = x @ w, act = silu(gate) * up;
//   dlhs of the down weight:  dact = dy @ w^T, dgate and dup of SwiGLU's
//   backward at (gate, up).
bool swiglu_stage_runs(const MatmulContext& context);
void grouped_forward_with_swiglu(const MatmulContext& context, const ResolvedPassConfig& config,
                                 const char* name, const GroupedProblem& problem, const float* x,
                                 WeightRef w, const float* gate, float* up, float* act);
void grouped_grad_lhs_with_swiglu(const MatmulContext& context, const ResolvedPassConfig& config,
                                  const char* name, const GroupedProblem& problem,
                                  const float* dy, WeightRef w, const float* gate,
                                  const float* up, float* dact, float* dgate, float* dup);

// The rows the local groups cover (all groups when local_groups = -1).
int64_t covered_rows(const GroupedProblem& problem);

}  // namespace raggemm::moe
