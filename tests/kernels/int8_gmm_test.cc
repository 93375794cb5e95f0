// The int8 forward gmm (kernels/int8_gmm.h) with every int8 microkernel this
// CPU runs, against an exact integer reference: same i32 sums, same output
// formula, so results must match bit for bit.
#include "kernels/int8_gmm.h"

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cstring>
#include <random>
#include <vector>

namespace raggemm::kernels {
namespace {

struct Case {
  const char* name;
  int64_t m, k, n;
  std::vector<int64_t> sizes;
  Tiles tiles;
  bool shared_col_scale = false;
};

struct Data {
  std::vector<int8_t> lhs, rhs;
  std::vector<float> row_scale, col_scale;
  std::vector<int64_t> starts;
};

Data make_data(const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> code(-128, 127);  // the whole int8 range
  std::uniform_real_distribution<float> scale(0.001f, 0.1f);
  const int64_t g = static_cast<int64_t>(c.sizes.size());
  Data d;
  d.lhs.resize(c.m * c.k);
  d.rhs.resize(g * c.k * c.n);
  for (auto& v : d.lhs) v = static_cast<int8_t>(code(rng));
  for (auto& v : d.rhs) v = static_cast<int8_t>(code(rng));
  // Extremes: whole rows of -128 and +127 stress every sum's range.
  if (c.m > 1) {
    for (int64_t kk = 0; kk < c.k; ++kk) {
      d.lhs[kk] = -128;
      d.lhs[c.k + kk] = 127;
    }
  }
  for (int64_t kk = 0; kk < c.k && c.n > 0; ++kk) d.rhs[kk * c.n] = -128;
  d.row_scale.resize(c.m);
  d.col_scale.resize(g * c.n);
  for (auto& v : d.row_scale) v = scale(rng);
  for (auto& v : d.col_scale) v = scale(rng);
  d.starts.push_back(0);
  for (int64_t s : c.sizes) d.starts.push_back(d.starts.back() + s);
  return d;
}

Int8GmmProblem problem_of(const Case& c, Data& d, float* out) {
  Int8GmmProblem p;
  p.lhs = d.lhs.data();
  p.row_scale = d.row_scale.data();
  p.rhs = d.rhs.data();
  p.rhs_group_stride = c.k * c.n;
  p.col_scale = d.col_scale.data();
  p.col_scale_stride = 1;
  p.col_scale_group_stride = c.shared_col_scale ? 0 : c.n;
  p.m = c.m;
  p.k = c.k;
  p.n = c.n;
  p.starts = d.starts.data();
  p.num_groups = static_cast<int64_t>(c.sizes.size());
  p.group_offset = 0;
  p.local_groups = p.num_groups;
  p.out = out;
  return p;
}

std::vector<float> reference(const Case& c, const Data& d) {
  std::vector<float> out(c.m * c.n, 0.0f);
  for (size_t g = 0; g < c.sizes.size(); ++g) {
    const float* col_scale = d.col_scale.data() + (c.shared_col_scale ? 0 : g * c.n);
    for (int64_t i = d.starts[g]; i < d.starts[g + 1]; ++i) {
      for (int64_t j = 0; j < c.n; ++j) {
        int32_t sum = 0;
        for (int64_t kk = 0; kk < c.k; ++kk) {
          sum += int32_t{d.lhs[i * c.k + kk]} * int32_t{d.rhs[(g * c.k + kk) * c.n + j]};
        }
        out[i * c.n + j] = static_cast<float>(sum) * d.row_scale[i] * col_scale[j];
      }
    }
  }
  return out;
}

const Case kCases[] = {
    {"ragged_everything", 37, 70, 45, {10, 0, 20, 5}, {8, 16, 20}},
    {"one_group_big_k", 20, 515, 33, {20}, {12, 256, 64}},
    {"all_empty", 9, 12, 7, {0, 0, 0}, {4, 4, 4}},
    {"empty_first_last", 30, 64, 64, {0, 13, 17, 0}, {192, 256, 256}},
    {"k_below_quad", 11, 3, 40, {4, 7}, {5, 4, 32}},
    {"k_zero", 6, 0, 5, {3, 2}, {4, 4, 4}},
    {"shared_col_scale", 25, 40, 50, {12, 13}, {6, 8, 16}, true},
    {"one_row_per_group", 8, 33, 17, {1, 1, 1, 1, 1, 1, 1, 1}, {2, 32, 16}},
};

TEST(Int8Gmm, EveryMicrokernelMatchesTheIntegerReference) {
  ASSERT_FALSE(int8_microkernels().empty());
  EXPECT_STREQ(int8_microkernels().back().target, "SCALAR");
  for (const Int8Microkernel& uk : int8_microkernels()) {
    for (const Case& c : kCases) {
      Data d = make_data(c, 42);
      std::vector<float> out(c.m * c.n, -1.0f);  // garbage the kernel must overwrite
      Schedule s;
      s.tiles = c.tiles;
      s.threads = 2;
      int8_gmm(problem_of(c, d, out.data()), s, &uk);
      const std::vector<float> want = reference(c, d);
      int mismatches = 0;
      for (int64_t i = 0; i < c.m * c.n && mismatches < 5; ++i) {
        if (std::memcmp(&out[i], &want[i], sizeof(float)) != 0) {
          ++mismatches;
          ADD_FAILURE() << uk.target << " " << c.name << " element " << i << ": " << out[i]
                        << " vs " << want[i];
        }
      }
    }
  }
}

TEST(Int8Gmm, ResultsDoNotDependOnThreadsOrTiles) {
  const Case c = kCases[0];
  Data d = make_data(c, 7);
  std::vector<float> first;
  for (int threads : {1, 2, 3}) {
    for (Tiles tiles : {Tiles{8, 16, 20}, Tiles{192, 256, 256}, Tiles{1, 4, 1}}) {
      std::vector<float> out(c.m * c.n);
      Schedule s;
      s.tiles = tiles;
      s.threads = threads;
      int8_gmm(problem_of(c, d, out.data()), s);
      if (first.empty()) {
        first = out;
      } else {
        EXPECT_EQ(std::memcmp(out.data(), first.data(), out.size() * sizeof(float)), 0)
            << threads << " threads";
      }
    }
  }
}

TEST(Int8Gmm, LocalGroupsLeaveOtherRowsZero) {
  const Case c = kCases[0];
  Data d = make_data(c, 3);
  std::vector<float> out(c.m * c.n, -1.0f);
  Int8GmmProblem p = problem_of(c, d, out.data());
  // Only groups 2..3 are local: the weight holds those two.
  p.group_offset = 2;
  p.local_groups = 2;
  p.rhs = d.rhs.data() + 2 * c.k * c.n;
  p.col_scale = d.col_scale.data() + 2 * c.n;
  Schedule s;
  s.tiles = c.tiles;
  s.threads = 2;
  int8_gmm(p, s);
  const std::vector<float> want = reference(c, d);
  for (int64_t i = 0; i < c.m; ++i) {
    const bool local = i >= d.starts[2] && i < d.starts[4];
    for (int64_t j = 0; j < c.n; ++j) {
      EXPECT_EQ(out[i * c.n + j], local ? want[i * c.n + j] : 0.0f) << i << "," << j;
    }
  }
}

}  // namespace
}  // namespace raggemm::kernels

