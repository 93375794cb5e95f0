// Where a small f32 item's B chunks are packed (kernels/b_packing_choice.h):
// both ways give the same bits on every target, right against a plain loop,
// and the measured choice is the rule's and asked once.
#include "kernels/b_packing_choice.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/f32_gmm_policy.h"
#include "kernels/machine_model.h"
#include "support/every_target.h"

namespace raggemm::kernels {
namespace {

struct SmallGroups {
  int64_t m, k, n;
  std::vector<int64_t> sizes;  // may sum to less than m, may hold empty groups
  Tiles tiles;
};

// out of gmm_v2_f32 on a plain f32 [K,N] weight, B packed either way.
std::vector<float> run(const SmallGroups& c, const std::vector<float>& lhs,
                       const std::vector<float>& rhs, bool in_microkernel) {
  std::vector<int64_t> starts{0};
  for (int64_t s : c.sizes) starts.push_back(starts.back() + s);
  std::vector<float> out(static_cast<size_t>(c.m * c.n), -1.0f);
  GmmProblem p;
  p.lhs = {lhs.data(), DType::kF32, c.k};
  p.rhs = {{rhs.data(), DType::kF32, c.n}, c.k * c.n, 0};
  p.m = c.m;
  p.k = c.k;
  p.n = c.n;
  p.starts = starts.data();
  p.num_groups = p.local_groups = static_cast<int64_t>(c.sizes.size());
  p.out = out.data();
  Schedule s;
  s.tiles = c.tiles;
  s.threads = 2;
  gmm_v2_f32(p, s, select_microkernel(), in_microkernel);
  return out;
}

TEST(BPacking, BothWaysGiveTheSameBitsOnEveryTarget) {
  // Groups of one m-tile whose columns outnumber a chunk (b_chunk_cols: an
  // eighth of L2 at tiles.k), so their B goes chunk by chunk: several
  // K-blocks, a ragged K and N, empty groups, rows past the groups.
  const int64_t l2 = this_machine_model(2).caches.l2;
  const int64_t chunk = b_chunk_cols(l2, 256, 32, /*streamed_by_rows=*/true);
  const std::vector<SmallGroups> cases = {
      {100, 600, 3 * chunk + 32, {30, 0, 17, 40}, {48, 256, 3 * chunk + 32}},
      {64, 256, 2 * chunk, {0, 32, 0, 20}, {40, 256, 2 * chunk}},
      {90, 257, 2 * chunk + 48, {12, 25, 0, 33, 20}, {36, 256, 2 * chunk + 48}},
  };
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  for (const SmallGroups& c : cases) {
    std::vector<float> lhs(static_cast<size_t>(c.m * c.k)), rhs;
    for (float& v : lhs) v = normal(rng);
    rhs.resize(static_cast<size_t>(c.sizes.size() * c.k * c.n));
    for (float& v : rhs) v = normal(rng);
    testing::on_every_target([&] {
      const std::vector<float> inside = run(c, lhs, rhs, true);
      const std::vector<float> before = run(c, lhs, rhs, false);
      ASSERT_EQ(inside, before);
      // And right: against a double loop (zeros past the groups).
      int64_t row = 0;
      for (size_t g = 0; g < c.sizes.size(); ++g) {
        for (int64_t r = row; r < row + c.sizes[g]; ++r) {
          for (int64_t j = 0; j < c.n; ++j) {
            double sum = 0;
            for (int64_t p = 0; p < c.k; ++p) {
              sum += double(lhs[r * c.k + p]) * rhs[(g * c.k + p) * c.n + j];
            }
            ASSERT_NEAR(before[r * c.n + j], sum, 1e-4 * (1 + std::abs(sum)))
                << "row " << r << " col " << j;
          }
        }
        row += c.sizes[g];
      }
      for (int64_t i = row * c.n; i < c.m * c.n; ++i) ASSERT_EQ(before[i], 0.0f);
    });
  }
}

TEST(BPacking, TheMicrokernelKeepsTheJobNearATie) {
  EXPECT_TRUE(b_packing_in_microkernel_pays(100, 100));
  EXPECT_TRUE(b_packing_in_microkernel_pays(100, 102.9));
  EXPECT_FALSE(b_packing_in_microkernel_pays(100, 103.1));
}

TEST(BPacking, MeasuredOnceAndTheRulesChoice) {
  const Microkernel uk = select_microkernel();
  const BPackingRates& first = b_packing_rates(uk);
  EXPECT_EQ(&first, &b_packing_rates(uk));  // asked again: not measured again
  if (!uk.run_packing_b) {
    EXPECT_FALSE(first.in_microkernel);
    return;
  }
  EXPECT_GT(first.in_microkernel_gflops, 0);
  EXPECT_GT(first.separate_gflops, 0);
  EXPECT_EQ(first.in_microkernel,
            b_packing_in_microkernel_pays(first.in_microkernel_gflops, first.separate_gflops));
}

}  // namespace
}  // namespace raggemm::kernels
