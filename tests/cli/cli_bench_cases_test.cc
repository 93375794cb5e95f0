// `raggemm bench --cases`: the case table timed through the CLI. One JSON
// object with an entry per case (times positive and finite, the reference
// check passed), the same object in --json-file, refusals listed with the
// op's error, and a filter that matches nothing is an error naming --cases.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/cli_harness.h"

namespace raggemm::testing {
namespace {

TEST(CliBenchCases, TimesAndChecksTheFilteredCases) {
  TempDir dir;
  const std::string file = (dir.path() / "cases.json").string();
  CliResult result =
      run_cli(dir, {"bench", "--cases", "fwd/f32/v2,/none/empty:0.4/", "--case-scale", "1", "--reps",
                    "1", "--threads", "1", "--check", "--json", "--json-file", file});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const nlohmann::json j = nlohmann::json::parse(result.out);
  EXPECT_EQ(j.at("scale"), 1);
  EXPECT_EQ(j.at("check_failures"), 0);
  ASSERT_GE(j.at("count").get<int>(), 2) << "every runnable ISA target";
  for (const nlohmann::json& c : j.at("cases")) {
    EXPECT_EQ(c.at("status"), "ran") << c.dump();
    EXPECT_NE(c.at("id").get<std::string>().find("fwd/f32/v2/"), std::string::npos);
    EXPECT_TRUE(std::isfinite(c.at("median_ms").get<double>()) && c.at("median_ms") > 0);
    EXPECT_GT(c.at("gflops").get<double>(), 0);
    EXPECT_TRUE(c.at("check_ok").get<bool>()) << c.dump();
    EXPECT_EQ(c.at("path").get<std::string>().rfind("f32:", 0), 0u) << c.dump();
  }
  EXPECT_EQ(nlohmann::json::parse(read_text(file)).at("count"), j.at("count"));
}

TEST(CliBenchCases, ListsRefusalsWithTheOpsError) {
  TempDir dir;
  CliResult result =
      run_cli(dir, {"bench", "--cases", "/v1/,/swiglu/", "--list-cases", "--json"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const nlohmann::json j = nlohmann::json::parse(result.out);
  ASSERT_GT(j.at("count").get<int>(), 0);
  for (const nlohmann::json& c : j.at("cases")) {
    EXPECT_EQ(c.at("status"), "refused") << c.dump();
    EXPECT_NE(c.at("error").get<std::string>().find("kernel=v1"), std::string::npos) << c.dump();
    EXPECT_FALSE(c.contains("median_ms"));
  }
}

TEST(CliBenchCases, FilterMatchingNothingNamesTheFlag) {
  TempDir dir;
  CliResult result = run_cli(dir, {"bench", "--cases", "no-such-case"});
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.err.find("--cases=no-such-case"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace raggemm::testing
