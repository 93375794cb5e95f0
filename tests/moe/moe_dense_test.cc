// The dense MoE path (sparse_matmul=false): slot assignment and drops, the
// dense path against the sparse one in f64 when nothing is dropped, and the
// configs it refuses. (Its gradients are checked against finite differences
// in moe_gradient_test.cc.)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "moe/dense_dispatch.h"
#include "moe_test_util.h"
#include "raggemm/error.h"
#include "raggemm/moe.h"

namespace raggemm::moe {
namespace {

using testing::random_values;
using testing::relative_frobenius;

TEST(DenseSlots, FillsInTokenOrderAndDropsPastCapacity) {
  // 4 tokens, top-2, 3 experts; expert 0 is asked 4 times.
  const std::vector<int32_t> experts = {0, 1, 0, 2, 0, 1, 0, 2};
  const DenseSlots keep = assign_slots(experts.data(), 4, 2, 3, -1);
  EXPECT_EQ(keep.capacity, 4);
  EXPECT_EQ(keep.dropped, 0);
  EXPECT_EQ(keep.slot, (std::vector<int32_t>{0, 4, 1, 8, 2, 5, 3, 9}));
  // capacity = ceil(8 / 3 * 0.75) = 2: the 3rd and 4th asks of expert 0 drop.
  const DenseSlots capped = assign_slots(experts.data(), 4, 2, 3, 0.75);
  EXPECT_EQ(capped.capacity, 2);
  EXPECT_EQ(capped.dropped, 2);
  EXPECT_EQ(capped.slot, (std::vector<int32_t>{0, 2, 1, 4, -1, 3, -1, 5}));
  std::vector<double> dispatch, combine;
  const std::vector<double> weights = {.5, .5, .25, .75, 1, 1, 1, 1};
  build_dense_masks(capped, weights.data(), 4, 2, 3, dispatch, combine);
  ASSERT_EQ(dispatch.size(), 4u * 6u);
  EXPECT_EQ(dispatch[1 * 6 + 4], 1.0);
  EXPECT_EQ(combine[1 * 6 + 4], 0.75);
  EXPECT_EQ(dispatch[2 * 6 + 0] + dispatch[2 * 6 + 1],
            0.0);  // token 2's expert 0 dropped
}

struct Leaves {
  std::vector<double> out, dx;
  std::vector<std::vector<double>> grads;
  RoutingStats stats;
};

Leaves run_f64(const MoeConfig& config, int64_t tokens) {
  MoeLayer<double> layer("moe", config);
  layer.init(9);
  const std::vector<double> x = random_values(tokens * config.embed_dim, 41);
  const std::vector<double> probe = random_values(tokens * config.embed_dim, 42);
  Leaves leaves;
  leaves.out.resize(x.size());
  leaves.dx.assign(x.size(), 0.0);
  layer.forward(x.data(), tokens, leaves.out.data());
  layer.backward(probe.data(), leaves.dx.data());
  for (Param<double>* p : layer.params()) leaves.grads.push_back(p->grad);
  leaves.stats = layer.routing();
  return leaves;
}

MoeConfig small_config() {
  MoeConfig config;
  config.embed_dim = 12;
  config.mlp_dim = 10;
  config.router.num_experts = 5;
  config.router.top_k = 2;
  config.router.load_balance_loss_weight = 0.05;
  config.shared_experts = 1;
  return config;
}

TEST(DensePath, KeepingEveryTokenMatchesTheSparsePathInF64) {
  for (bool fused : {false, true}) {
    MoeConfig sparse = small_config();
    sparse.fused_gate_up = fused;
    MoeConfig dense = sparse;
    dense.sparse_matmul = false;
    const Leaves a = run_f64(sparse, 23), b = run_f64(dense, 23);
    EXPECT_EQ(b.stats.dropped, 0);
    EXPECT_EQ(a.stats.group_sizes, b.stats.group_sizes);
    EXPECT_LT(relative_frobenius(b.out, a.out), 1e-13);
    EXPECT_LT(relative_frobenius(b.dx, a.dx), 1e-13);
    for (size_t i = 0; i < a.grads.size(); ++i)
      EXPECT_LT(relative_frobenius(b.grads[i], a.grads[i]), 1e-13) << i;
  }
}

TEST(DensePath, CapacityDropsAreCountedAndChangeTheOutput) {
  MoeConfig dense = small_config();
  dense.sparse_matmul = false;
  const Leaves all = run_f64(dense, 23);
  dense.capacity_factor = 0.5;
  const Leaves capped = run_f64(dense, 23);
  // capacity ceil(46 / 5 * 0.5) = 5 slots per expert: 25 of 46 fit at most.
  EXPECT_GE(capped.stats.dropped, 46 - 25);
  EXPECT_GT(relative_frobenius(capped.out, all.out), 1e-3);
}

TEST(DensePath, RunsItsMatmulsThroughTheKernelsInFloat) {
  MoeConfig dense = small_config();
  dense.embed_dim = 64;
  dense.mlp_dim = 48;
  dense.sparse_matmul = false;
  MoeLayer<float> layer("moe", dense);
  layer.init(3);
  std::vector<float> x(40 * 64, 0.5f), out(x.size()), dx(x.size(), 0.0f);
  layer.forward(x.data(), 40, out.data());
  layer.backward(x.data(), dx.data());
  int dispatch = 0, experts = 0;
  for (const GmmCall& call : layer.calls()) {
    if (call.name.rfind("moe/dispatch", 0) == 0 || call.name.rfind("moe/combine", 0) == 0) {
      ++dispatch;
      EXPECT_EQ(call.weight, "dense");
      EXPECT_NE(call.kernel, "naive") << call.name;
    }
    if (call.weight == "wi" || call.weight == "wo") ++experts;
  }
  EXPECT_EQ(dispatch,
            5);  // dispatch, combine; combine_drhs, combine_dlhs, dispatch_bwd
  EXPECT_EQ(experts, 3 + 6);
}

TEST(DensePath, RefusesWhatItCannotRun) {
  MoeConfig c = small_config();
  c.capacity_factor = 1.0;  // sparse path
  EXPECT_THROW(validate(c), Error);
  c.sparse_matmul = false;
  EXPECT_NO_THROW(validate(c));
  c.quantization = QuantRecipe::kFp8;
  EXPECT_THROW(validate(c), Error);
  c.quantization.reset();
  c.capacity_factor = 0;
  EXPECT_THROW(validate(c), Error);
}

}  // namespace
}  // namespace raggemm::moe
