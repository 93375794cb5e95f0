// The whole model's first step under expert parallelism (2 ranks) against
// one process on the same global batch: loss and every parameter gradient
// within 1e-5 relative (max |diff| / max |reference|), for both exchanges.
// The largest differences are printed; RAGGEMM_EP_FULL_CONFIG=1 runs
// configs/base.yml's dimensions instead of the small test model (the
// numbers docs/parallelism.md reports).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "parallel/mpi_test_env.h"
#include "raggemm/train.h"
#include "train/data.h"
#include "train/model.h"

namespace raggemm::testing {
namespace {

train::TrainConfig model_config(bool ring) {
  std::vector<std::string> args = {std::string(RAGGEMM_SOURCE_DIR) + "/configs/base.yml",
                                   "ici_expert_parallelism=2",
                                   ring ? "use_ring_of_experts=true" : "use_ring_of_experts=false"};
  const char* full = std::getenv("RAGGEMM_EP_FULL_CONFIG");
  if (full == nullptr || std::string(full) != "1") {
    for (const char* small : {"per_device_batch_size=2", "max_target_length=24", "vocab_size=64",
                              "base_emb_dim=32", "base_mlp_dim=48", "shared_experts=1"}) {
      args.push_back(small);
    }
  }
  return train::resolve(train::parse_train_arguments(args));
}

struct Gradients {
  double loss = 0, aux = 0;
  std::vector<std::vector<float>> grads;
  std::vector<std::string> names;
  std::vector<bool> sharded;
};

Gradients first_step(const train::TrainConfig& config, Communicator* comm, int64_t batch,
                     train::DataShard shard) {
  train::ModelConfig m;
  m.vocab_size = config.vocab_size;
  m.num_layers = config.base_num_decoder_layers;
  m.dense_layers = config.first_num_dense_layers;
  m.moe = config.moe;
  m.comm = comm;
  train::Model<float> model(m, nullptr);
  model.init(config.seed);
  const auto data =
      train::make_synthetic_dataset(config.vocab_size, config.synthetic_branching, batch,
                                    config.max_target_length, config.seed, shard);
  const train::Batch b = data->batch(0);
  const train::LossParts parts =
      model.loss_and_grad(b.inputs.data(), b.targets.data(), batch * config.max_target_length);
  Gradients g;
  g.loss = parts.total;
  g.aux = parts.aux_loss;
  for (auto* p : model.params()) {
    g.grads.push_back(p->grad);
    g.names.push_back(p->name);
    g.sharded.push_back(p->expert_sharded);
  }
  return g;
}

class ExpertParallelModelTest : public ::testing::TestWithParam<bool> {};

TEST_P(ExpertParallelModelTest, FirstStepLossAndGradientsMatchOneProcess) {
  const train::TrainConfig config = model_config(GetParam());
  const int rank = world().rank(), ranks = world().size();
  const int64_t per_rank = config.per_device_batch_size;
  const Gradients parallel =
      first_step(config, &world(), per_rank, {rank * per_rank, ranks * per_rank});
  const Gradients single = first_step(config, nullptr, ranks * per_rank, {});

  const double loss_error = std::abs(parallel.loss - single.loss) / std::abs(single.loss);
  EXPECT_LT(loss_error, 1e-5);
  double worst = 0;
  std::string worst_name;
  ASSERT_EQ(parallel.grads.size(), single.grads.size());
  for (size_t i = 0; i < single.grads.size(); ++i) {
    std::vector<float> expected = single.grads[i];
    if (parallel.sharded[i]) {
      const size_t part = expected.size() / static_cast<size_t>(ranks);
      expected.assign(single.grads[i].begin() + rank * part,
                      single.grads[i].begin() + (rank + 1) * part);
    }
    ASSERT_EQ(parallel.grads[i].size(), expected.size()) << parallel.names[i];
    // Shared parameters' gradients are already summed over the ranks.
    const double error = max_relative(parallel.grads[i], expected);
    EXPECT_LT(error, 1e-5) << parallel.names[i];
    if (error > worst) {
      worst = error;
      worst_name = parallel.names[i];
    }
  }
  // The largest over the ranks (a max through a sum of one-hot slots).
  std::vector<double> slots(2 * static_cast<size_t>(ranks), 0.0);
  slots[2 * rank] = worst;
  slots[2 * rank + 1] = loss_error;
  world().allreduce_sum(slots.data(), static_cast<int64_t>(slots.size()));
  if (rank == 0) {
    double grad_max = 0;
    for (int p = 0; p < ranks; ++p) grad_max = std::max(grad_max, slots[2 * p]);
    std::printf(
        "[ measure ] %s: first-step loss %.6f (P=1) vs %.6f (P=2), rel diff %.2e; "
        "gradient max rel diff %.2e (rank 0's worst: %s)\n",
        GetParam() ? "ring" : "all_to_all", single.loss, parallel.loss, loss_error, grad_max,
        worst_name.c_str());
  }
}

INSTANTIATE_TEST_SUITE_P(Exchanges, ExpertParallelModelTest, ::testing::Bool(),
                         [](const auto& info) {
                           return std::string(info.param ? "ring" : "all_to_all");
                         });

}  // namespace
}  // namespace raggemm::testing
