// The Mixture-of-Experts layer, forward and backward, on top of the grouped
// matmuls (DESIGN.md s.5, layer moe/):
//
//   router     logits = x @ gate [embed, E]; softmax (or sigmoid) scores;
//              top-k per token (optionally limited to the best groups of
//              experts, optionally with a per-expert selection bias);
//              weights = chosen scores, renormalised over the k (optional),
//              times routed_scaling_factor; load-balancing loss.
//   permute    each token repeated k times and stably counting-sorted by
//              expert, O(tokens * k), giving group_sizes.
//   experts    h = silu(x @ wi_0[e]) * (x @ wi_1[e]); y = h @ wo[e], each
//              through raggemm::gmm with the weight's own plan (or one fused
//              gate|up weight wi [E, embed, 2*mlp]).
//   unpermute  out[t] = sum_j weight[t,j] * y[row of (t,j)], in f32.
//   shared     a dense SwiGLU MLP of width shared_experts * mlp added to out.
//
// Backward covers all of it: router through the top-k weights and the
// load-balancing loss, permute, the three passes of every expert weight,
// shared experts. The layer is a template over the scalar type: float runs
// the raggemm ops; double runs naive loops (the finite-difference oracle).
//
// Expert parallelism (docs/parallelism.md): given a Communicator of
// P > 1 ranks, the layer holds experts [rank * E/P, (rank + 1) * E/P) only
// and exchanges rows with the other ranks, by all-to-all dispatch or, with
// use_ring_of_experts, by all-gathering the tokens and reduce-scattering the
// outputs. Forward and backward then see this rank's tokens only; each
// backward yields this rank's share of the global batch's gradient.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "raggemm/dtype.h"
#include "raggemm/moe_plan.h"
#include "raggemm/quant_types.h"
#include "raggemm/tensor.h"

namespace raggemm {
class Communicator;
class Profiler;
}  // namespace raggemm

namespace raggemm::moe {

enum class ScoreFunction : uint8_t { kSoftmax, kSigmoid };

struct RouterConfig {
  int64_t num_experts = 8;
  int64_t top_k = 2;
  ScoreFunction score_function = ScoreFunction::kSoftmax;
  bool normalize_top_k = true;  // renormalise the k chosen scores to sum 1
  // Sigmoid scoring: a per-expert bias added to the scores for selection
  // only (aux-loss-free balancing); the trainer nudges it toward balance.
  bool selection_bias = false;
  // Group-limited routing: experts are split into n_routing_groups groups,
  // tokens pick among the topk_routing_group best groups. -1: off.
  int64_t n_routing_groups = -1;
  int64_t topk_routing_group = -1;
  double routed_scaling_factor = 1.0;
  double load_balance_loss_weight = 0.0;
};

// Which code runs the matmuls of a float layer.
enum class MatmulBackend : uint8_t {
  kOps,        // raggemm::gmm / tgmm (or quantized_gmm / quantized_tgmm)
  kReference,  // naive loops, double accumulation: the dense oracle
};

struct MoeConfig {
  int64_t embed_dim = 0;
  int64_t mlp_dim = 0;
  RouterConfig router;
  int64_t shared_experts = 0;  // width of the shared MLP = shared_experts * mlp_dim
  bool fused_gate_up = false;  // one wi [E, embed, 2*mlp] (gate|up); v2 fwd fuses SwiGLU
  // Two gate/up weights: SwiGLU runs in the store stage of the up weight's
  // fwd and the down weight's dlhs GMMs (raggemm/swiglu_stage.h; the same
  // bits) instead of as separate passes. Float on the ops backend only.
  bool swiglu_in_gmm = true;
  DType dtype = DType::kF32;   // what the GMMs read: f32 or bf16
  // Recipe of the routed expert GMMs; none: unquantized (config key
  // `quantization`: "", fp8_full or int8, parsed by parse_quantization).
  Quantization quantization;
  std::string weight_scaling = "channel";  // quantized weights: "channel" or "block:SIZE"
  BlockPlan plan;                          // tiles and kernels per (weight, pass)
  bool use_tune_cache = false;
  MatmulBackend backend = MatmulBackend::kOps;
  int threads = 0;
  // Expert parallelism only (P > 1): all-gather tokens and reduce-scatter
  // outputs instead of the all-to-all dispatch.
  bool use_ring_of_experts = false;
  // false: the dense path (MaxText's dense_matmul): dispatch and combine as
  // dense [tokens, experts * capacity] masks applied by matmuls, the experts
  // as batched matmuls over a [experts, capacity, embed] buffer (the same
  // grouped kernels with every group of `capacity` rows). Unquantized, one
  // process. It is the reference of the equivalence suite.
  bool sparse_matmul = true;
  // Dense path: capacity = ceil(tokens * top_k / experts * capacity_factor);
  // assignments past an expert's capacity (in token order, then slot order)
  // are dropped. -1: capacity = the largest expert load, nothing dropped.
  double capacity_factor = -1;
  // Quantized fwd: activation scales per row (0) or per row and K-block of
  // this size (quantization_activation_scaling=block:SIZE; v2 fwd only).
  int64_t activation_k_block = 0;
};

// Checks a config; an invalid combination throws Error naming the fields.
void validate(const MoeConfig& config);

// A weight as the kernels read it: a pointer and the dtype of what it points
// to, f32 values or bf16 bits (a Param<float> stored as bf16). Converts from
// a plain f32 pointer, so callers holding f32 buffers pass them unchanged.
struct WeightRef {
  const void* data = nullptr;
  DType dtype = DType::kF32;  // kF32 or kBF16
  WeightRef() = default;
  WeightRef(const float* values) : data(values), dtype(DType::kF32) {}  // NOLINT: implicit on purpose
  WeightRef(const uint16_t* bf16_bits) : data(bf16_bits), dtype(DType::kBF16) {}  // NOLINT
};

// The weight operand of a matmul over scalar T: T's own values, except that
// a float weight may be bf16 storage (WeightRef). double (the oracle) never is.
template <class T>
struct WeightOperand {
  using type = const T*;
};
template <>
struct WeightOperand<float> {
  using type = WeightRef;
};
template <class T>
using WeightArg = typename WeightOperand<T>::type;

// A named parameter with its gradient (same shape). Non-trainable
// parameters (the selection bias) are state the optimizer leaves alone.
//
// Storage: `value` (T), or, for a Param<float> after store_bf16()
// (weight_dtype=bf16), bf16 bits in `bits` with `value` empty: half the
// bytes, and what the kernels read directly. The f32 master copy of a bf16
// parameter lives in the optimizer; the gradient stays T.
template <class T>
struct Param {
  std::string name;
  Shape shape;
  std::vector<T> value;
  std::vector<T> grad;
  bool trainable = true;
  // Expert parallelism: this rank's shard of an expert weight. Its gradient
  // is complete on this rank (never all-reduced) and its checkpoint blob and
  // optimizer state are this rank's alone.
  bool expert_sharded = false;
  bool bf16 = false;            // stored as bf16 bits (T = float only)
  std::vector<uint16_t> bits;   // the bf16 storage, when bf16

