// A workspace lent to the public ops (raggemm/gmm_workspace.h,
// GmmOptions::workspace, TgmmOptions::workspace): every pass, kernel
// generation, storage type and quantized recipe takes its kernels' scratch
// from it instead of the calling thread's own buffers, with the same bits;
// release() gives the memory back; a workspace another call holds is refused
// before anything is written.
#include "raggemm/gmm_workspace.h"

#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <string>
#include <thread>

#include "backends/workspace.h"
#include "kernels/workspace.h"
#include "raggemm/error.h"
#include "raggemm/gmm.h"
#include "support/gmm_case.h"

namespace raggemm {
namespace {

using testing::random_tensor;
using testing::sizes_tensor;

// M = 97 rows in 5 groups (one empty, 7 rows past the last), K = 300, N = 70:
// no tile divides them.
constexpr int64_t kM = 97, kK = 300, kN = 70, kG = 5;

struct Call {
  Pass pass;
  KernelVersion kernel;
  DType dtype;
  std::optional<QuantRecipe> recipe;
};

std::string name_of(const Call& c) {
  return std::to_string(static_cast<int>(c.pass)) + "_" + kernel_name(c.kernel) + "_" +
         dtype_name(c.dtype) + "_" + (c.recipe ? quant_recipe_name(*c.recipe) : "plain");
}

// Runs `call` into a new output, lending `workspace` (null: none), on
// `threads` threads.
Tensor run(const Call& call, GmmWorkspace* workspace, int threads) {
  const Tensor sizes = sizes_tensor({30, 0, 41, 12, 7});
  const Tensor lhs = random_tensor({kM, kK}, call.dtype, 11);
  std::optional<QuantGmmOptions> quantize;
  if (call.recipe) quantize = QuantGmmOptions{*call.recipe, {}, 0};
  if (call.pass == Pass::kGradRhs) {
    const Tensor dout = random_tensor({kM, kN}, call.dtype, 12);
    TgmmOptions options;
    options.kernel = call.kernel;
    options.threads = threads;
    options.quantize = quantize;
    options.workspace = workspace;
    return tgmm(lhs, dout, sizes, options);
  }
  const bool dlhs = call.pass == Pass::kGradLhs;
  const Tensor rhs = random_tensor(dlhs ? Shape{kG, kN, kK} : Shape{kG, kK, kN}, call.dtype, 13);
  GmmOptions options;
  options.transpose_rhs = dlhs;
  options.kernel = call.kernel;
  options.threads = threads;
  options.quantize = quantize;
  options.workspace = workspace;
  return gmm(lhs, rhs, sizes, options);
}

// A copy of `t`'s bytes (Tensor copies share their storage).
Tensor copy_of(const Tensor& t) {
  Tensor copy(t.dtype(), t.shape());
  std::memcpy(copy.data(), t.data(), t.nbytes());
  return copy;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

std::vector<Call> calls() {
  std::vector<Call> all;
  for (Pass pass : {Pass::kForward, Pass::kGradLhs, Pass::kGradRhs}) {
    for (KernelVersion kernel : {KernelVersion::kV1, KernelVersion::kV2}) {
      all.push_back({pass, kernel, DType::kF32, std::nullopt});
      all.push_back({pass, kernel, DType::kBF16, std::nullopt});
    }
    for (QuantRecipe recipe : {QuantRecipe::kFp8, QuantRecipe::kInt8}) {
      all.push_back({pass, KernelVersion::kV2, DType::kF32, recipe});
    }
  }
  return all;
}

TEST(GmmWorkspace, EveryCallTakesItsScratchFromTheLentWorkspaceWithTheSameBits) {
  for (const Call& call : calls()) {
    for (int threads : {1, 2}) {
      SCOPED_TRACE(name_of(call) + " " + std::to_string(threads) + " threads");
      const Tensor own = run(call, nullptr, threads);
      GmmWorkspace workspace;
      Tensor lent;
      int64_t own_after = -1;
      // From a fresh thread, whose own buffers start empty: it runs part of
      // the call (worker 0) and must keep nothing of its own.
      std::thread caller([&] {
        lent = run(call, &workspace, threads);
        own_after = kernels::own_workspace_bytes();
      });
      caller.join();
      EXPECT_TRUE(same_bytes(own, lent));
      EXPECT_GT(workspace.bytes(), 0);
      EXPECT_EQ(own_after, 0);
      workspace.release();
      EXPECT_EQ(workspace.bytes(), 0);
    }
  }
}

TEST(GmmWorkspace, OneWorkspaceServesCallsOneAfterAnother) {
  GmmWorkspace workspace;
  const Call fwd{Pass::kForward, KernelVersion::kV2, DType::kF32, std::nullopt};
  const Call drhs{Pass::kGradRhs, KernelVersion::kV2, DType::kF32, std::nullopt};
  EXPECT_TRUE(same_bytes(run(fwd, &workspace, 2), run(fwd, nullptr, 2)));
  const int64_t after_one = workspace.bytes();
  EXPECT_TRUE(same_bytes(run(drhs, &workspace, 2), run(drhs, nullptr, 2)));
  EXPECT_TRUE(same_bytes(run(fwd, &workspace, 2), run(fwd, nullptr, 2)));
  EXPECT_GE(workspace.bytes(), after_one);  // reused and grown, never dropped by a call
}

TEST(GmmWorkspace, AWorkspaceHeldByAnotherCallIsRefusedAndNothingIsWritten) {
  const Tensor sizes = sizes_tensor({30, 0, 41, 12, 7});
  const Tensor lhs = random_tensor({kM, kK}, DType::kF32, 11);
  const Tensor rhs = random_tensor({kG, kK, kN}, DType::kF32, 13);
  const Tensor dout = random_tensor({kM, kN}, DType::kF32, 12);
  GmmWorkspace workspace;
  const backends::Workspace::InUse held(workspace.backend_workspace());  // another call's
  Tensor out(DType::kF32, {kM, kN});
  std::memset(out.data(), 0x7f, out.nbytes());
  const Tensor before = copy_of(out);
  GmmOptions options;
  options.kernel = KernelVersion::kV2;
  options.workspace = &workspace;
  try {
    gmm_into(lhs, rhs, sizes, out.view(), options);
    ADD_FAILURE() << "gmm_into took a workspace another call holds";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "workspace") << e.what();
  }
  EXPECT_TRUE(same_bytes(out, before));
  Tensor grad(DType::kF32, {kG, kK, kN});
  std::memset(grad.data(), 0x7f, grad.nbytes());
  const Tensor grad_before = copy_of(grad);
  TgmmOptions tgmm_options;
  tgmm_options.workspace = &workspace;
  try {
    tgmm_into(lhs, dout, sizes, grad.view(), tgmm_options);
    ADD_FAILURE() << "tgmm_into took a workspace another call holds";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "workspace") << e.what();
  }
  EXPECT_TRUE(same_bytes(grad, grad_before));
}

}  // namespace
}  // namespace raggemm
