// weight_dtype=bf16 stores the model's matrices as bf16 (2 bytes an
// element, what the kernels read), with f32 masters in the optimizer:
// - the storage really is bf16 (and norm scales / the selection bias stay f32);
// - training equals a reference that keeps f32 weights and rounds them to
//   bf16 before every step (bitwise: the same values reach the same kernels);
// - a resumed run is bitwise the uninterrupted one (f32 master blobs in the
//   checkpoints, bf16 storage rebuilt from them);
// - the memory estimate counts 2 + 4 bytes per bf16 matrix element.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "raggemm/dtype.h"
#include "raggemm/train.h"
#include "train/checkpoint.h"
#include "train/memory_estimate.h"
#include "train/model.h"
#include "train/optimizer.h"

namespace raggemm::train {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kSeq = 16, kBatch = 4, kVocab = 32;

// `dtype`: what the GMMs read; with dtype=f32 a bf16 weight meets an f32 lhs
// (the kernels widen it as they pack).
std::vector<std::string> small_args(const std::string& weight_dtype,
                                    const std::string& dtype = "bf16") {
  return {"vocab_size=" + std::to_string(kVocab), "base_emb_dim=32", "base_mlp_dim=32",
          "num_experts=4", "num_experts_per_tok=2", "base_num_decoder_layers=2",
          "first_num_dense_layers=1", "shared_experts=1", "routed_score_func=sigmoid",
          "routed_bias=true", "base_num_query_heads=2", "base_num_kv_heads=2", "head_dim=16",
          "learning_rate=0.01", "opt_type=adamw", "dtype=" + dtype,
          "max_target_length=" + std::to_string(kSeq), "per_device_batch_size=" + std::to_string(kBatch),
          "weight_dtype=" + weight_dtype};
}

TrainConfig small_config(const std::string& weight_dtype, const std::string& dtype = "bf16") {
  std::vector<std::string> args = small_args(weight_dtype, dtype);
  args.push_back("steps=5");
  return resolve(parse_train_arguments(args));
}

struct Batch {
  std::vector<int32_t> inputs, targets;
};

Batch random_batch(std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> token(0, kVocab - 1);
  Batch b;
  for (int64_t i = 0; i < kBatch * kSeq; ++i) b.inputs.push_back(token(rng));
  for (int64_t i = 0; i < kBatch * kSeq; ++i) b.targets.push_back(token(rng));
  return b;
}

bool is_vector(const moe::Param<float>& p) { return p.shape.size() < 2; }

TEST(Bf16WeightsTest, MatricesAreStoredAsBf16NormsAndBiasStayF32) {
  const TrainConfig f32 = small_config("f32"), bf16 = small_config("bf16");
  Model<float> plain(model_config(f32), nullptr), halved(model_config(bf16), nullptr);
  plain.init(3);
  halved.init(3);
  Optimizer keep(f32, plain.params());
  Optimizer halve(bf16, halved.params());
  int64_t plain_bytes = 0, halved_bytes = 0, matrix_elements = 0, vectors = 0;
  bool saw_bias = false;
  const auto a = plain.params(), b = halved.params();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    plain_bytes += a[i]->storage_bytes();
    halved_bytes += b[i]->storage_bytes();
    EXPECT_FALSE(a[i]->bf16) << a[i]->name;
    if (is_vector(*b[i])) {
      ++vectors;
      saw_bias |= !b[i]->trainable;
      EXPECT_FALSE(b[i]->bf16) << b[i]->name << " (norm scale or selection bias) must stay f32";
      EXPECT_EQ(b[i]->storage_bytes(), 4 * b[i]->size()) << b[i]->name;
      EXPECT_EQ(b[i]->value, a[i]->value) << b[i]->name;
      continue;
    }
    matrix_elements += b[i]->size();
    EXPECT_TRUE(b[i]->bf16) << b[i]->name;
    EXPECT_EQ(b[i]->storage_bytes(), 2 * b[i]->size()) << b[i]->name;
    EXPECT_EQ(b[i]->value.capacity(), 0u) << b[i]->name << ": the f32 values must be freed";
    EXPECT_EQ(b[i]->grad.size(), a[i]->grad.size()) << b[i]->name << ": gradients stay f32";
    // The stored bits are the f32 initial values rounded to nearest even.
    for (int64_t j = 0; j < b[i]->size(); ++j) {
      ASSERT_EQ(b[i]->bits[j], f32_to_bf16(a[i]->value[j])) << b[i]->name << "[" << j << "]";
    }
  }
  EXPECT_TRUE(saw_bias) << "the config should have a selection bias";
  EXPECT_GT(vectors, 4);
  EXPECT_EQ(halved_bytes, plain_bytes - 2 * matrix_elements);
  EXPECT_LT(halved_bytes, plain_bytes * 51 / 100);  // matrices dominate

  // The estimate: 2 bytes of weight + 4 of master per matrix element, in
  // place of 4 of weight: 2 more.
  const MemoryEstimate ef = estimate_memory(f32), eb = estimate_memory(bf16);
  EXPECT_DOUBLE_EQ((eb.parameter_bytes + eb.optimizer_bytes) - (ef.parameter_bytes + ef.optimizer_bytes),
                   2.0 * static_cast<double>(matrix_elements));
}

class Bf16TrainingTest : public ::testing::TestWithParam<std::string> {};

