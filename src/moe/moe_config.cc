// Validation of an MoE layer config: every invalid combination is refused
// with an Error naming the config keys involved.
#include <string>

#include "raggemm/error.h"
#include "raggemm/moe.h"
#include "raggemm/quant.h"

namespace raggemm::moe {

void validate(const MoeConfig& config) {
  require(config.embed_dim > 0, "base_emb_dim", config.embed_dim, "must be positive");
  require(config.mlp_dim > 0, "base_mlp_dim", config.mlp_dim, "must be positive");
  const RouterConfig& router = config.router;
  require(router.num_experts >= 1, "num_experts", router.num_experts, "must be at least 1");
  require(router.top_k >= 1 && router.top_k <= router.num_experts, "num_experts_per_tok",
          router.top_k, "must be in 1..num_experts (" + std::to_string(router.num_experts) + ")");
  require(config.shared_experts >= 0, "shared_experts", config.shared_experts, "must be 0 or more");
  require(router.routed_scaling_factor > 0, "routed_scaling_factor", router.routed_scaling_factor,
          "must be positive");
  require(router.load_balance_loss_weight >= 0, "load_balance_loss_weight",
          router.load_balance_loss_weight, "must be 0 or more");
  require(!router.selection_bias || router.score_function == ScoreFunction::kSigmoid, "routed_bias",
          "true", "a selection bias needs routed_score_func=sigmoid");
  if (router.n_routing_groups > 1) {
    require(router.num_experts % router.n_routing_groups == 0, "n_routing_groups",
            router.n_routing_groups,
            "must divide num_experts (" + std::to_string(router.num_experts) + ")");
    require(router.topk_routing_group >= 1 && router.topk_routing_group <= router.n_routing_groups,
            "topk_routing_group", router.topk_routing_group,
            "must be in 1..n_routing_groups when n_routing_groups > 1");
    const int64_t reachable =
        router.topk_routing_group * (router.num_experts / router.n_routing_groups);
    require(reachable >= router.top_k, "topk_routing_group", router.topk_routing_group,
            "the chosen groups hold " + std::to_string(reachable) +
                " experts, fewer than num_experts_per_tok");
  } else {
    require(router.n_routing_groups == -1 || router.n_routing_groups == 1, "n_routing_groups",
            router.n_routing_groups, "must be -1 (off) or a positive group count");
  }
  require(config.dtype == DType::kF32 || config.dtype == DType::kBF16, "dtype",
          dtype_name(config.dtype), "must be f32 or bf16");
  require(config.capacity_factor == -1 || config.capacity_factor > 0, "capacity_factor",
          config.capacity_factor, "must be -1 (keep every token) or positive");
  require(!config.sparse_matmul || config.capacity_factor == -1, "capacity_factor,sparse_matmul",
          std::to_string(config.capacity_factor) + ",true",
          "a capacity applies to the dense path only (set sparse_matmul=false)");
  require(config.sparse_matmul || !config.quantization, "sparse_matmul,quantization",
          std::string("false,") + training_quantization_name(config.quantization),
          "the dense path runs unquantized");
  if (config.activation_k_block > 0) {
    const std::string blocks = "block:" + std::to_string(config.activation_k_block);
    require(
        config.activation_k_block >= kMinBlockSize && config.activation_k_block <= kMaxBlockSize,
        "quantization_activation_scaling", blocks, "block size must be in 32..512");
    require(config.quantization.has_value(), "quantization_activation_scaling,quantization",
            blocks + ",\"\"", "activation scales exist only with a quantization");
    const auto& kernel = config.plan.wi.pass(Pass::kForward).kernel;
    require(kernel == KernelVersion::kV2 && config.plan.wo.pass(Pass::kForward).kernel == kernel,
            "quantization_activation_scaling,use_gmm_v2_fwd", blocks + ",false",
            "activation K-block scales need the v2 kernel in the fwd pass");
  }
  const RhsScaling scaling =
      parse_rhs_scaling(config.weight_scaling, "quantization_weight_scaling");
  if (scaling.block() && config.quantization) {
    for (Weight weight : kAllWeights) {
      for (Pass pass : {Pass::kForward, Pass::kGradLhs}) {
        const auto& kernel = config.plan.weight(weight).pass(pass).kernel;
        require(kernel == KernelVersion::kV2,
                std::string("quantization_weight_scaling,use_gmm_v2_") + pass_name(pass),
                config.weight_scaling + "," + (kernel == KernelVersion::kV2 ? "true" : "false"),
                "block-wise weight scales need the v2 kernel in the fwd and dlhs passes "
                "(set use_gmm_v2=true)");
      }
    }
  }
}

}  // namespace raggemm::moe
