// The MoE layer under expert parallelism (2 ranks) against the same layer on
// one process with the whole batch: outputs, input gradients and every
// parameter gradient, f32, for both exchanges, several router and expert
// configurations, and skewed routing where one rank's experts get no rows.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "parallel/mpi_test_env.h"
#include "raggemm/error.h"
#include "raggemm/moe.h"
#include "raggemm/plan.h"

namespace raggemm::testing {
namespace {

using moe::MoeConfig;
using moe::MoeLayer;
using moe::Param;

constexpr int64_t kTokensPerRank = 13;  // odd on purpose: no even split anywhere

std::vector<float> random_floats(int64_t count, uint64_t seed, double scale = 1.0) {
  Param<float> p;
  p.reset("values", {count});
  moe::init_normal(p, seed, scale);
  return p.value;
}

enum class Skew { kNone, kToFirstRank, kToLastRank };

struct LayerCase {
  const char* name;
  bool ring;
  Skew skew;
  void (*configure)(MoeConfig&);
};

MoeConfig base_config() {
  MoeConfig c;
  c.embed_dim = 24;
  c.mlp_dim = 16;
  c.router.num_experts = 4;
  c.router.top_k = 2;
  c.router.load_balance_loss_weight = 0.01;
  return c;
}

void plain(MoeConfig&) {}
void sigmoid_grouped_biased(MoeConfig& c) {
  c.router.num_experts = 8;
  c.router.top_k = 3;
  c.router.score_function = moe::ScoreFunction::kSigmoid;
  c.router.selection_bias = true;
  c.router.n_routing_groups = 4;
  c.router.topk_routing_group = 2;
  c.router.normalize_top_k = false;
  c.router.routed_scaling_factor = 2.5;
}
void fused_shared_v2(MoeConfig& c) {
  c.fused_gate_up = true;
  c.shared_experts = 1;
  c.plan.wi.pass(Pass::kForward).kernel = KernelVersion::kV2;  // fused SwiGLU output stage
  c.plan.wi.pass(Pass::kGradRhs).kernel = KernelVersion::kV2;
  c.plan.wo.pass(Pass::kForward).kernel = KernelVersion::kV2;
}

void fp8(MoeConfig& c) { c.quantization = QuantRecipe::kFp8; }
void int8_bf16(MoeConfig& c) {
  c.quantization = QuantRecipe::kInt8;
  c.dtype = DType::kBF16;
}

struct Result {
  std::vector<float> out, dx;
  std::vector<std::vector<float>> grads;
  std::vector<bool> sharded;
  moe::RoutingStats stats;
};

// Skewed routing: positive inputs and a gate that favours the experts of
// one rank, so the other rank's experts receive no rows at all.
void skew_gate(MoeLayer<float>& layer, Skew skew, std::vector<float>& x) {
  if (skew == Skew::kNone) return;
  const MoeConfig& c = layer.config();
  const int64_t e = c.router.num_experts, half = e / 2;
  Param<float>& gate = *layer.params()[0];
  for (int64_t i = 0; i < c.embed_dim; ++i) {
    for (int64_t j = 0; j < e; ++j) {
      const bool favoured = skew == Skew::kToFirstRank ? j < half : j >= half;
      gate.value[i * e + j] = (favoured ? 0.3f : -0.3f) + 0.01f * static_cast<float>(j);
    }
  }
  for (float& v : x) v = std::abs(v);
}

Result run(const MoeConfig& config, Communicator* comm, Skew skew, int64_t first_token,
           int64_t tokens) {
  const int64_t d = config.embed_dim, all = kTokensPerRank * world().size();
  std::vector<float> x_all = random_floats(all * d, 11), dout_all = random_floats(all * d, 12);
  MoeLayer<float> layer("moe", config, nullptr, comm);
  layer.init(5);
  skew_gate(layer, skew, x_all);
  Result r;
  const std::vector<float> x(x_all.begin() + first_token * d,
                             x_all.begin() + (first_token + tokens) * d);
  const std::vector<float> dout(dout_all.begin() + first_token * d,
                                dout_all.begin() + (first_token + tokens) * d);
  r.out.resize(x.size());
  r.dx.assign(x.size(), 0.0f);
  layer.forward(x.data(), tokens, r.out.data());
  layer.backward(dout.data(), r.dx.data());
  for (Param<float>* p : layer.params()) {
    r.grads.push_back(p->grad);
    r.sharded.push_back(p->expert_sharded);
  }
  r.stats = layer.routing();
  return r;
}

class ExpertParallelLayerTest : public ::testing::TestWithParam<LayerCase> {};

TEST_P(ExpertParallelLayerTest, MatchesOneProcessOnTheGlobalBatch) {
  const LayerCase& c = GetParam();
  MoeConfig config = base_config();
  c.configure(config);
  config.use_ring_of_experts = c.ring;
  const int rank = world().rank(), ranks = world().size();
  const int64_t d = config.embed_dim, all = kTokensPerRank * ranks;

  const Result single = run(config, nullptr, c.skew, 0, all);
  const Result parallel = run(config, &world(), c.skew, rank * kTokensPerRank, kTokensPerRank);

  const std::vector<float> out_slice(single.out.begin() + rank * kTokensPerRank * d,
                                     single.out.begin() + (rank + 1) * kTokensPerRank * d);
  const std::vector<float> dx_slice(single.dx.begin() + rank * kTokensPerRank * d,
                                    single.dx.begin() + (rank + 1) * kTokensPerRank * d);
  EXPECT_LT(max_relative(parallel.out, out_slice), 1e-5);
  EXPECT_LT(max_relative(parallel.dx, dx_slice), 1e-5);
  EXPECT_EQ(parallel.stats.group_sizes, single.stats.group_sizes);
  EXPECT_NEAR(parallel.stats.load_balance_loss, single.stats.load_balance_loss,
              1e-6 * single.stats.load_balance_loss);

  ASSERT_EQ(parallel.grads.size(), single.grads.size());
  const int64_t local = config.router.num_experts / ranks;
  for (size_t i = 0; i < single.grads.size(); ++i) {
    std::vector<float> grad = parallel.grads[i];
    std::vector<float> expected = single.grads[i];
    if (parallel.sharded[i]) {
      // This rank's experts' slice of the full gradient, complete here.
      const size_t per_rank = expected.size() / static_cast<size_t>(ranks);
      ASSERT_EQ(grad.size(), per_rank) << "param " << i;
      expected.assign(single.grads[i].begin() + rank * per_rank,
                      single.grads[i].begin() + (rank + 1) * per_rank);
    } else {
      // Every rank holds a share: the shares sum to the gradient.
      world().allreduce_sum(grad.data(), static_cast<int64_t>(grad.size()));
    }
    const double error = max_relative(grad, expected);
    // Quantized expert-weight gradients: the tgmm quantizes its gradient
    // operand with per-column scales over the rows it sees, which are this
    // rank's experts' rows here and every expert's rows on one process, so
    // the two differ by quantization noise (the layer's quantized-vs-f32
    // bound is 0.22); a wrong expert or a lost row would be off by O(1).
    const bool noisy = parallel.sharded[i] && config.quantization.has_value();
    EXPECT_LT(error, noisy ? 0.25 : 1e-5) << "param " << i;
  }
  if (c.skew != Skew::kNone) {
    // The starved rank's expert gradients are exactly zero.
    const bool starved = (c.skew == Skew::kToFirstRank) == (rank == ranks - 1);
    for (size_t i = 0; i < parallel.grads.size(); ++i) {
      if (!parallel.sharded[i] || !starved) continue;
      for (float g : parallel.grads[i]) ASSERT_EQ(g, 0.0f);
    }
    int64_t starved_rows = 0;
    for (int64_t e = 0; e < local; ++e) {
      const int64_t expert = (c.skew == Skew::kToFirstRank ? ranks - 1 : 0) * local + e;
      starved_rows += single.stats.group_sizes[expert];
    }
    EXPECT_EQ(starved_rows, 0) << "the skew must leave one rank without rows";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Exchanges, ExpertParallelLayerTest,
    ::testing::Values(LayerCase{"all_to_all", false, Skew::kNone, plain},
                      LayerCase{"ring", true, Skew::kNone, plain},
                      LayerCase{"all_to_all_sigmoid_grouped", false, Skew::kNone,
                                sigmoid_grouped_biased},
                      LayerCase{"ring_sigmoid_grouped", true, Skew::kNone, sigmoid_grouped_biased},
                      LayerCase{"all_to_all_fused_shared_v2", false, Skew::kNone, fused_shared_v2},
                      LayerCase{"ring_fused_shared_v2", true, Skew::kNone, fused_shared_v2},
                      LayerCase{"all_to_all_fp8_full", false, Skew::kNone, fp8},
                      LayerCase{"ring_int8", true, Skew::kNone, int8_bf16},
                      LayerCase{"all_to_all_skew_first", false, Skew::kToFirstRank, plain},
                      LayerCase{"all_to_all_skew_last", false, Skew::kToLastRank, plain},
                      LayerCase{"ring_skew_first", true, Skew::kToFirstRank, plain},
                      LayerCase{"ring_skew_last", true, Skew::kToLastRank, plain}),
    [](const auto& info) { return std::string(info.param.name); });

// The ring's buffers hold every token's rows; those of other ranks' experts
// must not carry a previous call's values into this one (a quantized tgmm
// scales its operands over all rows): the same batch after a different one
// gives bitwise the same gradients.
TEST(ExpertParallelRing, RepeatedCallsDoNotDependOnEarlierBatches) {
  MoeConfig config = base_config();
  int8_bf16(config);
  config.use_ring_of_experts = true;
  const int64_t d = config.embed_dim;
  MoeLayer<float> layer("moe", config, nullptr, &world());
  layer.init(5);
  auto grads_of = [&](uint64_t seed) {
    const std::vector<float> x = random_floats(kTokensPerRank * d, seed + world().rank());
    const std::vector<float> dout = random_floats(kTokensPerRank * d, seed + 100);
    std::vector<float> out(x.size()), dx(x.size(), 0.0f);
    layer.forward(x.data(), kTokensPerRank, out.data());
    layer.backward(dout.data(), dx.data());
    std::vector<std::vector<float>> grads = {out, dx};
    for (Param<float>* p : layer.params()) grads.push_back(p->grad);
    return grads;
  };
  const auto first = grads_of(1);
  grads_of(2);
  EXPECT_EQ(grads_of(1), first);
}

TEST(ExpertParallelLayerErrors, ExpertsNotDivisibleByRanks) {
  MoeConfig config = base_config();
  config.router.num_experts = 3;
  config.router.top_k = 1;
  try {
    MoeLayer<float> layer("moe", config, nullptr, &world());
    FAIL() << "3 experts over 2 ranks must be refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "num_experts");
    EXPECT_EQ(e.value(), "3");
  }
}

}  // namespace
}  // namespace raggemm::testing