TEST_P(Bf16TrainingTest, EqualsF32WeightsRoundedToBf16OnUse) {
  const TrainConfig bf16 = small_config("bf16", GetParam()), f32 = small_config("f32", GetParam());
  // Under test: bf16 storage, masters in the optimizer.
  Model<float> model(model_config(bf16), nullptr);
  model.init(5);
  Optimizer optimizer(bf16, model.params());
  // Reference: f32 masters (`masters`, updated by an f32 optimizer) and a
  // model that computes with them rounded to bf16 (matrices only).
  Model<float> masters(model_config(f32), nullptr), rounded(model_config(f32), nullptr);
  masters.init(5);
  rounded.init(5);
  Optimizer reference(f32, masters.params());
  const auto under_test = model.params(), master = masters.params(), use = rounded.params();
  std::mt19937 rng(11);
  for (int64_t step = 1; step <= 5; ++step) {
    for (size_t i = 0; i < use.size(); ++i) {
      for (int64_t j = 0; j < use[i]->size(); ++j) {
        const float w = master[i]->value[j];
        use[i]->value[j] = is_vector(*use[i]) ? w : bf16_to_f32(f32_to_bf16(w));
      }
    }
    const Batch b = random_batch(rng);
    const LossParts got = model.loss_and_grad(b.inputs.data(), b.targets.data(), kBatch * kSeq);
    const LossParts want = rounded.loss_and_grad(b.inputs.data(), b.targets.data(), kBatch * kSeq);
    ASSERT_EQ(got.total, want.total) << "step " << step;
    for (size_t i = 0; i < use.size(); ++i) master[i]->grad = use[i]->grad;
    const double lr = Optimizer::learning_rate(bf16, step);
    optimizer.step(lr);
    reference.step(lr);
    // The selection bias is nudged by the layers, not the optimizer.
    for (auto* layer : model.moe_layers()) layer->update_selection_bias(bf16.routed_bias_update_rate);
    for (auto* layer : rounded.moe_layers()) layer->update_selection_bias(f32.routed_bias_update_rate);
    for (size_t i = 0; i < use.size(); ++i) {
      if (!use[i]->trainable) master[i]->value = use[i]->value;
    }
  }
  // The expert GMMs received the bf16 weights as stored (rhs bf16 whatever
  // the compute dtype; the weight-gradient pass has no weight operand).
  int64_t weight_reads = 0;
  for (const moe::GmmCall& call : model.moe_layers()[0]->calls()) {
    if (call.kernel == "naive" || call.pass == Pass::kGradRhs) continue;
    EXPECT_EQ(call.rhs_type, "bf16") << call.name;
    EXPECT_EQ(call.lhs_type, GetParam()) << call.name;
    ++weight_reads;
  }
  EXPECT_GT(weight_reads, 0);

  auto state = optimizer.state();
  for (size_t i = 0; i < master.size(); ++i) {
    if (!under_test[i]->bf16) {
      EXPECT_EQ(under_test[i]->value, master[i]->trainable ? master[i]->value : use[i]->value)
          << under_test[i]->name;
      continue;
    }
    ASSERT_TRUE(state.count("master/" + under_test[i]->name)) << under_test[i]->name;
    EXPECT_EQ(*state.at("master/" + under_test[i]->name), master[i]->value) << under_test[i]->name;
    for (int64_t j = 0; j < under_test[i]->size(); ++j) {
      ASSERT_EQ(under_test[i]->bits[j], f32_to_bf16(master[i]->value[j])) << under_test[i]->name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ComputeDtype, Bf16TrainingTest, ::testing::Values("bf16", "f32"));

std::vector<double> losses(const TrainResult& r) {
  std::vector<double> out;
  for (const StepMetrics& m : r.steps) out.push_back(m.loss);
  return out;
}

TEST(Bf16WeightsTest, ResumeFromCheckpointIsBitwise) {
  const fs::path dir = fs::temp_directory_path() / ("raggemm_bf16_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  auto config_of = [&](const std::string& run) {
    std::vector<std::string> args = small_args("bf16");
    args.push_back("steps=6");
    args.push_back("enable_checkpointing=true");
    args.push_back("checkpoint_period=3");
    args.push_back("dataset_type=synthetic");
    args.push_back("base_output_directory=" + dir.string());
    args.push_back("run_name=" + run);
    return resolve(parse_train_arguments(args));
  };
  std::ostringstream log;
  const TrainResult whole = run_training(config_of("whole"), log);
  ASSERT_EQ(whole.steps.size(), 6u);
  EXPECT_EQ(whole.steps.back().weight_dtype, "bf16");
  EXPECT_GT(whole.steps.back().weight_bytes, 0);

  // The same run cut after step 3: its step-6 checkpoint removed, it resumes.
  const TrainResult first = run_training(config_of("cut"), log);
  ASSERT_EQ(first.steps.size(), 6u);
  const fs::path cut_ckpt = dir / "cut" / "checkpoints" / "step_00000006.ckpt";
  ASSERT_TRUE(fs::remove(cut_ckpt)) << cut_ckpt;
  const TrainResult resumed = run_training(config_of("cut"), log);
  ASSERT_EQ(resumed.resumed_from_step, 3);
  ASSERT_EQ(resumed.steps.size(), 3u);
  const std::vector<double> all = losses(whole);
  const std::vector<double> tail(all.begin() + 3, all.end());
  EXPECT_EQ(losses(resumed), tail);

  // Checkpoint blobs are f32 (4 bytes an element) and equal bitwise.
  const CheckpointData a = load_checkpoint((dir / "whole" / "checkpoints" / "step_00000006.ckpt").string());
  const CheckpointData b = load_checkpoint(cut_ckpt.string());
  ASSERT_EQ(a.blobs.size(), b.blobs.size());
  for (const auto& [name, blob] : a.blobs) {
    ASSERT_TRUE(b.blobs.count(name)) << name;
    EXPECT_EQ(std::memcmp(blob.data(), b.blobs.at(name).data(), blob.size() * sizeof(float)), 0)
        << name;
  }
  EXPECT_TRUE(a.blobs.count("master/embedding"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace raggemm::train
