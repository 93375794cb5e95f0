// Permutation (stable counting sort by expert) and router selection rules.
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "moe/permute.h"
#include "moe/router.h"
#include "raggemm/error.h"

namespace raggemm::moe {
namespace {

struct PermuteCase {
  std::string name;
  int64_t experts;
  int64_t top_k;
  std::vector<int32_t> chosen;  // [tokens, k]
};

class PermuteTest : public ::testing::TestWithParam<PermuteCase> {};

TEST_P(PermuteTest, StableSortByExpertAndExactInverse) {
  const PermuteCase& c = GetParam();
  const int64_t tokens = static_cast<int64_t>(c.chosen.size()) / c.top_k;
  Permutation perm;
  build_permutation(c.chosen.data(), tokens, c.top_k, c.experts, perm);
  std::vector<int32_t> expected_sizes(c.experts, 0);
  for (int32_t e : c.chosen) ++expected_sizes[e];
  EXPECT_EQ(perm.group_sizes, expected_sizes);
  // Rows are grouped by expert in order, and within an expert in (token, slot) order.
  int64_t previous_pair = -1;
  int32_t previous_expert = -1;
  std::vector<int64_t> pair_of_row(perm.rows());
  for (int64_t a = 0; a < perm.rows(); ++a) pair_of_row[perm.row_of[a]] = a;
  for (int64_t r = 0; r < perm.rows(); ++r) {
    const int64_t a = pair_of_row[r];
    const int32_t e = c.chosen[a];
    ASSERT_GE(e, previous_expert);
    if (e == previous_expert) {
      ASSERT_GT(a, previous_pair);
    }
    previous_expert = e;
    previous_pair = a;
    EXPECT_EQ(perm.token_of_row[r], a / c.top_k);
  }
  // gather then combine with unit weights sums each token's k copies.
  const int64_t dim = 3;
  std::vector<float> x(tokens * dim);
  std::iota(x.begin(), x.end(), 1.0f);
  std::vector<float> rows(perm.rows() * dim), out(tokens * dim);
  gather_rows(perm, x.data(), dim, rows.data());
  std::vector<float> ones(perm.rows(), 1.0f);
  combine_rows(perm, rows.data(), ones.data(), dim, out.data());
  for (int64_t i = 0; i < tokens * dim; ++i) EXPECT_EQ(out[i], c.top_k * x[i]);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PermuteTest,
    ::testing::Values(PermuteCase{"uneven", 4, 2, {3, 1, 0, 3, 3, 1, 2, 0, 1, 3}},
                      PermuteCase{"all_to_one_expert", 3, 1, {2, 2, 2, 2}},
                      PermuteCase{"empty_experts", 6, 2, {5, 0, 0, 5, 5, 0}},
                      PermuteCase{"single_token", 2, 2, {1, 0}}),
    [](const auto& info) { return info.param.name; });

TEST(PermuteTest, RejectsExpertOutOfRange) {
  const std::vector<int32_t> chosen = {0, 4};
  Permutation perm;
  EXPECT_THROW(build_permutation(chosen.data(), 2, 1, 4, perm), Error);
}

TEST(RouterTest, GroupLimitedRoutingOnlyPicksFromBestGroups) {
  RouterConfig config;
  config.num_experts = 8;
  config.top_k = 2;
  config.n_routing_groups = 4;  // groups {0,1} {2,3} {4,5} {6,7}
  config.topk_routing_group = 1;
  // Softmax groups score by their best expert: group {6,7} (2.1) beats
  // {2,3} (2.0), so with one group the runner-up is 6, not the better 2.
  const std::vector<float> logits = {0.0f, 0.1f, 2.0f, 1.9f, 0.0f, 0.0f, 0.5f, 2.1f};
  Routing<float> routing;
  route(config, logits.data(), 1, static_cast<const float*>(nullptr), routing);
  EXPECT_EQ(routing.experts, (std::vector<int32_t>{7, 6}));
  config.topk_routing_group = 2;  // groups {6,7} and {2,3}
  route(config, logits.data(), 1, static_cast<const float*>(nullptr), routing);
  EXPECT_EQ(routing.experts, (std::vector<int32_t>{7, 2}));
}

TEST(RouterTest, TiesGoToTheLowerExpertAndWeightsRenormalise) {
  RouterConfig config;
  config.num_experts = 4;
  config.top_k = 2;
  config.routed_scaling_factor = 2.0;
  const std::vector<float> logits = {1.0f, 1.0f, 1.0f, 0.0f};
  Routing<float> routing;
  route(config, logits.data(), 1, static_cast<const float*>(nullptr), routing);
  EXPECT_EQ(routing.experts, (std::vector<int32_t>{0, 1}));
  EXPECT_FLOAT_EQ(routing.weights[0], 1.0f);
  EXPECT_FLOAT_EQ(routing.weights[1], 1.0f);
}

TEST(RouterTest, SelectionBiasChangesChoiceNotWeights) {
  RouterConfig config;
  config.num_experts = 3;
  config.top_k = 1;
  config.score_function = ScoreFunction::kSigmoid;
  config.selection_bias = true;
  config.normalize_top_k = false;
  const std::vector<float> logits = {1.0f, 0.0f, -1.0f};
  const std::vector<float> bias = {0.0f, 0.5f, 0.0f};
  Routing<float> routing;
  route(config, logits.data(), 1, bias.data(), routing);
  EXPECT_EQ(routing.experts[0], 1);
  EXPECT_FLOAT_EQ(routing.weights[0], 0.5f);  // sigmoid(0), no bias
}

TEST(RouterTest, LoadBalanceLossIsOneWhenPerfectlyBalanced) {
  RouterConfig config;
  config.num_experts = 2;
  config.top_k = 1;
  // Two tokens, uniform probabilities, one routed to each expert (tie -> 0
  // for the first; the second prefers expert 1).
  const std::vector<float> logits = {0.0f, 0.0f, -1e-7f, 0.0f};
  Routing<float> routing;
  route(config, logits.data(), 2, static_cast<const float*>(nullptr), routing);
  EXPECT_EQ(routing.counts, (std::vector<int32_t>{1, 1}));
  EXPECT_NEAR(routing.load_balance_loss, 1.0, 1e-6);
}

}  // namespace
}  // namespace raggemm::moe
