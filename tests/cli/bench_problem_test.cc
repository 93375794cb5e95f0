// The benchmark's group-size distributions: every draw sums to M, is the
// same on every run, and has the shape its name promises (uniform near M/G,
// zipf skewed by rank, empty:F with round(F*G) empty groups); and the --dist
// parser accepts exactly uniform, zipf:S and empty:F.
#include "cli/bench_problem.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "raggemm/error.h"

namespace raggemm::bench {
namespace {

struct DrawCase {
  int64_t rows;
  int64_t groups;
  std::string dist;
};

std::ostream& operator<<(std::ostream& out, const DrawCase& c) {
  return out << c.rows << "x" << c.groups << "_" << c.dist;
}

class DrawGroupSizesTest : public ::testing::TestWithParam<DrawCase> {};

TEST_P(DrawGroupSizesTest, SumsToRowsAndIsDeterministic) {
  const DrawCase& c = GetParam();
  const GroupDist dist = parse_group_dist(c.dist, "--dist");
  std::vector<int32_t> sizes = draw_group_sizes(c.rows, c.groups, dist);
  ASSERT_EQ(static_cast<int64_t>(sizes.size()), c.groups);
  EXPECT_EQ(std::accumulate(sizes.begin(), sizes.end(), int64_t{0}), c.rows);
  EXPECT_TRUE(std::all_of(sizes.begin(), sizes.end(), [](int32_t s) { return s >= 0; }));
  EXPECT_EQ(draw_group_sizes(c.rows, c.groups, dist), sizes);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, DrawGroupSizesTest,
    ::testing::Values(DrawCase{4096, 8, "uniform"}, DrawCase{4096, 128, "uniform"},
                      DrawCase{1, 7, "uniform"}, DrawCase{0, 3, "uniform"},
                      DrawCase{4096, 32, "zipf:1.2"}, DrawCase{4096, 128, "zipf:1.2"},
                      DrawCase{10, 128, "zipf:2"}, DrawCase{4096, 5, "zipf:0"},
                      DrawCase{4096, 1, "zipf:3"}, DrawCase{4096, 8, "empty:0.25"},
                      DrawCase{4096, 128, "empty:0.25"}, DrawCase{4096, 1, "empty:0.9"},
                      DrawCase{5, 4, "empty:0.5"}, DrawCase{4096, 10, "empty:0"}));

TEST(DrawGroupSizes, UniformStaysNearTheMean) {
  std::vector<int32_t> sizes = draw_group_sizes(4096, 8, parse_group_dist("uniform", "d"));
  for (int32_t s : sizes) EXPECT_NEAR(s, 512, 120);  // > 5 sigma of a multinomial
}

TEST(DrawGroupSizes, ZipfFollowsRankWeights) {
  const double exponent = 1.2;
  std::vector<int32_t> sizes = draw_group_sizes(4096, 32, parse_group_dist("zipf:1.2", "d"));
  std::vector<int32_t> by_rank = sizes;
  std::sort(by_rank.rbegin(), by_rank.rend());
  double harmonic = 0;
  for (int r = 1; r <= 32; ++r) harmonic += std::pow(r, -exponent);
  for (int r = 0; r < 32; ++r) {
    EXPECT_NEAR(by_rank[r], 4096 * std::pow(r + 1, -exponent) / harmonic, 1.0) << "rank " << r;
  }
  EXPECT_NE(sizes, by_rank) << "ranks should be shuffled over the groups";
}

TEST(DrawGroupSizes, ZipfZeroIsAnEvenSplit) {
  std::vector<int32_t> sizes = draw_group_sizes(4099, 4, parse_group_dist("zipf:0", "d"));
  for (int32_t s : sizes) EXPECT_TRUE(s == 1024 || s == 1025) << s;
}

struct EmptyCase {
  int64_t groups;
  std::string dist;
  int64_t expected_empty;
};

class EmptyFractionTest : public ::testing::TestWithParam<EmptyCase> {};

TEST_P(EmptyFractionTest, EmptiesRoundedShareOfGroups) {
  const EmptyCase& c = GetParam();
  std::vector<int32_t> sizes = draw_group_sizes(4096, c.groups, parse_group_dist(c.dist, "d"));
  EXPECT_EQ(std::count(sizes.begin(), sizes.end(), 0), c.expected_empty);
}

INSTANTIATE_TEST_SUITE_P(Cases, EmptyFractionTest,
                         ::testing::Values(EmptyCase{8, "empty:0.25", 2},
                                           EmptyCase{32, "empty:0.25", 8},
                                           EmptyCase{128, "empty:0.25", 32},
                                           EmptyCase{4, "empty:0.99", 3},  // at most G-1
                                           EmptyCase{1, "empty:0.5", 0},
                                           EmptyCase{10, "empty:0", 0}));

TEST(ParseGroupDist, AcceptsTheThreeForms) {
  EXPECT_EQ(parse_group_dist("uniform", "d").kind, GroupDist::Kind::kUniform);
  GroupDist zipf = parse_group_dist("zipf:1.2", "d");
  EXPECT_EQ(zipf.kind, GroupDist::Kind::kZipf);
  EXPECT_DOUBLE_EQ(zipf.param, 1.2);
  GroupDist empty = parse_group_dist("empty:0.25", "d");
  EXPECT_EQ(empty.kind, GroupDist::Kind::kEmpty);
  EXPECT_DOUBLE_EQ(empty.param, 0.25);
  EXPECT_EQ(empty.text, "empty:0.25");
}

TEST(ParseGroupDist, RejectsEverythingElseNamingTheArgument) {
  for (const char* text : {"", "Uniform", "zipf", "zipf:", "zipf:x", "zipf:-0.5", "zipf:1e9",
                           "zipf:nan", "empty:1", "empty:-0.1", "empty:0.5x", "normal"}) {
    try {
      parse_group_dist(text, "--dist");
      ADD_FAILURE() << "accepted " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.argument(), "--dist");
      EXPECT_EQ(e.value(), text);
    }
  }
}

TEST(BenchShapes, FollowThePassTable) {
  BenchShapes gmm = bench_shapes(BenchOp::kGmm, 10, 3, 5, 2);
  EXPECT_EQ(gmm.a, (Shape{10, 3}));
  EXPECT_EQ(gmm.b, (Shape{2, 3, 5}));
  EXPECT_EQ(gmm.out, (Shape{10, 5}));
  BenchShapes dlhs = bench_shapes(BenchOp::kDlhs, 10, 3, 5, 2);
  EXPECT_EQ(dlhs.a, (Shape{10, 5}));
  EXPECT_EQ(dlhs.b, (Shape{2, 3, 5}));
  EXPECT_EQ(dlhs.out, (Shape{10, 3}));
  BenchShapes tgmm = bench_shapes(BenchOp::kTgmm, 10, 3, 5, 2);
  EXPECT_EQ(tgmm.a, (Shape{10, 3}));
  EXPECT_EQ(tgmm.b, (Shape{10, 5}));
  EXPECT_EQ(tgmm.out, (Shape{2, 3, 5}));
  EXPECT_EQ(parse_bench_op("dlhs", "op"), BenchOp::kDlhs);
  EXPECT_THROW(parse_bench_op("drhs", "op"), Error);
}

}  // namespace
}  // namespace raggemm::bench
