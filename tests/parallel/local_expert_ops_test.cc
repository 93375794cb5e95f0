// gmm / tgmm with local experts (group_offset, local_groups) as expert
// parallelism runs them: each rank holds E/P experts; the union of the
// ranks' outputs must be the full op's, computed here by a naive f64 oracle.
#include <gtest/gtest.h>

#include <vector>

#include "parallel/mpi_test_env.h"
#include "raggemm/gmm.h"
#include "raggemm/moe.h"

namespace raggemm::testing {
namespace {

std::vector<float> random_floats(int64_t count, uint64_t seed) {
  moe::Param<float> p;
  p.reset("values", {count});
  moe::init_normal(p, seed, 1.0);
  return p.value;
}

// out[i] = lhs[i] @ rhs[g(i)] (or rhs[g(i)]^T), f64 accumulation; rows past
// the groups zero.
std::vector<float> oracle_gmm(const std::vector<float>& lhs, const std::vector<float>& rhs,
                              const std::vector<int32_t>& sizes, int64_t m, int64_t k, int64_t n,
                              bool transpose) {
  std::vector<float> out(static_cast<size_t>(m * n), 0.0f);
  int64_t row = 0;
  for (size_t g = 0; g < sizes.size(); ++g) {
    for (int32_t r = 0; r < sizes[g]; ++r, ++row) {
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t c = 0; c < k; ++c) {
          const float w = transpose ? rhs[(g * n + j) * k + c] : rhs[(g * k + c) * n + j];
          acc += static_cast<double>(lhs[row * k + c]) * w;
        }
        out[row * n + j] = static_cast<float>(acc);
      }
    }
  }
  return out;
}

// out[g] = lhs[rows g]^T @ dout[rows g], f64 accumulation.
std::vector<float> oracle_tgmm(const std::vector<float>& lhs, const std::vector<float>& dout,
                               const std::vector<int32_t>& sizes, int64_t k, int64_t n) {
  std::vector<float> out(sizes.size() * static_cast<size_t>(k * n), 0.0f);
  int64_t start = 0;
  for (size_t g = 0; g < sizes.size(); ++g) {
    for (int64_t c = 0; c < k; ++c) {
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t r = start; r < start + sizes[g]; ++r) {
          acc += static_cast<double>(lhs[r * k + c]) * dout[r * n + j];
        }
        out[(g * k + c) * n + j] = static_cast<float>(acc);
      }
    }
    start += sizes[g];
  }
  return out;
}

struct LocalCase {
  const char* name;
  std::vector<int32_t> sizes;  // G = 4 groups, 2 per rank
  int64_t m;
  KernelVersion kernel;
};

class LocalExpertOpsTest : public ::testing::TestWithParam<LocalCase> {};

TEST_P(LocalExpertOpsTest, UnionOfRanksMatchesTheFullOp) {
  const LocalCase& c = GetParam();
  const int ranks = world().size();
  const int64_t groups = static_cast<int64_t>(c.sizes.size());
  ASSERT_EQ(groups % ranks, 0);
  const int64_t local = groups / ranks, offset = world().rank() * local;
  const int64_t m = c.m, k = 24, n = 20;
  const std::vector<float> lhs = random_floats(m * k, 1), rhs = random_floats(groups * k * n, 2);
  const std::vector<float> dout = random_floats(m * n, 3);
  const TensorView sizes(DType::kI32, Shape{groups}, c.sizes.data());
  const std::vector<float> rhs_local(rhs.begin() + offset * k * n,
                                     rhs.begin() + (offset + local) * k * n);

  // gmm: this rank's rows only, zeros elsewhere; the sum over ranks is the op.
  GmmOptions options;
  options.kernel = c.kernel;
  options.group_offset = offset;
  options.local_groups = local;
  Tensor out = gmm(TensorView(DType::kF32, Shape{m, k}, lhs.data()),
                   TensorView(DType::kF32, Shape{local, k, n}, rhs_local.data()), sizes, options);
  std::vector<float> mine(out.as<float>(), out.as<float>() + m * n);
  int64_t begin = 0, end = 0;
  for (int64_t g = 0; g < offset + local; ++g) (g < offset ? begin : end) += c.sizes[g];
  end += begin;
  for (int64_t i = 0; i < m; ++i) {
    if (i >= begin && i < end) continue;
    for (int64_t j = 0; j < n; ++j) ASSERT_EQ(mine[i * n + j], 0.0f) << "row " << i;
  }
  world().allreduce_sum(mine.data(), m * n);
  EXPECT_LT(max_relative(mine, oracle_gmm(lhs, rhs, c.sizes, m, k, n, false)), 1e-5);

  // gmm with transposed rhs (the dlhs pass): dout [m, n] @ rhs[g]^T.
  options.transpose_rhs = true;
  Tensor dx = gmm(TensorView(DType::kF32, Shape{m, n}, dout.data()),
                  TensorView(DType::kF32, Shape{local, k, n}, rhs_local.data()), sizes, options);
  std::vector<float> dx_mine(dx.as<float>(), dx.as<float>() + m * k);
  world().allreduce_sum(dx_mine.data(), m * k);
  // rhs [G, K, N] read as [G, N_out = K, contracted = N].
  EXPECT_LT(max_relative(dx_mine, oracle_gmm(dout, rhs, c.sizes, m, n, k, true)), 1e-5);

  // tgmm: this rank's [E_local, K, N] slice of the full gradient.
  TgmmOptions t_options;
  t_options.kernel = c.kernel;
  t_options.group_offset = offset;
  t_options.local_groups = local;
  Tensor dw = tgmm(TensorView(DType::kF32, Shape{m, k}, lhs.data()),
                   TensorView(DType::kF32, Shape{m, n}, dout.data()), sizes, t_options);
  ASSERT_EQ(dw.shape(), (Shape{local, k, n}));
  const std::vector<float> full = oracle_tgmm(lhs, dout, c.sizes, k, n);
  const std::vector<float> expected(full.begin() + offset * k * n,
                                    full.begin() + (offset + local) * k * n);
  const std::vector<float> got(dw.as<float>(), dw.as<float>() + local * k * n);
  EXPECT_LT(max_relative(got, expected), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Groups, LocalExpertOpsTest,
    ::testing::Values(LocalCase{"mixed_v1", {5, 0, 7, 3}, 17, KernelVersion::kV1},
                      LocalCase{"mixed_v2", {5, 0, 7, 3}, 17, KernelVersion::kV2},
                      LocalCase{"second_rank_empty", {9, 6, 0, 0}, 15, KernelVersion::kV1},
                      LocalCase{"first_rank_empty_v2", {0, 0, 4, 11}, 16, KernelVersion::kV2},
                      LocalCase{"all_empty", {0, 0, 0, 0}, 5, KernelVersion::kV1}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace raggemm::testing