  void reset(std::string param_name, Shape param_shape, bool is_trainable = true);
  int64_t size() const { return static_cast<int64_t>(bf16 ? bits.size() : value.size()); }
  // Moves the values into bf16 storage (round to nearest even) and frees
  // them. T = float only.
  void store_bf16();
  // Overwrites the values from f32 (rounded when stored as bf16).
  void set_values(const std::vector<float>& values);
  // The values as f32 (bf16 widened; a copy).
  std::vector<float> values_f32() const;
  // Bytes of the stored values (not the gradient).
  int64_t storage_bytes() const;
  // What a matmul reads: the stored values, bf16 or T.
  WeightArg<T> weight() const;
};

// Fills `param` with normal(0, stddev) values from a counter-based generator
// keyed by (seed, param name): reproducible, independent of call order.
template <class T>
void init_normal(Param<T>& param, uint64_t seed, double stddev);

// A dense SwiGLU MLP: out = (silu(x @ wi_0) * (x @ wi_1)) @ wo.
template <class T>
class DenseMlp {
 public:
  DenseMlp(std::string name, int64_t embed_dim, int64_t width, const MoeConfig& matmuls,
           Profiler* profiler);
  ~DenseMlp();
  DenseMlp(DenseMlp&&) noexcept;
  void init(uint64_t seed);
  void forward(const T* x, int64_t tokens, T* out);
  // Overwrites every parameter's grad; adds the input gradient into dx.
  void backward(const T* dout, T* dx);
  std::vector<Param<T>*> params();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct RoutingStats {
  std::vector<int32_t> group_sizes;  // tokens * top_k rows per expert
  double load_balance_loss = 0;      // unweighted
  // Dense path: (token, slot) assignments past their expert's capacity.
  int64_t dropped = 0;
};

// One matmul call of a layer's last forward and backward, as it ran: the
// record the equivalence suite asserts against the configuration.
struct GmmCall {
  std::string name;    // trace name, e.g. "moe/wi_0/fwd", "moe/dispatch"
  std::string weight;  // "wi" or "wo" (routed experts); "dense" for other matmuls
  Pass pass = Pass::kForward;
  std::string kernel;  // "v1", "v2", or "naive" (double-accumulation loops)
  // What the kernels read: f32, bf16, fp8_e4m3, fp8_e5m2, int8.
  std::string lhs_type, rhs_type;
  // Scale granularity: "none" (unquantized), "row", "row+block:SIZE",
  // "column", "channel", "block:SIZE".
  std::string lhs_scales, rhs_scales;
  // The output stage the kernels ran after the store: "" (none),
  // "swiglu_forward" or "swiglu_backward" (raggemm/swiglu_stage.h).
  std::string stage;
};

template <class T>
class MoeLayer {
 public:
  // comm: null or one rank = every expert here; P > 1 ranks = expert
  // parallelism (num_experts must be divisible by P). Not owned.
  MoeLayer(std::string name, const MoeConfig& config, Profiler* profiler = nullptr,
           Communicator* comm = nullptr);
  ~MoeLayer();
  MoeLayer(MoeLayer&&) noexcept;

  const MoeConfig& config() const;
  // The other mesh axes whose ranks hold other tokens (data, fsdp): the
  // load-balancing statistics and the loads are summed over them too, so
  // they stay the global batch's. Not owned; null entries are skipped.
  void set_batch_comms(std::vector<Communicator*> comms);
  void init(uint64_t seed);
  // x [tokens, embed] -> out [tokens, embed]; keeps what backward needs.
  void forward(const T* x, int64_t tokens, T* out);
  // dout [tokens, embed]; overwrites every parameter's grad (including the
  // load-balancing term, weight config.router.load_balance_loss_weight) and
  // adds the input gradient into dx.
  void backward(const T* dout, T* dx);
  // Of the last forward (under expert parallelism: of the global batch).
  const RoutingStats& routing() const;
  // Every matmul call of the last forward and backward (cleared by forward).
  const std::vector<GmmCall>& calls() const;
  // Aux-loss-free balancing: bias[e] += rate * sign(mean load - load[e]).
  void update_selection_bias(double rate);
  std::vector<Param<T>*> params();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

extern template struct Param<float>;
extern template struct Param<double>;
extern template class DenseMlp<float>;
extern template class DenseMlp<double>;
extern template class MoeLayer<float>;
extern template class MoeLayer<double>;

}  // namespace raggemm::moe