namespace raggemm::kernels {
namespace {

// The int8 kernel follows the f32 dispatch's family (a Highway target
// forced down to AVX2 rules out AVX-512 VNNI) unless one is forced by name;
// a name this CPU cannot run is refused.
TEST(Int8Microkernel, SelectionFollowsTheForcedTargetAndName) {
  EXPECT_STREQ(select_int8_microkernel().target, int8_microkernels().front().target);
  for (const Int8Microkernel& uk : int8_microkernels()) {
    ASSERT_TRUE(force_int8_microkernel(uk.target));
    EXPECT_STREQ(select_int8_microkernel().target, uk.target);
  }
  EXPECT_FALSE(force_int8_microkernel("NEON_DOTPROD"));
  ASSERT_TRUE(force_int8_microkernel("auto"));
  EXPECT_STREQ(select_int8_microkernel().target, int8_microkernels().front().target);
  if (hwy::SupportedTargets() & HWY_AVX2) {
    hwy::SetSupportedTargetsForTest(HWY_AVX2);
    EXPECT_STRNE(select_int8_microkernel().target, "AVX512_VNNI");
    hwy::SetSupportedTargetsForTest(0);
  }
  EXPECT_STREQ(select_int8_microkernel().target, int8_microkernels().front().target);
}

}  // namespace
}  // namespace raggemm::kernels
