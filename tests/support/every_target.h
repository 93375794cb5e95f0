// Shared test support: fn() once for every Highway target this machine can
// run (the microkernels' targets, kernels/microkernel.h), each forced in turn
// with a trace naming it; at least two must run (the best one and a
// baseline), and a fatal failure stops the walk.
#pragma once

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cstdint>

#include "kernels/microkernel.h"

namespace raggemm::testing {

template <class Fn>
void on_every_target(Fn fn) {
  const int64_t targets = kernels::microkernel_targets();
  int tested = 0;
  for (int64_t bit = 1; bit != 0 && bit <= targets; bit <<= 1) {
    if (!(targets & bit)) continue;
    hwy::SetSupportedTargetsForTest(bit);
    SCOPED_TRACE(kernels::target_name(bit));
    fn();
    ++tested;
    if (::testing::Test::HasFatalFailure()) break;
  }
  hwy::SetSupportedTargetsForTest(0);
  EXPECT_GE(tested, 2);
}

}  // namespace raggemm::testing
