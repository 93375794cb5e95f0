// The diagnostics sink: warnings kept while no sink is installed, delivered
// to the sink once one is, the previous sink returned, and reports from many
// threads neither lost nor torn.
#include "raggemm/diagnostics.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace raggemm {
namespace {

// Restores "no sink" and an empty backlog around each test.
class DiagnosticsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    set_diagnostic_sink(nullptr);
    take_diagnostics();
  }
  void TearDown() override {
    set_diagnostic_sink(nullptr);
    take_diagnostics();
  }
};

TEST_F(DiagnosticsTest, KeptUntilTakenWithoutASink) {
  report_warning("a", "first");
  report_warning("b", "second");
  const std::vector<Diagnostic> kept = take_diagnostics();
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0].source, "a");
  EXPECT_EQ(kept[0].text, "first");
  EXPECT_EQ(kept[1].source, "b");
  EXPECT_TRUE(take_diagnostics().empty());
}

TEST_F(DiagnosticsTest, BacklogIsBoundedKeepingTheNewest) {
  for (size_t i = 0; i < kMaxPendingDiagnostics + 10; ++i) report_warning("s", std::to_string(i));
  const std::vector<Diagnostic> kept = take_diagnostics();
  ASSERT_EQ(kept.size(), kMaxPendingDiagnostics);
  EXPECT_EQ(kept.front().text, "10");
  EXPECT_EQ(kept.back().text, std::to_string(kMaxPendingDiagnostics + 9));
}

TEST_F(DiagnosticsTest, SinkGetsTheBacklogThenEveryReport) {
  report_warning("early", "before the sink");
  std::vector<std::string> seen;
  EXPECT_FALSE(set_diagnostic_sink([&](const Diagnostic& d) { seen.push_back(d.source + ":" + d.text); }));
  report_warning("late", "after");
  EXPECT_EQ(seen, (std::vector<std::string>{"early:before the sink", "late:after"}));
  EXPECT_TRUE(take_diagnostics().empty());
  // Swapping returns the previous sink, which still works.
  DiagnosticSink previous = set_diagnostic_sink(nullptr);
  ASSERT_TRUE(previous);
  previous(Diagnostic{"x", "y"});
  EXPECT_EQ(seen.back(), "x:y");
}

TEST_F(DiagnosticsTest, ASinkMayReportItself) {
  int depth = 0;
  std::vector<std::string> seen;
  set_diagnostic_sink([&](const Diagnostic& d) {
    seen.push_back(d.text);
    if (depth++ == 0) report_warning("sink", "nested");  // would deadlock under the lock
  });
  report_warning("outer", "outer");
  EXPECT_EQ(seen, (std::vector<std::string>{"outer", "nested"}));
}

TEST_F(DiagnosticsTest, ManyThreadsLoseNothing) {
  std::mutex mutex;
  std::set<std::string> seen;
  set_diagnostic_sink([&](const Diagnostic& d) {
    std::lock_guard<std::mutex> lock(mutex);
    seen.insert(d.source + "/" + d.text);
  });
  constexpr int kThreads = 8, kEach = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < kEach; ++i) report_warning("t" + std::to_string(t), std::to_string(i));
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(seen.size(), size_t{kThreads} * kEach);
}

}  // namespace
}  // namespace raggemm
