// A caller's workspace lent to Backend::run (backends/workspace.h,
// kernels/workspace.h): the kernels' scratch goes there instead of the
// threads' own buffers, the results are the same bits, one call holds it at
// a time, and the tuner's candidates leave nothing in the caller's thread.
#include "backends/workspace.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "backends/registry.h"
#include "kernels/machine_model.h"
#include "kernels/parallel.h"
#include "kernels/workspace.h"
#include "raggemm/error.h"
#include "support/gmm_case.h"
#include "tune/autotune.h"

namespace raggemm {
namespace {

using testing::random_tensor;
using testing::sizes_tensor;

struct Problem {
  Tensor lhs, rhs, sizes, out;
  backends::GmmSpec spec;
};

// A pass on the CPU backend's inputs: M = 97 rows in 5 groups (one empty,
// 7 rows past the last group), K = 300, N = 70.
Problem make_problem(Pass pass, int threads) {
  Problem p;
  const int64_t m = 97, k = 300, n = 70, g = 5;
  p.lhs = random_tensor({m, k}, DType::kF32, 11);
  p.sizes = sizes_tensor({30, 0, 41, 12, 7});
  p.spec.pass = pass;
  if (pass == Pass::kGradRhs) {
    p.rhs = random_tensor({m, n}, DType::kF32, 12);
    p.out = Tensor(DType::kF32, {g, k, n});
  } else {
    p.rhs = random_tensor(pass == Pass::kGradLhs ? Shape{g, n, k} : Shape{g, k, n}, DType::kF32, 12);
    p.out = Tensor(DType::kF32, {m, n});
  }
  p.spec.lhs = p.lhs.view();
  p.spec.rhs = p.rhs.view();
  p.spec.group_sizes = p.sizes.view();
  p.spec.out = p.out.view();
  p.spec.threads = threads;
  backends::derive(p.spec);
  return p;
}

TuneCandidate config_of(const backends::Backend& backend, const backends::GmmSpec& spec,
                        KernelVersion kernel) {
  return backend.heuristic(spec.shape(), kernels::this_machine_model(), kernel);
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

TEST(BackendWorkspace, KernelsTakeTheirScratchFromTheLentWorkspaceAndGiveTheSameBits) {
  const backends::Backend& cpu = *backends::find_backend("cpu");
  for (Pass pass : {Pass::kForward, Pass::kGradLhs, Pass::kGradRhs}) {
    for (KernelVersion kernel : {KernelVersion::kV1, KernelVersion::kV2}) {
      for (int threads : {1, 2}) {
        SCOPED_TRACE(std::to_string(static_cast<int>(pass)) + " " + kernel_name(kernel) + " " +
                     std::to_string(threads) + " threads");
        Problem own = make_problem(pass, threads);
        Problem lent = make_problem(pass, threads);
        const TuneCandidate config = config_of(cpu, own.spec, kernel);
        cpu.run(own.spec, config, nullptr);
        // From a fresh thread, whose own buffers are empty: the calling
        // thread runs part of the call (worker 0) and must take nothing of
        // its own.
        backends::Workspace workspace;
        int64_t own_after = -1;
        std::thread caller([&] {
          cpu.run(lent.spec, config, &workspace);
          own_after = kernels::own_workspace_bytes();
        });
        caller.join();
        EXPECT_TRUE(same_bytes(own.out, lent.out));
        EXPECT_GT(workspace.bytes(), 0);
        EXPECT_EQ(own_after, 0);
        workspace.release();
        EXPECT_EQ(workspace.bytes(), 0);
      }
    }
  }
}

TEST(BackendWorkspace, EachWorkerOfATeamHasItsOwnSet) {
  kernels::Workspace buffers;
  std::vector<float*> seen(4, nullptr);
  {
    const kernels::WorkspaceBinding bound(&buffers, 0);
    kernels::parallel_items(std::vector<int64_t>(64, 1), 4, [&](int64_t) {
      float* mine = kernels::workspace(kernels::Slot::kPackedA, 100);
      seen[static_cast<size_t>(omp_get_thread_num())] = mine;
    });
  }
  EXPECT_EQ(kernels::bound_workspace(), nullptr);  // the binding ended with its scope
  EXPECT_GE(buffers.thread_sets(), 1);
  for (int t = 0; t < buffers.thread_sets(); ++t) {
    if (!seen[static_cast<size_t>(t)]) continue;  // a worker that took no item
    EXPECT_EQ(seen[static_cast<size_t>(t)], buffers.buffer(t, kernels::Slot::kPackedA, 100));
    for (int u = t + 1; u < buffers.thread_sets(); ++u) {
      if (seen[static_cast<size_t>(u)]) {
        EXPECT_NE(seen[static_cast<size_t>(t)], seen[static_cast<size_t>(u)]);
      }
    }
  }
}

TEST(BackendWorkspace, AWorkspaceHeldByACallIsRefusedOnEveryBackend) {
  for (const backends::Backend* backend : backends::registered_backends()) {
    SCOPED_TRACE(backend->name());
    Problem p = make_problem(Pass::kForward, 1);
    std::memset(p.out.data(), 0, p.out.nbytes());
    Tensor before = Tensor(DType::kF32, p.out.shape());
    backends::Workspace workspace;
    const backends::Workspace::InUse held(workspace);  // another call's
    try {
      backend->run(p.spec, config_of(*backend, p.spec, KernelVersion::kV2), &workspace);
      ADD_FAILURE() << "a held workspace was lent again";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("workspace"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(same_bytes(p.out, before));  // nothing written
  }
}

TEST(BackendWorkspace, TuningLeavesNoScratchInTheCallersThread) {
  GmmShape shape;
  shape.pass = Pass::kForward;
  shape.m = 600;
  shape.k = 700;
  shape.n = 500;
  shape.groups = 2;
  tune::TuneOptions options;
  options.threads = 1;
  options.budget_s = 2.0;
  tune::TuneResult result;
  int64_t own_after = -1;
  std::thread caller([&] {  // a fresh thread: its own buffers start empty
    result = tune::tune_problem(shape, options);
    own_after = kernels::own_workspace_bytes();
  });
  caller.join();
  EXPECT_GE(result.candidates_timed, 1);  // (a slow build may time only the baseline)
  EXPECT_EQ(own_after, 0);
}

}  // namespace
}  // namespace raggemm
