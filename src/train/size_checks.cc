// Allocation size checks of the trainer (train/size_checks.h). Each entry is
// one tensor the model, the data or the optimizer allocates, as the product
// of the config keys it is sized by.
#include "train/size_checks.h"

#include <cstdint>
#include <vector>

#include "raggemm/allocation_limits.h"

namespace raggemm::train {

void check_allocation_sizes(const TrainConfig& c, int64_t limit_bytes) {
  const SizeFactor batch{"per_device_batch_size", c.per_device_batch_size};
  const SizeFactor length{"max_target_length", c.max_target_length};
  const SizeFactor vocab{"vocab_size", c.vocab_size};
  const SizeFactor embed{"base_emb_dim", c.base_emb_dim};
  const SizeFactor mlp{"base_mlp_dim", c.base_mlp_dim};
  // The experts' hidden size: base_moe_mlp_dim where it is set.
  const SizeFactor expert_mlp{c.moe.mlp_dim == c.base_mlp_dim ? "base_mlp_dim" : "base_moe_mlp_dim",
                              c.moe.mlp_dim};
  const SizeFactor layers{"base_num_decoder_layers", c.base_num_decoder_layers};
  const SizeFactor experts{"num_experts", c.moe.router.num_experts};
  const SizeFactor top_k{"num_experts_per_tok", c.moe.router.top_k};
  const SizeFactor shared{"shared_experts", c.moe.shared_experts};
  const SizeFactor branching{"synthetic_branching", c.synthetic_branching};
  const SizeFactor processes{"ici_expert_parallelism", c.ici_expert_parallelism};
  const SizeFactor gate_up{"", c.moe.fused_gate_up ? 2 : 1};
  const int64_t f32 = 4;
  struct Allocation {
    const char* what;
    std::vector<SizeFactor> factors;
    int64_t element_bytes;
  };
  // Smallest products first, so the error names the fewest keys that
  // cannot fit.
  const std::vector<Allocation> allocations = {
      {"the token batch", {batch, length}, 4},
      {"the synthetic chain's successor table", {vocab, branching}, 8},
      {"the embedding", {vocab, embed}, f32},
      {"the activations", {batch, length, embed}, f32},
      {"the logits", {batch, length, vocab}, f32},
      {"the router logits", {batch, length, experts}, f32},
      {"the router weight", {embed, experts}, f32},
      {"the routed token copies", {batch, length, top_k, embed}, f32},
      {"the routed tokens received under expert parallelism",
       {processes, batch, length, top_k, embed},
       f32},
      {"the expert hidden activations", {processes, batch, length, top_k, gate_up, expert_mlp}, f32},
      {"an expert weight [num_experts, base_emb_dim, expert hidden size]",
       {experts, gate_up, embed, expert_mlp},
       f32},
      {"the shared experts' weight", {shared, embed, expert_mlp}, f32},
      {"the shared experts' hidden activations", {batch, length, shared, expert_mlp}, f32},
      {"a dense layer's weight", {embed, mlp}, f32},
      {"the expert weights of all layers", {layers, experts, embed, expert_mlp}, f32},
  };
  for (const Allocation& a : allocations) {
    require_allocatable(a.what, a.factors, a.element_bytes, limit_bytes);
  }
}

}  // namespace raggemm::train
