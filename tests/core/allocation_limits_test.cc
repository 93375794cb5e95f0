// Size checks before allocation: overflowing products and tensors above the
// byte limit are refused naming the keys; what fits passes.
#include "raggemm/allocation_limits.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "raggemm/error.h"

namespace raggemm {
namespace {

struct SizeCase {
  std::string name;
  std::vector<SizeFactor> factors;
  int64_t limit;
  std::string argument;  // "" = accepted
  std::string message_part;
};

class AllocationLimitTest : public ::testing::TestWithParam<SizeCase> {};

TEST_P(AllocationLimitTest, RefusesNamingTheKeys) {
  const SizeCase& c = GetParam();
  if (c.argument.empty()) {
    EXPECT_NO_THROW(require_allocatable("x", c.factors, 4, c.limit));
    return;
  }
  try {
    require_allocatable("the thing", c.factors, 4, c.limit);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), c.argument) << e.what();
    EXPECT_NE(std::string(e.what()).find(c.message_part), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("the thing"), std::string::npos) << e.what();
  }
}

const int64_t kBig = int64_t{1} << 40;

INSTANTIATE_TEST_SUITE_P(
    Cases, AllocationLimitTest,
    ::testing::Values(
        SizeCase{"fits", {{"a", 1024}, {"b", 1024}}, int64_t{1} << 30, "", ""},
        SizeCase{"exactly_the_limit", {{"a", 256}}, 1024, "", ""},
        SizeCase{"one_byte_over", {{"a", 257}}, 1024, "a", "more than the 1.0 KiB"},
        SizeCase{"above_limit", {{"a", 1 << 20}, {"b", 1 << 20}}, int64_t{1} << 30, "a,b",
                 "needs 4.0 TiB"},
        SizeCase{"overflow", {{"a", kBig}, {"b", kBig}}, 0, "a,b", "overflows int64"},
        SizeCase{"overflow_by_element_size", {{"a", int64_t{1} << 62}}, 0, "a", "overflows"},
        SizeCase{"constant_not_named", {{"a", kBig}, {"", 2}, {"b", kBig}}, 0, "a,b", "a * 2 * b"},
        SizeCase{"negative", {{"a", -1}}, 0, "a", ">= 0"},
        SizeCase{"no_limit_when_unknown", {{"a", kBig}}, 0, "", ""}),
    [](const auto& info) { return info.param.name; });

TEST(AllocationLimitTest, PhysicalMemoryIsReadFromTheMachine) {
  const int64_t bytes = physical_memory_bytes();
  EXPECT_GT(bytes, int64_t{1} << 26);  // any machine that builds this has more than 64 MiB
  // The default limit is that memory.
  EXPECT_THROW(require_allocatable("x", {{"a", bytes / 4 + 1}}, 4), Error);
  EXPECT_NO_THROW(require_allocatable("x", {{"a", bytes / 8}}, 4));
}

}  // namespace
}  // namespace raggemm
