// The single-process Communicator: every collective is a copy at P = 1, and
// a layer given it runs exactly as a layer given none (no MPI, no mpirun).
#include <gtest/gtest.h>

#include <vector>

#include "moe_test_util.h"
#include "raggemm/comm.h"
#include "raggemm/error.h"
#include "raggemm/moe.h"

namespace raggemm::moe {
namespace {

TEST(SingleProcessCommunicator, CollectivesCopyOrLeaveAlone) {
  SingleProcessCommunicator comm;
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.size(), 1);
  const std::vector<float> rows = {1, 2, 3, 4, 5, 6};  // 3 rows of 2
  const int64_t three = 3;
  std::vector<float> out(6, 0.0f);
  comm.alltoallv_rows(rows.data(), &three, out.data(), &three, 2, CommType::kF32);
  EXPECT_EQ(out, rows);
  std::fill(out.begin(), out.end(), 0.0f);
  comm.allgatherv_rows(rows.data(), 3, out.data(), &three, 2, CommType::kF32);
  EXPECT_EQ(out, rows);
  std::fill(out.begin(), out.end(), 0.0f);
  comm.reduce_scatter_rows(rows.data(), out.data(), &three, 2, CommType::kF32);
  EXPECT_EQ(out, rows);
  std::vector<double> sums = {1.5, -2};
  comm.allreduce_sum(sums.data(), 2);
  EXPECT_EQ(sums, (std::vector<double>{1.5, -2}));
  comm.barrier();
  EXPECT_GE(comm.seconds(), 0.0);
}

TEST(SingleProcessCommunicator, RejectsInconsistentCounts) {
  SingleProcessCommunicator comm;
  const std::vector<float> rows(4, 1.0f);
  std::vector<float> out(4);
  const int64_t two = 2, one = 1, negative = -1;
  EXPECT_THROW(comm.alltoallv_rows(rows.data(), &two, out.data(), &one, 2, CommType::kF32), Error);
  EXPECT_THROW(comm.allgatherv_rows(rows.data(), 2, out.data(), &one, 2, CommType::kF32), Error);
  EXPECT_THROW(comm.reduce_scatter_rows(rows.data(), out.data(), &negative, 2, CommType::kF32),
               Error);
  EXPECT_THROW(comm.alltoallv_rows(rows.data(), &two, out.data(), &two, 0, CommType::kF32), Error);
}

TEST(SingleProcessCommunicator, LayerRunsAsWithoutOne) {
  MoeConfig config;
  config.embed_dim = 16;
  config.mlp_dim = 8;
  config.router.num_experts = 4;
  config.router.top_k = 2;
  config.router.load_balance_loss_weight = 0.01;
  config.use_ring_of_experts = true;  // ignored at P = 1
  SingleProcessCommunicator comm;
  MoeLayer<float> plain("moe", config), with_comm("moe", config, nullptr, &comm);
  plain.init(1);
  with_comm.init(1);
  const int64_t tokens = 9;
  const auto x = testing::cast_values<float>(testing::random_values(tokens * 16, 2));
  const auto dout = testing::cast_values<float>(testing::random_values(tokens * 16, 3));
  std::vector<float> out_a(x.size()), out_b(x.size()), dx_a(x.size(), 0), dx_b(x.size(), 0);
  plain.forward(x.data(), tokens, out_a.data());
  with_comm.forward(x.data(), tokens, out_b.data());
  plain.backward(dout.data(), dx_a.data());
  with_comm.backward(dout.data(), dx_b.data());
  EXPECT_EQ(out_a, out_b);
  EXPECT_EQ(dx_a, dx_b);
  for (size_t i = 0; i < plain.params().size(); ++i) {
    EXPECT_EQ(plain.params()[i]->grad, with_comm.params()[i]->grad);
    EXPECT_FALSE(with_comm.params()[i]->expert_sharded);
  }
  EXPECT_EQ(comm.seconds(), 0.0) << "no collective runs at P = 1";
}

}  // namespace
}  // namespace raggemm::moe

namespace raggemm {
namespace {

// Nothing below cli/ prints or exits: one process's abort throws the message
// back to the program (which presents it), and writes nothing itself.
TEST(SingleProcessCommunicator, AbortThrowsTheMessageAndPrintsNothing) {
  SingleProcessCommunicator comm;
  testing::internal::CaptureStderr();
  testing::internal::CaptureStdout();
  try {
    comm.abort("rank failure");
    ADD_FAILURE() << "abort returned";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "rank failure");
  }
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "");
  EXPECT_EQ(comm.job_rank(), 0);
  EXPECT_EQ(comm.job_size(), 1);
}

}  // namespace
}  // namespace raggemm
