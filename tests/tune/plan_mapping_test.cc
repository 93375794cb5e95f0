// The model-dim -> kernel tile table of DESIGN.md s.2, case by case. Every
// (weight, pass) pair gets three tile values of its own, distinct from all
// others, so a swapped axis (the peer's dlhs k/n bug) or a pair reading
// another pair's settings cannot hide.
#include <gtest/gtest.h>

#include <string>

#include "raggemm/error.h"
#include "raggemm/moe_plan.h"

namespace raggemm {
namespace {

struct MappingCase {
  Weight weight;
  Pass pass;
  // Tiles set in model dims, then the kernel (m, k, n) DESIGN.md expects.
  int64_t batch_seq, embed_dim, mlp_dim;
  Tiles expected;
};

// Written out from the DESIGN.md table, not computed.
const MappingCase kCases[] = {
    {Weight::kWi, Pass::kForward, 11, 12, 13, {11, 12, 13}},  // (batch_seq, embed, mlp)
    {Weight::kWi, Pass::kGradLhs, 21, 22, 23, {21, 23, 22}},  // (batch_seq, mlp, embed)
    {Weight::kWi, Pass::kGradRhs, 31, 32, 33, {32, 31, 33}},  // (embed, batch_seq, mlp)
    {Weight::kWo, Pass::kForward, 41, 42, 43, {41, 43, 42}},  // (batch_seq, mlp, embed)
    {Weight::kWo, Pass::kGradLhs, 51, 52, 53, {51, 52, 53}},  // (batch_seq, embed, mlp)
    {Weight::kWo, Pass::kGradRhs, 61, 62, 63, {63, 61, 62}},  // (mlp, batch_seq, embed)
};

std::string key(const MappingCase& c, const char* dim) {
  return std::string(weight_name(c.weight)) + "_tile_" + pass_name(c.pass) + "_" + dim;
}

TEST(PlanMapping, EveryPairMapsItsOwnTilesPerTheTable) {
  // All six pairs are set in one plan, through the config keys.
  std::vector<std::string> settings;
  for (const MappingCase& c : kCases) {
    settings.push_back(key(c, "batch_seq") + "=" + std::to_string(c.batch_seq));
    settings.push_back(key(c, "embed_dim") + "=" + std::to_string(c.embed_dim));
    settings.push_back(key(c, "mlp_dim") + "=" + std::to_string(c.mlp_dim));
  }
  const BlockPlan plan = parse_plan_settings(settings);
  for (const MappingCase& c : kCases) {
    SCOPED_TRACE(key(c, "*"));
    const ModelTiles& tiles = plan.weight(c.weight).pass(c.pass).tiles;
    EXPECT_EQ(to_kernel_tiles(c.weight, c.pass, tiles), c.expected);
  }
}

TEST(PlanMapping, ExtentsFollowTheSameTable) {
  const ModelDims dims{4096, 1024, 768};
  const Tiles expected[2][3] = {
      {{4096, 1024, 768}, {4096, 768, 1024}, {1024, 4096, 768}},
      {{4096, 768, 1024}, {4096, 1024, 768}, {768, 4096, 1024}},
  };
  for (Weight weight : kAllWeights) {
    for (Pass pass : kAllPasses) {
      SCOPED_TRACE(std::string(weight_name(weight)) + " " + pass_name(pass));
      EXPECT_EQ(kernel_extents(weight, pass, dims),
                expected[static_cast<int>(weight)][static_cast<int>(pass)]);
    }
  }
}

TEST(PlanMapping, BlockPassShapeGivesTheOpShapes) {
  // Op terms: lhs [M, K]; fwd rhs [G, K, N]; dlhs rhs [G, N, K]; drhs out [G, K, N].
  struct OpCase {
    Weight weight;
    Pass pass;
    int64_t k, n;
  };
  const OpCase cases[] = {
      {Weight::kWi, Pass::kForward, 1024, 768},  // x[M,E] @ wi[E,F]
      {Weight::kWi, Pass::kGradLhs, 768, 1024},  // dh[M,F] @ wi[E,F]^T
      {Weight::kWi, Pass::kGradRhs, 1024, 768},  // x^T dh -> [E,F]
      {Weight::kWo, Pass::kForward, 768, 1024},  // h[M,F] @ wo[F,E]
      {Weight::kWo, Pass::kGradLhs, 1024, 768},  // dy[M,E] @ wo[F,E]^T
      {Weight::kWo, Pass::kGradRhs, 768, 1024},  // h^T dy -> [F,E]
  };
  const ModelDims dims{4096, 1024, 768};
  for (const OpCase& c : cases) {
    SCOPED_TRACE(std::string(weight_name(c.weight)) + " " + pass_name(c.pass));
    const GmmShape shape = block_pass_shape(c.weight, c.pass, dims, 8);
    EXPECT_EQ(shape.pass, c.pass);
    EXPECT_EQ(shape.m, 4096);
    EXPECT_EQ(shape.k, c.k);
    EXPECT_EQ(shape.n, c.n);
    EXPECT_EQ(shape.groups, 8);
    // Round trip: the op shape's kernel extents are the block's.
    EXPECT_EQ(kernel_extents(shape), kernel_extents(c.weight, c.pass, dims));
  }
}

TEST(PlanMapping, NamesRoundTrip) {
  for (Weight weight : kAllWeights) EXPECT_EQ(parse_weight(weight_name(weight), "weight"), weight);
  for (Pass pass : kAllPasses) EXPECT_EQ(parse_pass(pass_name(pass), "pass"), pass);
  EXPECT_THROW(parse_weight("w1", "weight"), Error);
  EXPECT_THROW(parse_pass("bwd", "pass"), Error);
  EXPECT_STREQ(pass_op_name(Pass::kGradLhs), "gmm");
  EXPECT_STREQ(pass_op_name(Pass::kGradRhs), "tgmm");
}

}  // namespace
}  // namespace raggemm
