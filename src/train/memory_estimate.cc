#include "train/memory_estimate.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <utility>

#include "raggemm/error.h"
#include "train/model.h"

namespace raggemm::train {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f GiB", bytes / kGiB);
  return text;
}

}  // namespace

MemoryEstimate estimate_memory(const TrainConfig& c) {
  MemoryEstimate e;
  const double d = static_cast<double>(c.base_emb_dim), v = static_cast<double>(c.vocab_size);
  const double tokens = static_cast<double>(c.tokens_per_step());
  const double layers = static_cast<double>(c.base_num_decoder_layers);
  const double dense_layers = static_cast<double>(c.first_num_dense_layers);
  const double moe_layers = layers - dense_layers;
  const double experts = static_cast<double>(c.moe.router.num_experts);
  const double local_experts = experts / static_cast<double>(c.ici_expert_parallelism);
  const double f = static_cast<double>(c.moe.mlp_dim), dense_f = static_cast<double>(c.base_mlp_dim);
  const double shared_f = static_cast<double>(c.moe.shared_experts) * f;
  const double k = static_cast<double>(c.moe.router.top_k);
  const auto attention = attention_config(c);
  const double attention_params =
      attention ? static_cast<double>(model::attention_parameter_count(*attention)) + d : 0;

  // Parameters by part, for the total and for naming what shrinks it.
  const double embed = 2 * v * d + d;
  const double dense = dense_layers * (3 * d * dense_f + d);
  const double routed = moe_layers * (3 * d * f * local_experts);
  const double moe_rest = moe_layers * (d * experts + experts + 3 * d * shared_f + d);
  const double attention_all = layers * attention_params;
  const double params = embed + dense + routed + moe_rest + attention_all;
  e.parameters = static_cast<int64_t>(params);
  // weight_dtype=bf16 stores every matrix as bf16 (2 bytes) with an f32
  // master (4) in the optimizer; vectors (norm scales, the selection bias)
  // stay f32. Gradients are f32 either way.
  const double vectors = d + layers * d + (attention ? layers * d : 0) + moe_layers * experts;
  const bool bf16 = c.weight_dtype == DType::kBF16;
  const double bf16_params = bf16 ? std::max(0.0, params - vectors) : 0;
  e.parameter_bytes = (params - bf16_params) * 8 + bf16_params * (2 + 4);  // value + gradient
  const bool adam = c.opt_type == "adamw";
  e.optimizer_bytes = params * (adam ? 8.0 : 0.0) + bf16_params * 4;

  // Activations kept per layer (f32), forward and the backward's buffers.
  double per_layer_attention = 0;
  if (attention) {
    const double h = static_cast<double>(attention->num_query_heads);
    double qk = static_cast<double>(attention->head_dim), vd = qk;
    double kv_heads = static_cast<double>(attention->num_kv_heads);
    double latents = 0;
    if (attention->type == model::AttentionType::kMla) {
      qk = static_cast<double>(attention->qk_nope_head_dim + attention->qk_rope_head_dim);
      vd = static_cast<double>(attention->v_head_dim);
      kv_heads = h;
      latents = 3 * static_cast<double>(attention->q_lora_rank + attention->kv_lora_rank) +
                2 * static_cast<double>(attention->qk_rope_head_dim) +
                h * (static_cast<double>(attention->qk_nope_head_dim) + vd);
    }
    // q, k, v, o, lse and their gradients; the block's x, norm, output.
    per_layer_attention = tokens * (2 * (h * qk + kv_heads * qk + kv_heads * vd + h * vd) + h +
                                    latents + 5 * d);
  }
  const double rows = tokens * k;  // routed (token, expert) rows
  const double per_moe_layer = rows * (2 * d + 6 * f) + tokens * (3 * shared_f + 6 * d + experts * 3);
  const double per_dense_layer = tokens * (6 * dense_f + 6 * d);
  e.activation_bytes =
      4 * (layers * per_layer_attention + moe_layers * per_moe_layer +
           dense_layers * per_dense_layer + tokens * 6 * d);
  const int64_t chunk = loss_chunk_tokens(c.vocab_size, c.tokens_per_step());
  e.workspace_bytes = 4 * (2 * static_cast<double>(chunk) * v +
                           (chunk < c.tokens_per_step() ? d * v : 0)) +
                      64.0 * 1024 * 1024;

  // What shrinks it, by the share of the estimate each key drives.
  std::vector<std::pair<double, std::string>> drivers = {
      {routed * 16, "num_experts (or a larger ici_expert_parallelism)"},
      {routed * 16 + moe_rest * 16, "base_moe_mlp_dim"},
      {(layers * per_layer_attention + moe_layers * per_moe_layer) * 4,
       "per_device_batch_size, max_target_length"},
      {params * 16, "base_num_decoder_layers, base_emb_dim"},
      {embed * 16 + e.workspace_bytes, "vocab_size"},
      {dense * 16, "first_num_dense_layers, base_mlp_dim"},
      {attention_all * 16, "base_num_query_heads"},
  };
  std::stable_sort(drivers.begin(), drivers.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (const auto& [bytes, keys] : drivers) {
    if (bytes > 0.05 * e.total_bytes()) e.shrinking_keys.push_back(keys);
  }
  if (adam) e.shrinking_keys.push_back("opt_type=sgd");
  return e;
}

void check_memory(const TrainConfig& config, double available) {
  const MemoryEstimate e = estimate_memory(config);
  if (e.total_bytes() <= available) return;
  std::ostringstream why;
  why << "the run needs about " << gib(e.total_bytes()) << " (" << e.parameters
      << " parameters: " << gib(e.parameter_bytes) << " values and gradients, "
      << gib(e.optimizer_bytes) << " optimizer state; " << gib(e.activation_bytes)
      << " activations; " << gib(e.workspace_bytes) << " workspace) but this machine has "
      << gib(available) << "; reduce ";
  for (size_t i = 0; i < e.shrinking_keys.size(); ++i) {
    why << (i ? "; or " : "") << e.shrinking_keys[i];
  }
  fail("memory", gib(e.total_bytes()), why.str());
}

}  // namespace raggemm::train
