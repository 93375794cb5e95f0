#include "train/presets.h"

#include <map>

#include "raggemm/error.h"

namespace raggemm::train {
namespace {

// DeepSeek-V3's routing and MLA with yarn, shared by the deepseek3 presets.
PresetKeys deepseek3(PresetKeys dims) {
  const PresetKeys common = {
      {"vocab_size", "129280"},      {"first_num_dense_layers", "3"},
      {"shared_experts", "1"},       {"routed_scaling_factor", "2.5"},
      {"routed_score_func", "sigmoid"}, {"routed_bias", "true"},
      {"attention_type", "mla"},     {"qk_nope_head_dim", "128"},
      {"qk_rope_head_dim", "64"},    {"v_head_dim", "128"},
      {"mscale", "1.0"},             {"rope_type", "yarn"},
      {"rope_max_timescale", "10000"}, {"max_position_embeddings", "163840"},
      {"original_max_position_embeddings", "4096"}, {"rope_factor", "40"},
      {"beta_fast", "32"},           {"beta_slow", "1"},
  };
  dims.insert(dims.end(), common.begin(), common.end());
  return dims;
}

const std::map<std::string, PresetKeys>& presets() {
  static const std::map<std::string, PresetKeys> table = {
      {"default", {}},
      {"deepseek3-671b", deepseek3({{"base_emb_dim", "7168"},
                                    {"base_num_query_heads", "128"},
                                    {"base_num_kv_heads", "128"},
                                    {"base_mlp_dim", "18432"},
                                    {"base_moe_mlp_dim", "2048"},
                                    {"base_num_decoder_layers", "61"},
                                    {"num_experts", "256"},
                                    {"num_experts_per_tok", "8"},
                                    {"q_lora_rank", "1536"},
                                    {"kv_lora_rank", "512"}})},
      {"deepseek3-tiny", deepseek3({{"base_emb_dim", "64"},
                                    {"base_num_query_heads", "4"},
                                    {"base_num_kv_heads", "4"},
                                    {"base_mlp_dim", "64"},
                                    {"base_moe_mlp_dim", "64"},
                                    {"base_num_decoder_layers", "61"},
                                    {"num_experts", "16"},
                                    {"num_experts_per_tok", "8"},
                                    {"q_lora_rank", "32"},
                                    {"kv_lora_rank", "16"}})},
      {"deepseek2-16b",
       {{"base_emb_dim", "2048"}, {"base_num_query_heads", "16"}, {"base_num_kv_heads", "16"},
        {"base_mlp_dim", "10944"}, {"base_moe_mlp_dim", "1408"},
        {"base_num_decoder_layers", "27"}, {"first_num_dense_layers", "1"},
        {"vocab_size", "102400"}, {"num_experts", "64"}, {"num_experts_per_tok", "6"},
        {"shared_experts", "2"}, {"routed_scaling_factor", "1.0"},
        {"routed_score_func", "softmax"}, {"routed_bias", "false"}, {"attention_type", "mla"},
        {"q_lora_rank", "0"}, {"kv_lora_rank", "512"}, {"qk_nope_head_dim", "128"},
        {"qk_rope_head_dim", "64"}, {"v_head_dim", "128"}, {"rope_type", "yarn"},
        {"rope_max_timescale", "10000"}, {"max_position_embeddings", "163840"},
        {"original_max_position_embeddings", "4096"}, {"rope_factor", "40"},
        {"beta_fast", "32"}, {"beta_slow", "1"}, {"mscale", "0.707"}}},
      {"mixtral-8x7b",
       {{"base_emb_dim", "4096"}, {"base_num_query_heads", "32"}, {"base_num_kv_heads", "8"},
        {"base_mlp_dim", "14336"}, {"base_moe_mlp_dim", "14336"},
        {"base_num_decoder_layers", "32"}, {"first_num_dense_layers", "0"}, {"head_dim", "128"},
        {"vocab_size", "32000"}, {"num_experts", "8"}, {"num_experts_per_tok", "2"},
        {"shared_experts", "0"}, {"routed_score_func", "softmax"}, {"routed_bias", "false"},
        {"attention_type", "gqa"}, {"rope_type", "default"},
        {"rope_max_timescale", "1000000"}}},
      {"mixtral-8x22b",
       {{"base_emb_dim", "6144"}, {"base_num_query_heads", "48"}, {"base_num_kv_heads", "8"},
        {"base_mlp_dim", "16384"}, {"base_moe_mlp_dim", "16384"},
        {"base_num_decoder_layers", "56"}, {"first_num_dense_layers", "0"}, {"head_dim", "128"},
        {"vocab_size", "32768"}, {"num_experts", "8"}, {"num_experts_per_tok", "2"},
        {"shared_experts", "0"}, {"routed_score_func", "softmax"}, {"routed_bias", "false"},
        {"attention_type", "gqa"}, {"rope_type", "default"},
        {"rope_max_timescale", "1000000"}}},
  };
  return table;
}

}  // namespace

const PresetKeys& model_preset(const std::string& model_name) {
  auto it = presets().find(model_name);
  if (it == presets().end()) {
    std::string names;
    for (const std::string& name : model_preset_names()) names += (names.empty() ? "" : ", ") + name;
    fail("model_name", model_name.empty() ? "''" : model_name, "unknown preset; known: " + names);
  }
  return it->second;
}

std::vector<std::string> model_preset_names() {
  std::vector<std::string> names = {"default"};
  for (const auto& [name, keys] : presets()) {
    if (name != "default") names.push_back(name);
  }
  return names;
}

}  // namespace raggemm::train
