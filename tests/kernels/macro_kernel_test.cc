// The prefetch stream's pacing: how many lines per k step bring a region in
// over the steps a macro kernel call has.
#include "kernels/macro_kernel.h"

#include <gtest/gtest.h>

namespace raggemm::kernels {
namespace {

TEST(StreamLinesPerStep, BringsEveryLineInOverTheSteps) {
  // A 128-column chunk at kc = 256 (2048 lines) over one A panel's four
  // calls of 256 steps: two lines a step, not one.
  EXPECT_EQ(stream_lines_per_step(2048, 4 * 256), 2);
  EXPECT_EQ(stream_lines_per_step(1025, 1024), 2);  // rounded up: nothing left over
  EXPECT_EQ(stream_lines_per_step(1024, 1024), 1);
  EXPECT_EQ(stream_lines_per_step(10, 1000), 1);    // at least one while any is left
  for (int64_t lines : {1, 7, 300, 4096, 100000}) {
    for (int64_t steps : {1, 3, 256, 5000}) {
      const int per_step = stream_lines_per_step(lines, steps);
      EXPECT_GE(per_step * steps, lines) << lines << " lines over " << steps << " steps";
      EXPECT_LT((per_step - 1) * steps, lines) << lines << " lines over " << steps << " steps";
    }
  }
}

TEST(StreamLinesPerStep, NothingToStreamOrNoSteps) {
  EXPECT_EQ(stream_lines_per_step(0, 1024), 0);
  EXPECT_EQ(stream_lines_per_step(2048, 0), 0);
}

}  // namespace
}  // namespace raggemm::kernels
