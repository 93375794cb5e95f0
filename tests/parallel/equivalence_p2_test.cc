// The equivalence suite's P=2 cases (all-to-all and ring of experts) of the
// pairwise subset, under mpirun -np 2, against the dense one-process f32
// reference (see tests/train/equivalence_test.cc).
#include <gtest/gtest.h>

#include <cstdio>
#include <ostream>
#include <vector>

#include "parallel/mpi_test_env.h"
#include "train/equivalence.h"

namespace raggemm::train {
// gtest prints a failing case by its name.
inline void PrintTo(const EquivalenceCase& c, std::ostream* os) { *os << c.name(); }
}  // namespace raggemm::train

namespace raggemm::testing {
namespace {

std::vector<train::EquivalenceCase> two_process_cases() {
  std::vector<train::EquivalenceCase> out;
  for (const train::EquivalenceCase& c : train::pairwise_equivalence_cases()) {
    if (c.ranks() == 2) out.push_back(c);
  }
  return out;
}

class EquivalenceP2Test : public ::testing::TestWithParam<train::EquivalenceCase> {};

TEST_P(EquivalenceP2Test, MatchesTheDenseReferenceAndRanWhatWasAsked) {
#if defined(__SANITIZE_ADDRESS__)
  if (GetParam().shape == "mixtral_like")
    GTEST_SKIP() << "the mixtral-like shape is skipped under sanitizers (small covers the code)";
#endif
  const train::EquivalenceResult r = train::run_equivalence(GetParam(), &world());
  if (world().rank() == 0) std::printf("%s\n", train::equivalence_row(r).c_str());
  EXPECT_TRUE(r.passed()) << train::equivalence_row(r);
}

INSTANTIATE_TEST_SUITE_P(Pairwise, EquivalenceP2Test, ::testing::ValuesIn(two_process_cases()),
                         [](const auto& info) { return info.param.name(); });

}  // namespace
}  // namespace raggemm::testing
