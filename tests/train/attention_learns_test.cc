// A model with attention learns what one without cannot: every sequence is a
// random segment of 8 letters (16 possible) written twice. The second copy
// is predictable only by looking back 8 tokens; a per-token model (no
// attention) cannot beat the letters' entropy ln 16 = 2.77 nats there, a
// model with attention copies. The numbers of a longer run are in
// docs/moe_configuration.md ("Attention learns to copy").
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "raggemm/train.h"
#include "train/model.h"
#include "train/optimizer.h"

namespace raggemm::train {
namespace {

constexpr int64_t kSegment = 8, kSeq = 2 * kSegment, kBatch = 16, kLetters = 16;

struct Batch {
  std::vector<int32_t> inputs, targets;
};

// Sequence = segment, segment, separator (token kLetters); inputs are the
// first kSeq tokens, targets the next ones.
Batch make_batch(std::mt19937& rng) {
  Batch b;
  std::uniform_int_distribution<int32_t> letter(0, kLetters - 1);
  for (int64_t s = 0; s < kBatch; ++s) {
    std::vector<int32_t> seq(kSegment);
    for (auto& t : seq) t = letter(rng);
    std::vector<int32_t> full = seq;
    full.insert(full.end(), seq.begin(), seq.end());
    full.push_back(kLetters);
    b.inputs.insert(b.inputs.end(), full.begin(), full.begin() + kSeq);
    b.targets.insert(b.targets.end(), full.begin() + 1, full.end());
  }
  return b;
}

// Mean loss over the targets inside the second copy that the first copy
// determines (its letters 2..8: positions kSegment .. kSeq - 2 predict them).
double repeated_half_loss(const std::vector<double>& losses) {
  double sum = 0;
  int64_t count = 0;
  for (int64_t s = 0; s < kBatch; ++s) {
    for (int64_t p = kSegment; p < kSeq - 1; ++p) {
      sum += losses[s * kSeq + p];
      ++count;
    }
  }
  return sum / static_cast<double>(count);
}

double train_and_measure(const std::string& attention_type, int64_t steps) {
  const TrainConfig config = resolve(parse_train_arguments(
      {"vocab_size=" + std::to_string(kLetters + 1), "base_emb_dim=32", "base_mlp_dim=32",
       "num_experts=4", "num_experts_per_tok=2", "base_num_decoder_layers=1",
       "attention_type=" + attention_type, "base_num_query_heads=2", "base_num_kv_heads=2",
       "head_dim=16", "learning_rate=0.01", "warmup_steps_fraction=0.05",
       "max_target_length=" + std::to_string(kSeq), "steps=" + std::to_string(steps)}));
  ModelConfig m;
  m.vocab_size = config.vocab_size;
  m.num_layers = config.base_num_decoder_layers;
  m.moe = config.moe;
  m.attention = attention_config(config);
  m.seq_len = kSeq;
  Model<float> model(m, nullptr);
  model.init(1);
  Optimizer optimizer(config, model.params());
  std::mt19937 rng(7);
  for (int64_t step = 1; step <= steps; ++step) {
    const Batch b = make_batch(rng);
    model.loss_and_grad(b.inputs.data(), b.targets.data(), kBatch * kSeq);
    optimizer.step(Optimizer::learning_rate(config, step));
  }
  std::mt19937 held_out(12345);
  double total = 0;
  for (int i = 0; i < 4; ++i) {
    const Batch b = make_batch(held_out);
    model.loss(b.inputs.data(), b.targets.data(), kBatch * kSeq);
    total += repeated_half_loss(model.token_losses());
  }
  return total / 4;
}

TEST(AttentionLearnsTest, CopiesTheRepeatedSegmentAPerTokenModelCannot) {
  const double unigram = std::log(static_cast<double>(kLetters));
  const int64_t steps = 200;
  const double with_attention = train_and_measure("mha", steps);
  const double without = train_and_measure("none", steps);
  RecordProperty("repeated_half_loss_mha", std::to_string(with_attention));
  RecordProperty("repeated_half_loss_none", std::to_string(without));
  EXPECT_GT(without, 0.9 * unigram) << "a per-token model cannot predict a random copy";
  EXPECT_LT(with_attention, 0.5 * unigram) << "attention should copy (without: " << without << ")";
}

}  // namespace
}  // namespace raggemm::train
