// dlhs of small groups from the weight's rows (kernels/dlhs_weight_rows.h):
// the same bits as the driver's packed path on every target, right against
// a double loop, for f32 and bf16 dout, overwritten, accumulated and bf16
// outputs, groups of 0 to 64 tokens (one-vector and two-vector last B
// panels), rows past the groups, a ragged last K-block, output columns that
// are no whole number of register tiles and items split by columns; and the
// problems it refuses.
#include "kernels/dlhs_weight_rows.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/float_bits.h"
#include "kernels/f32_gmm_policy.h"
#include "kernels/machine_model.h"
#include "kernels/reference.h"
#include "support/every_target.h"
#include "support/gmm_case.h"

namespace raggemm::kernels {
namespace {

enum class Out { kF32, kF32Accumulate, kBF16 };

struct DlhsCase {
  int64_t m, k, n;             // dout [m, k], weight [G, n, k], out [m, n]
  std::vector<int64_t> sizes;  // may hold empty groups and sum to less than m
  Tiles tiles;
};

struct Inputs {
  std::vector<float> dout, weight, initial;  // dout as its values (bf16-exact for bf16)
  std::vector<uint16_t> dout_bf16;
};

GmmProblem problem(const DlhsCase& c, const Inputs& in, bool bf16_dout,
                   const std::vector<int64_t>& starts) {
  GmmProblem p;
  p.lhs = bf16_dout ? Operand{in.dout_bf16.data(), DType::kBF16, c.k}
                    : Operand{in.dout.data(), DType::kF32, c.k};
  p.rhs = {{in.weight.data(), DType::kF32, c.k}, c.n * c.k, 0};
  p.transpose_rhs = true;
  p.m = c.m;
  p.k = c.k;
  p.n = c.n;
  p.starts = starts.data();
  p.num_groups = p.local_groups = static_cast<int64_t>(c.sizes.size());
  return p;
}

// The output as f32 values, one way or the other.
std::vector<float> run(const DlhsCase& c, const Inputs& in, bool bf16_dout, Out kind,
                       bool from_weight_rows) {
  const std::vector<int64_t> starts = testing::starts_of(c.sizes);
  GmmProblem p = problem(c, in, bf16_dout, starts);
  std::vector<float> out = in.initial;
  std::vector<uint16_t> out_bf16(out.size(), 0x7fc0);  // NaN where nothing is written
  if (kind == Out::kBF16) {
    p.out_bf16 = out_bf16.data();
  } else {
    p.out = out.data();
    p.accumulate = kind == Out::kF32Accumulate;
  }
  Schedule s;
  s.tiles = c.tiles;
  s.threads = 2;
  gmm_v2_f32(p, s, select_microkernel(), /*b_in_microkernel=*/false, from_weight_rows);
  if (kind == Out::kBF16) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = bf16_to_f32(out_bf16[i]);
  }
  return out;
}

TEST(DlhsWeightRows, SameBitsAsThePackedPathOnEveryTarget) {
  // K = 300 at kc = 128: two whole K-blocks and a ragged one; at most a
  // quarter of L2 for the transposed dout keeps groups of 64 on this path
  // on every machine with 512 KiB of L2 or more (checked below).
  const std::vector<DlhsCase> cases = {
      {280, 300, 100, {0, 1, 15, 16, 17, 31, 32, 33, 0, 47, 64}, {48, 128, 100}},
      {280, 300, 100, {64, 0, 33, 17, 120}, {16, 128, 40}},  // items split by rows and columns
      {40, 300, 13, {5, 0, 30}, {48, 128, 13}},  // fewer output columns than a register tile
  };
  const Microkernel uk = select_microkernel();
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  for (const DlhsCase& c : cases) {
    const std::vector<int64_t> starts = testing::starts_of(c.sizes);
    Inputs in;
    in.dout.resize(static_cast<size_t>(c.m * c.k));
    for (float& v : in.dout) {
      const uint16_t bits = core::bf16_bits_of(normal(rng));
      in.dout_bf16.push_back(bits);
      v = bf16_to_f32(bits);
    }
    in.weight.resize(static_cast<size_t>(c.sizes.size() * c.n * c.k));
    for (float& v : in.weight) v = normal(rng);
    in.initial.resize(static_cast<size_t>(c.m * c.n));
    for (float& v : in.initial) v = normal(rng);
    const int64_t l2 = this_machine_model(2).caches.l2;
    const int64_t max_rows = dlhs_weight_rows_max_rows(problem(c, in, false, starts), uk, l2);
    ASSERT_GE(max_rows, 64) << "the groups would not take the path on this machine";
    // The oracle (f64 sums): initial + dout_g @ W_g^T on the groups' rows.
    // The bf16 dout holds the same values, so one answer serves both.
    std::vector<float> oracle = in.initial;
    GmmProblem reference = problem(c, in, false, starts);
    reference.out = oracle.data();
    reference.accumulate = true;
    reference_gmm(reference);
    for (bool bf16_dout : {false, true}) {
      for (Out kind : {Out::kF32, Out::kF32Accumulate, Out::kBF16}) {
        SCOPED_TRACE(::testing::Message() << "n " << c.n << " bf16 dout " << bf16_dout
                                          << " out " << static_cast<int>(kind));
        testing::on_every_target([&] {
          const std::vector<float> rows = run(c, in, bf16_dout, kind, true);
          const std::vector<float> packed = run(c, in, bf16_dout, kind, false);
          ASSERT_EQ(rows, packed);
          if (kind != Out::kF32Accumulate) return;
          // Right: the oracle on the groups' rows, initial elsewhere.
          for (int64_t r = 0; r < starts.back(); ++r) {
            for (int64_t j = 0; j < c.n; ++j) {
              const float want = oracle[r * c.n + j];
              ASSERT_NEAR(rows[r * c.n + j], want, 1e-4 * (1 + std::abs(want)))
                  << "row " << r << " col " << j;
            }
          }
          for (int64_t r = starts.back(); r < c.m; ++r) {
            for (int64_t j = 0; j < c.n; ++j) ASSERT_EQ(rows[r * c.n + j], in.initial[r * c.n + j]);
          }
        });
      }
    }
  }
}

TEST(DlhsWeightRows, TakesOnlyAPlainF32WeightWithNoOutputStage) {
  const Microkernel uk = select_microkernel();
  const std::vector<float> weight(64 * 64), scales(64, 1.0f);
  const std::vector<int64_t> starts{0, 32};
  GmmProblem p;
  p.rhs = {{weight.data(), DType::kF32, 64}, 64 * 64, 0};
  p.transpose_rhs = true;
  p.m = 32;
  p.k = p.n = 64;
  p.starts = starts.data();
  p.num_groups = p.local_groups = 1;
  const int64_t l2 = int64_t{1} << 20;
  // A quarter of 1 MiB holds 1024 B micro-panels of 64 steps: 1024 nr-wide panels.
  EXPECT_EQ(dlhs_weight_rows_max_rows(p, uk, l2), (l2 / 4) / (uk.nr * 64 * 4) * uk.nr);
  GmmProblem forward = p;
  forward.transpose_rhs = false;
  EXPECT_EQ(dlhs_weight_rows_max_rows(forward, uk, l2), 0);
  GmmProblem scaled = p;
  scaled.rhs.base.scale.data = scales.data();
  EXPECT_EQ(dlhs_weight_rows_max_rows(scaled, uk, l2), 0);
  GmmProblem bf16 = p;
  bf16.rhs.base.dtype = DType::kBF16;
  EXPECT_EQ(dlhs_weight_rows_max_rows(bf16, uk, l2), 0);
  GmmProblem epilogue = p;
  epilogue.epilogue.row_scale = scales.data();
  EXPECT_EQ(dlhs_weight_rows_max_rows(epilogue, uk, l2), 0);
  GmmProblem empty = p;
  empty.k = 0;
  EXPECT_EQ(dlhs_weight_rows_max_rows(empty, uk, l2), 0);
}

}  // namespace
}  // namespace raggemm::kernels
