// Causal self-attention of a decoder block, forward and full backward:
//   mha / gqa: q = x Wq, k = x Wk, v = x Wv (base_num_query_heads query
//              heads, base_num_kv_heads key/value heads of head_dim), RoPE
//              on q and k, softmax scale head_dim^-1/2, out = o Wo.
//   mla:       DeepSeek-V2/V3 multi-head latent attention (arXiv:2405.04434
//              section 2.1; MaxText attention_mla.py): the query from
//              x Wq (q_lora_rank 0) or RMSNorm(x Wq_a) Wq_b; the key/value
//              latent c = RMSNorm((x Wkv_a)[:kv_lora_rank]) and one RoPE key
//              k_pe = RoPE((x Wkv_a)[kv_lora_rank:]) shared by every head;
//              [k_nope | v] = c Wkv_b per head; k = [k_nope | k_pe];
//              q = [q_nope | RoPE(q_pe)]; scale (qk_nope+qk_rope)^-1/2 times
//              yarn's mscale correction (model/rope.h).
// The projections run as one-group GMMs (the project's kernels, cast to the
// compute dtype); the core is model/causal_attention.h. With dtype=bf16 the
// core reads q, k, v and the output gradient rounded to bf16 (accumulation
// stays f32), as the GMMs do. Every op is profiled as OpKind::kAttention.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/rope.h"
#include "raggemm/moe.h"
#include "raggemm/profiler.h"

namespace raggemm::model {

enum class AttentionType { kMha, kGqa, kMla };

struct AttentionConfig {
  AttentionType type = AttentionType::kMha;
  int64_t embed_dim = 0;
  int64_t num_query_heads = 0;
  int64_t num_kv_heads = 0;  // mha/gqa
  int64_t head_dim = 0;      // mha/gqa
  // mla
  int64_t q_lora_rank = 0;  // 0: no query compression
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  RopeConfig rope;
};

// Throws Error naming the keys of an invalid combination.
void validate(const AttentionConfig& config);

// Parameters of one attention layer (for the memory estimate).
int64_t attention_parameter_count(const AttentionConfig& config);

template <class T>
class Attention {
 public:
  Attention(std::string prefix, const AttentionConfig& config, const moe::MoeConfig& matmuls,
            Profiler* profiler);
  ~Attention();
  Attention(Attention&&) noexcept;
  void init(uint64_t seed);
  // x: [batch * seq, embed_dim], whole sequences; out (overwritten) same shape.
  // x must stay alive until backward.
  void forward(const T* x, int64_t batch, int64_t seq, T* out);
  // Overwrites every parameter's grad; adds the input gradient into dx.
  void backward(const T* dout, T* dx);
  std::vector<moe::Param<T>*> params();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

extern template class Attention<float>;
extern template class Attention<double>;

}  // namespace raggemm::model
