// The equivalence suite in CI, one process: the P=1 cases of the pairwise
// covering subset (every value of every axis, every pair of values of two
// axes) against the dense f32 reference; each case asserts its leaf bounds,
// the quantized lower bound and what ran for every pass of every weight.
// The P=2 cases of the same subset run under mpirun in
// tests/parallel/equivalence_p2_test.cc; the whole matrix is
// `raggemm equivalence --all`.
#include "train/equivalence.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "moe/moe_test_util.h"

namespace raggemm::train {

// gtest prints a failing case by its name.
void PrintTo(const EquivalenceCase& c, std::ostream* os) { *os << c.name(); }

namespace {

using moe::testing::kSanitized;

std::vector<EquivalenceCase> one_process_cases() {
  std::vector<EquivalenceCase> out;
  for (const EquivalenceCase& c : pairwise_equivalence_cases()) {
    if (c.ranks() == 1) out.push_back(c);
  }
  return out;
}

TEST(EquivalenceMatrix, PairwiseSubsetCoversEveryPairOfAxisValues) {
  const std::vector<EquivalenceCase> all = all_equivalence_cases();
  const std::vector<EquivalenceCase> subset = pairwise_equivalence_cases();
  auto axes = [](const EquivalenceCase& c) {
    return std::vector<std::string>{c.kernels, c.dtype, c.quant, c.parallel, c.shape};
  };
  std::set<std::string> wanted, covered;
  for (const auto& [cases, into] : {std::pair{&all, &wanted}, std::pair{&subset, &covered}}) {
    for (const EquivalenceCase& c : *cases) {
      const auto v = axes(c);
      for (size_t a = 0; a < v.size(); ++a)
        for (size_t b = a + 1; b < v.size(); ++b)
          into->insert(std::to_string(a) + v[a] + "|" + std::to_string(b) + v[b]);
    }
  }
  EXPECT_EQ(covered, wanted);
  EXPECT_EQ(all.size(),
            3u * 3u * (8u * 2u * 3u + 2u * 2u));  // block scales on v22x only
  EXPECT_LT(subset.size(), all.size() / 4);
  std::printf("pairwise subset: %zu of %zu cases\n", subset.size(), all.size());
}

class EquivalenceTest : public ::testing::TestWithParam<EquivalenceCase> {};

TEST_P(EquivalenceTest, MatchesTheDenseReferenceAndRanWhatWasAsked) {
  const EquivalenceCase& c = GetParam();
  if (kSanitized && c.shape == "mixtral_like")
    GTEST_SKIP() << "the mixtral-like shape is skipped under sanitizers (small covers the code)";
  const EquivalenceResult r = run_equivalence(c, nullptr);
  std::printf("%s\n", equivalence_row(r).c_str());
  EXPECT_TRUE(r.passed()) << equivalence_row(r);
  EXPECT_FALSE(r.ran.empty());
}

INSTANTIATE_TEST_SUITE_P(Pairwise, EquivalenceTest, ::testing::ValuesIn(one_process_cases()),
                         [](const auto& info) { return info.param.name(); });

}  // namespace
}  // namespace raggemm::train
