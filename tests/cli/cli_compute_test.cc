// `raggemm gmm` and `raggemm tgmm` on real files: every flag combination
// that changes the computation (transpose, kernel, dtype, tiles, threads,
// int32/int64 group sizes) against the f64 reference, with empty groups and
// rows past sum(group_sizes), plus bitwise equality across thread counts.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "cli/cli_harness.h"
#include "raggemm/dtype.h"
#include "raggemm/npy.h"
#include "support/gmm_case.h"

namespace raggemm::testing {
namespace {

enum class Op { kGmm, kGmmTransposed, kTgmm };

struct ComputeCase {
  std::string name;
  Op op;
  int64_t m, k, n;
  std::vector<int64_t> sizes;
  DType sizes_dtype;  // kI32 or kI64
  std::string kernel;
  std::string dtype;  // "f32" or "bf16"
  std::string tiles;  // "" leaves --tiles out
  std::string threads;
};

std::ostream& operator<<(std::ostream& out, const ComputeCase& c) { return out << c.name; }

Tensor sizes_file_tensor(const std::vector<int64_t>& sizes, DType dtype) {
  Tensor t(dtype, {static_cast<int64_t>(sizes.size())});
  for (size_t g = 0; g < sizes.size(); ++g) {
    if (dtype == DType::kI32) t.as<int32_t>()[g] = static_cast<int32_t>(sizes[g]);
    if (dtype == DType::kI64) t.as<int64_t>()[g] = sizes[g];
  }
  return t;
}

// The values the op sees with --dtype bf16: each input rounded to bf16.
Tensor as_computed(const Tensor& f32, const std::string& dtype) {
  if (dtype == "f32") return f32;
  Tensor out(DType::kF32, f32.shape());
  for (int64_t i = 0; i < f32.numel(); ++i) {
    out.as<float>()[i] = bf16_to_f32(f32_to_bf16(f32.as<float>()[i]));
  }
  return out;
}

struct Problem {
  Tensor a, b, expected;
  int64_t contraction = 0;
};

// Writes the inputs as a.npy, b.npy, s.npy and returns the reference.
Problem write_problem(const TempDir& dir, const ComputeCase& c) {
  Problem p;
  const int64_t groups = static_cast<int64_t>(c.sizes.size());
  switch (c.op) {
    case Op::kGmm:
      p.a = random_tensor({c.m, c.k}, DType::kF32, 11);
      p.b = random_tensor({groups, c.k, c.n}, DType::kF32, 12);
      break;
    case Op::kGmmTransposed:
      p.a = random_tensor({c.m, c.k}, DType::kF32, 13);
      p.b = random_tensor({groups, c.n, c.k}, DType::kF32, 14);
      break;
    case Op::kTgmm:
      p.a = random_tensor({c.m, c.k}, DType::kF32, 15);
      p.b = random_tensor({c.m, c.n}, DType::kF32, 16);
      break;
  }
  write_npy(dir.file("a.npy"), p.a);
  write_npy(dir.file("b.npy"), p.b);
  write_npy(dir.file("s.npy"), sizes_file_tensor(c.sizes, c.sizes_dtype));
  const Tensor a = as_computed(p.a, c.dtype), b = as_computed(p.b, c.dtype);
  if (c.op == Op::kTgmm) {
    p.expected = reference_tgmm(a, b, c.sizes, TgmmOptions{});
    p.contraction = c.m;
  } else {
    GmmOptions options;
    options.transpose_rhs = c.op == Op::kGmmTransposed;
    p.expected = reference_gmm(a, b, c.sizes, options);
    p.contraction = c.k;
  }
  return p;
}

std::vector<std::string> command_for(const ComputeCase& c, const std::string& out) {
  std::vector<std::string> args;
  if (c.op == Op::kTgmm) {
    args = {"tgmm", "--lhs", "a.npy", "--dout", "b.npy"};
  } else {
    args = {"gmm", "--lhs", "a.npy", "--rhs", "b.npy"};
    if (c.op == Op::kGmmTransposed) args.push_back("--transpose-rhs");
  }
  for (const std::string& arg :
       {std::string("--group-sizes"), std::string("s.npy"), std::string("--out"), out,
        std::string("--kernel"), c.kernel, std::string("--dtype"), c.dtype}) {
    args.push_back(arg);
  }
  if (!c.tiles.empty()) args.insert(args.end(), {"--tiles", c.tiles});
  if (!c.threads.empty()) args.insert(args.end(), {"--threads", c.threads});
  return args;
}

// Rows past the groups (gmm) and slices of empty groups (tgmm) must be
// exactly zero, not merely small.
void expect_exact_zeros(const ComputeCase& c, const Tensor& out) {
  int64_t covered = 0;
  for (int64_t size : c.sizes) covered += size;
  if (c.op != Op::kTgmm) {
    const int64_t cols = out.dim(1);
    for (int64_t i = covered * cols; i < out.numel(); ++i) {
      ASSERT_EQ(out.as<float>()[i], 0.0f) << "row " << i / cols << " is past sum = " << covered;
    }
    return;
  }
  const int64_t slice = c.k * c.n;
  for (size_t g = 0; g < c.sizes.size(); ++g) {
    if (c.sizes[g] != 0) continue;
    for (int64_t i = 0; i < slice; ++i) {
      ASSERT_EQ(out.as<float>()[int64_t(g) * slice + i], 0.0f) << "empty group " << g;
    }
  }
}

class CliComputeTest : public ::testing::TestWithParam<ComputeCase> {};

TEST_P(CliComputeTest, MatchesReference) {
  const ComputeCase& c = GetParam();
  TempDir dir;
  Problem p = write_problem(dir, c);
  CliResult result = run_cli(dir, command_for(c, "o.npy"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err, "");
  Tensor out = read_npy(dir.file("o.npy"), "o.npy");
  ASSERT_EQ(out.dtype(), DType::kF32);
  ASSERT_EQ(out.shape(), p.expected.shape());
  EXPECT_LE(max_scaled_error(out, p.expected, p.contraction), 1.0);
  expect_exact_zeros(c, out);
}

const std::vector<int64_t> kMixed = {5, 0, 9, 0, 3};  // sum 17 of M = 20

INSTANTIATE_TEST_SUITE_P(
    Cases, CliComputeTest,
    ::testing::Values(
        ComputeCase{"gmm_v1_f32_auto", Op::kGmm, 20, 7, 6, kMixed, DType::kI32, "v1", "f32", "", ""},
        ComputeCase{"gmm_v1_f32_tiles", Op::kGmm, 20, 7, 6, kMixed, DType::kI64, "v1", "f32", "4,3,5", "2"},
        ComputeCase{"gmm_v2_f32_tiles", Op::kGmm, 20, 7, 6, kMixed, DType::kI32, "v2", "f32", "8,2,4", "1"},
        ComputeCase{"gmm_v1_bf16", Op::kGmm, 20, 7, 6, kMixed, DType::kI64, "v1", "bf16", "4,3,5", ""},
        ComputeCase{"gmm_v2_bf16", Op::kGmm, 20, 7, 6, kMixed, DType::kI32, "v2", "bf16", "", "2"},
        ComputeCase{"gmm_tiles_larger_than_dims", Op::kGmm, 20, 7, 6, kMixed, DType::kI32, "v1", "f32", "64,64,64", ""},
        ComputeCase{"gmm_one_group_full", Op::kGmm, 9, 1, 3, {9}, DType::kI32, "v2", "f32", "2,1,2", ""},
        ComputeCase{"gmm_all_rows_past_sum", Op::kGmm, 6, 4, 3, {0, 0}, DType::kI64, "v1", "f32", "", ""},
        ComputeCase{"gmm_zero_rows", Op::kGmm, 0, 4, 3, {0, 0}, DType::kI32, "v2", "f32", "", ""},
        ComputeCase{"dlhs_v1_f32", Op::kGmmTransposed, 20, 7, 6, kMixed, DType::kI32, "v1", "f32", "4,3,5", ""},
        ComputeCase{"dlhs_v2_f32", Op::kGmmTransposed, 20, 7, 6, kMixed, DType::kI64, "v2", "f32", "", "2"},
        ComputeCase{"dlhs_v1_bf16", Op::kGmmTransposed, 20, 7, 6, kMixed, DType::kI32, "v1", "bf16", "", ""},
        ComputeCase{"dlhs_v2_bf16", Op::kGmmTransposed, 20, 7, 6, kMixed, DType::kI32, "v2", "bf16", "3,3,3", ""},
        ComputeCase{"tgmm_v1_f32", Op::kTgmm, 20, 7, 6, kMixed, DType::kI32, "v1", "f32", "4,3,5", ""},
        ComputeCase{"tgmm_v2_f32", Op::kTgmm, 20, 7, 6, kMixed, DType::kI64, "v2", "f32", "", "2"},
        ComputeCase{"tgmm_v1_bf16", Op::kTgmm, 20, 7, 6, kMixed, DType::kI32, "v1", "bf16", "", "1"},
        ComputeCase{"tgmm_v2_bf16", Op::kTgmm, 20, 7, 6, kMixed, DType::kI64, "v2", "bf16", "5,4,3", ""},
        ComputeCase{"tgmm_all_empty", Op::kTgmm, 6, 4, 3, {0, 0, 0}, DType::kI32, "v1", "f32", "", ""},
        ComputeCase{"tgmm_zero_rows", Op::kTgmm, 0, 4, 3, {0, 0}, DType::kI32, "v2", "f32", "", ""}),
    [](const ::testing::TestParamInfo<ComputeCase>& info) { return info.param.name; });

// --threads changes nothing in the output, down to the bit.
class CliThreadsTest : public ::testing::TestWithParam<ComputeCase> {};

TEST_P(CliThreadsTest, OneAndTwoThreadsAreBitwiseEqual) {
  ComputeCase c = GetParam();
  TempDir dir;
  write_problem(dir, c);
  c.threads = "1";
  ASSERT_EQ(run_cli(dir, command_for(c, "one.npy")).exit_code, 0);
  c.threads = "2";
  ASSERT_EQ(run_cli(dir, command_for(c, "two.npy")).exit_code, 0);
  Tensor one = read_npy(dir.file("one.npy"), "one"), two = read_npy(dir.file("two.npy"), "two");
  ASSERT_EQ(one.shape(), two.shape());
  EXPECT_EQ(std::memcmp(one.data(), two.data(), one.nbytes()), 0);
}

const std::vector<int64_t> kSkewed = {40, 0, 3, 70, 1};  // sum 114 of M = 120

INSTANTIATE_TEST_SUITE_P(
    Cases, CliThreadsTest,
    ::testing::Values(
        ComputeCase{"gmm_v1", Op::kGmm, 120, 33, 17, kSkewed, DType::kI32, "v1", "f32", "16,8,8", ""},
        ComputeCase{"gmm_v2", Op::kGmm, 120, 33, 17, kSkewed, DType::kI32, "v2", "bf16", "16,8,8", ""},
        ComputeCase{"dlhs_v2", Op::kGmmTransposed, 120, 33, 17, kSkewed, DType::kI32, "v2", "f32", "", ""},
        ComputeCase{"tgmm_v1", Op::kTgmm, 120, 33, 17, kSkewed, DType::kI32, "v1", "f32", "8,16,8", ""},
        ComputeCase{"tgmm_v2", Op::kTgmm, 120, 33, 17, kSkewed, DType::kI32, "v2", "f32", "8,16,8", ""}),
    [](const ::testing::TestParamInfo<ComputeCase>& info) { return info.param.name; });

TEST(CliHelp, HelpExitsZeroForEveryCommand) {
  TempDir dir;
  for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
           {"--help"}, {"gmm", "--help"}, {"tgmm", "--help"}, {"bench", "--help"}, {"gmm", "-h"}}) {
    CliResult result = run_cli(dir, args);
    EXPECT_EQ(result.exit_code, 0) << args[0] << " " << result.err;
    EXPECT_NE(result.out.find("sage"), std::string::npos) << result.out;  // "usage"/"Usage"
    EXPECT_EQ(result.err, "");
  }
}

}  // namespace
}  // namespace raggemm::testing
