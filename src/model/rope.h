// Rotary position embeddings with MaxText's keys (docs/moe_configuration.md):
//   default: pairs (i, i + dim/2), frequency theta^(-2i/dim) with theta =
//            rope_max_timescale (MaxText's RotaryEmbedding: the head split in
//            halves);
//   yarn:    pairs (2i, 2i+1) (MaxText's YarnRotaryEmbedding with
//            interleave=True, after DeepSeek-V3's reference), frequencies
//            blended between f and f / rope_factor by a linear ramp over the
//            correction range [floor(low), ceil(high)] that beta_fast and
//            beta_slow give for original_max_position_embeddings.
// The rotation is orthogonal, so its backward is the rotation by -angle.
#pragma once

#include <cstdint>
#include <vector>

namespace raggemm::model {

enum class RopeType { kDefault, kYarn };

struct RopeConfig {
  RopeType type = RopeType::kDefault;
  double max_timescale = 10000;  // rope_max_timescale (theta)
  double factor = 40;            // rope_factor (yarn)
  int64_t original_max_position_embeddings = 4096;
  int64_t max_position_embeddings = 163840;
  double beta_fast = 32;
  double beta_slow = 1;
  double mscale = 1;  // MLA softmax-scale correction (see mla_softmax_factor)
};

// The dim/2 rotation frequencies (radians per position).
std::vector<double> rope_frequencies(const RopeConfig& config, int64_t dim);

// MLA's softmax scale multiplier: with yarn and max_position_embeddings >
// original_max_position_embeddings it is (0.1 * mscale * ln(rope_factor) + 1)^2
// (MaxText attention_mla.py, DeepSeek-V3 inference/model.py), else 1.
double mla_softmax_factor(const RopeConfig& config);

class Rope {
 public:
  Rope(const RopeConfig& config, int64_t dim);
  int64_t dim() const { return dim_; }
  // Rotates the `dim` values at x + t * row_stride + h * head_stride for
  // tokens t and heads h; the position of token t is t % seq_len (tokens are
  // whole sequences one after another). inverse: by -angle (the backward).
  template <class T>
  void apply(T* x, int64_t tokens, int64_t seq_len, int64_t heads, int64_t row_stride,
             int64_t head_stride, bool inverse);

 private:
  void prepare(int64_t seq_len);

  RopeType type_;
  int64_t dim_;
  std::vector<double> frequencies_;
  int64_t table_len_ = 0;
  std::vector<double> cos_, sin_;  // [seq_len, dim/2]
};

}  // namespace raggemm::model
