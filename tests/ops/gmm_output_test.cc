// Outputs users expect (include/raggemm/gmm.h: out_dtype, accumulate), for
// every driver that writes an output: gmm v1, gmm v2 (plain and with its
// output stage: scales, bias, SwiGLU), tgmm v1, tgmm v2, the bf16
// dot-product drivers (the SIMD kernel and its scalar twin), the widening
// path, and the quantized paths (int8 on integer dot products, fp8):
//  - a bf16 output is round_bf16 of the same driver's f32 output, bit for
//    bit, every element written (the outputs start poisoned), and within
//    bf16's rounding of the f64 reference;
//  - it does not depend on the thread count;
//  - accumulate: out + acc (f32) or bf16(float(out) + acc), twice in a row
//    is the sum applied twice; tgmm's empty groups and gmm's rows of no
//    local group are left untouched;
// over empty groups, sum(group_sizes) < M, tiles that divide nothing,
// contractions longer than a tile (so slices accumulate), expert-parallel
// group ranges, staged tgmm tiles of several bands and groups of many
// slices, and every empty/non-empty pattern of 4 groups; and the bad
// settings are refused before anything is written.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/bf16_microkernel.h"
#include "kernels/microkernel_registry.h"
#include "raggemm/dtype.h"
#include "raggemm/error.h"
#include "raggemm/quant.h"
#include "support/gmm_case.h"

namespace raggemm {
namespace {

using testing::poisoned;
using testing::random_tensor;
using testing::sizes_tensor;

struct Case {
  std::string name;
  int64_t m, k, n;
  std::vector<int64_t> sizes;
  Tiles tiles;
  int64_t group_offset = 0, local_groups = -1;
};

std::vector<Case> cases() {
  return {
      {"non_dividing_multi_slice", 67, 37, 46, {20, 0, 31, 9}, {8, 8, 16}},
      {"sum_less_than_m", 50, 17, 24, {10, 0, 15}, {8, 4, 8}},
      {"one_tile", 23, 9, 12, {10, 0, 13}, {512, 512, 512}},
      {"default_tiles", 120, 70, 62, {50, 0, 40, 13}, {0, 0, 0}},
      {"group_range", 60, 19, 22, {12, 9, 0, 20, 7}, {8, 8, 8}, 1, 3},
      {"all_empty", 12, 6, 10, {0, 0, 0}, {4, 4, 4}},
      // A staged tgmm tile (bf16 out, or accumulated) of more rows than one
      // band (kernels/tgmm_driver.h: a quarter of L2 over 8 KiB rows is at
      // most 128 rows for an L2 up to 4 MiB), its slices' B shared by the bands.
      {"staged_bands", 96, 130, 2048, {60, 0, 3, 33}, {256, 8, 2048}},
      // More token slices than the bands share (f32 tiles.k 2: 150 slices;
      // bf16 pairs: 75): the tile staged whole, each slice's B in turn.
      {"long_group_slices", 310, 20, 24, {300, 0, 5}, {16, 2, 16}},
  };
}

// One way through the drivers.
struct Path {
  std::string name;
  DType input = DType::kF32;
  KernelVersion kernel = KernelVersion::kV2;
  std::string bf16_kernel;   // force_bf16_microkernel: "" auto, "SCALAR", "WIDEN"
  bool epilogue = false;     // gmm only: row/col scales and a bias (v2)
  bool swiglu = false;       // gmm only (v2)
};

std::vector<Path> gmm_paths() {
  return {
      {"v1_f32", DType::kF32, KernelVersion::kV1, "", false, false},
      {"v2_f32", DType::kF32, KernelVersion::kV2, "", false, false},
      {"v2_epilogue", DType::kF32, KernelVersion::kV2, "", true, false},
      {"v2_swiglu", DType::kF32, KernelVersion::kV2, "", true, true},
      {"v1_bf16", DType::kBF16, KernelVersion::kV1, "", false, false},
      {"v2_bf16_dot", DType::kBF16, KernelVersion::kV2, "", false, false},
      {"v2_bf16_dot_scalar", DType::kBF16, KernelVersion::kV2, "SCALAR", false, false},
      {"v2_bf16_widened", DType::kBF16, KernelVersion::kV2, "WIDEN", false, false},
  };
}

std::vector<Path> tgmm_paths() {
  return {
      {"v1_f32", DType::kF32, KernelVersion::kV1, "", false, false},
      {"v2_f32", DType::kF32, KernelVersion::kV2, "", false, false},
      {"v1_bf16", DType::kBF16, KernelVersion::kV1, "", false, false},
      {"v2_bf16_dot", DType::kBF16, KernelVersion::kV2, "", false, false},
      {"v2_bf16_dot_scalar", DType::kBF16, KernelVersion::kV2, "SCALAR", false, false},
      {"v2_bf16_widened", DType::kBF16, KernelVersion::kV2, "WIDEN", false, false},
  };
}

int64_t groups_of(const Case& c) { return static_cast<int64_t>(c.sizes.size()); }
int64_t local_of(const Case& c) { return c.local_groups < 0 ? groups_of(c) : c.local_groups; }

struct GmmInputs {
  Tensor lhs, rhs, row_scale, col_scale, col_bias;
};

GmmInputs gmm_inputs(const Case& c, const Path& path, bool transpose) {
  const int64_t g = local_of(c);
  GmmInputs x;
  x.lhs = random_tensor({c.m, c.k}, path.input, 11);
  x.rhs = random_tensor(transpose ? Shape{g, c.n, c.k} : Shape{g, c.k, c.n}, path.input, 12);
  x.row_scale = random_tensor({c.m}, DType::kF32, 13);
  x.col_scale = random_tensor({c.n}, DType::kF32, 14);
  x.col_bias = random_tensor({g, c.n}, DType::kF32, 15);
  return x;
}

GmmOptions gmm_options(const Case& c, const Path& path, const GmmInputs& x, bool transpose,
                       DType out_dtype, int threads) {
  GmmOptions o;
  o.transpose_rhs = transpose;
  o.tiles = c.tiles;
  o.kernel = path.kernel;
  o.threads = threads;
  o.group_offset = c.group_offset;
  o.local_groups = c.local_groups;
  o.out_dtype = out_dtype;
  if (path.epilogue) {
    o.row_scale = x.row_scale.view();
    o.col_scale = x.col_scale.view();
    o.col_bias = x.col_bias.view();
    o.fuse_swiglu = path.swiglu;
  }
  return o;
}

Tensor run_gmm(const Case& c, const Path& path, bool transpose, DType out_dtype,
               int threads = 2) {
  const GmmInputs x = gmm_inputs(c, path, transpose);
  const GmmOptions o = gmm_options(c, path, x, transpose, out_dtype, threads);
  EXPECT_TRUE(kernels::force_bf16_microkernel(path.bf16_kernel)) << path.bf16_kernel;
  Tensor out = poisoned({c.m, path.swiglu ? c.n / 2 : c.n}, out_dtype);
  gmm_into(x.lhs, x.rhs, sizes_tensor(c.sizes), out, o);
  kernels::force_bf16_microkernel("");
  return out;
}

struct TgmmInputs {
  Tensor lhs, dout;
};

TgmmInputs tgmm_inputs(const Case& c, const Path& path) {
  return {random_tensor({c.m, c.k}, path.input, 21), random_tensor({c.m, c.n}, path.input, 22)};
}

TgmmOptions tgmm_options(const Case& c, const Path& path, DType out_dtype, bool accumulate,
                         int threads) {
  TgmmOptions o;
  o.tiles = c.tiles;
  o.kernel = path.kernel;
  o.threads = threads;
  o.group_offset = c.group_offset;
  o.local_groups = c.local_groups;
  o.out_dtype = out_dtype;
  o.accumulate = accumulate;
  return o;
}

// Runs tgmm_into on `out` (poisoned unless accumulating into it).
void run_tgmm_into(const Case& c, const Path& path, const TensorView& out, bool accumulate,
                   int threads = 2) {
  const TgmmInputs x = tgmm_inputs(c, path);
  EXPECT_TRUE(kernels::force_bf16_microkernel(path.bf16_kernel)) << path.bf16_kernel;
  tgmm_into(x.lhs, x.dout, sizes_tensor(c.sizes), out,
            tgmm_options(c, path, out.dtype, accumulate, threads));
  kernels::force_bf16_microkernel("");
}

Tensor run_tgmm(const Case& c, const Path& path, DType out_dtype, int threads = 2) {
  Tensor out = poisoned({local_of(c), c.k, c.n}, out_dtype);
  run_tgmm_into(c, path, out, false, threads);
  return out;
}

// bf16 == round_bf16(f32), bit for bit, element by element.
void expect_rounded(const Tensor& bf16, const Tensor& f32, const std::string& what) {
  ASSERT_EQ(bf16.dtype(), DType::kBF16) << what;
  ASSERT_EQ(bf16.numel(), f32.numel()) << what;
  for (int64_t i = 0; i < f32.numel(); ++i) {
    const uint16_t expected = f32_to_bf16(f32.as<float>()[i]);
    ASSERT_EQ(bf16.as<uint16_t>()[i], expected)
        << what << " element " << i << ": f32 " << f32.as<float>()[i];
  }
}

void expect_bitwise_equal(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  ASSERT_EQ(a.numel(), b.numel()) << what;
  ASSERT_EQ(std::memcmp(a.data(), b.data(), a.numel() * dtype_size(a.dtype())), 0) << what;
}

Tensor widened(const Tensor& bf16) {
  Tensor f(DType::kF32, bf16.shape());
  for (int64_t i = 0; i < bf16.numel(); ++i) {
    f.as<float>()[i] = bf16_to_f32(bf16.as<uint16_t>()[i]);
  }
  return f;
}

// |bf16 - ref| within half a bf16 ulp of |ref| plus the f32 summation
// bound (N(0,1) inputs: |ref| ~ sqrt(contraction)); zeros of the reference
// (rows past the groups, empty groups) exact.
void expect_near_reference(const Tensor& bf16, const Tensor& ref, int64_t contraction,
                           const std::string& what) {
  const Tensor got = widened(bf16);
  const double k = static_cast<double>(std::max<int64_t>(contraction, 1));
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double r = ref.as<float>()[i];
    const double g = got.as<float>()[i];
    if (r == 0.0) {
      ASSERT_EQ(g, 0.0) << what << " element " << i;
      continue;
    }
    ASSERT_LE(std::fabs(g - r), std::fabs(r) * std::ldexp(1.0, -8) + 4 * k * std::sqrt(k) * 1.2e-7)
        << what << " element " << i << ": ref " << r;
  }
}

TEST(GmmOutput, Bf16IsRoundedF32BitwiseEveryGmmDriver) {
  for (const Case& c : cases()) {
    for (const Path& path : gmm_paths()) {
      if (path.swiglu && c.n % 2 != 0) continue;
      for (bool transpose : {false, true}) {
        const std::string what =
            c.name + "/" + path.name + (transpose ? "/dlhs" : "/fwd");
        const Tensor f32 = run_gmm(c, path, transpose, DType::kF32);
        const Tensor bf16 = run_gmm(c, path, transpose, DType::kBF16);
        expect_rounded(bf16, f32, what);
        if (!path.epilogue) {
          const GmmInputs x = gmm_inputs(c, path, transpose);
          GmmOptions o = gmm_options(c, path, x, transpose, DType::kF32, 1);
          const Tensor ref = testing::reference_gmm(x.lhs, x.rhs, c.sizes, o);
          expect_near_reference(bf16, ref, c.k, what);
        }
      }
    }
  }
}

TEST(GmmOutput, Bf16IsRoundedF32BitwiseEveryTgmmDriver) {
  for (const Case& c : cases()) {
    for (const Path& path : tgmm_paths()) {
      const std::string what = c.name + "/" + path.name + "/drhs";
      const Tensor f32 = run_tgmm(c, path, DType::kF32);
      const Tensor bf16 = run_tgmm(c, path, DType::kBF16);
      expect_rounded(bf16, f32, what);
      const TgmmInputs x = tgmm_inputs(c, path);
      const Tensor ref = testing::reference_tgmm(x.lhs, x.dout, c.sizes,
                                                 tgmm_options(c, path, DType::kF32, false, 1));
      expect_near_reference(bf16, ref, c.m, what);
    }
  }
}

TEST(GmmOutput, Bf16DoesNotDependOnThreadCount) {
  for (const Case& c : cases()) {
    for (const Path& path : gmm_paths()) {
      if (path.swiglu && c.n % 2 != 0) continue;
      expect_bitwise_equal(run_gmm(c, path, false, DType::kBF16, 1),
                           run_gmm(c, path, false, DType::kBF16, 3), c.name + "/" + path.name);
    }
    for (const Path& path : tgmm_paths()) {
      expect_bitwise_equal(run_tgmm(c, path, DType::kBF16, 1), run_tgmm(c, path, DType::kBF16, 3),
                           c.name + "/" + path.name + "/drhs");
    }
  }
}

// A caller's output that starts mid-line (numpy's np.empty is 16 bytes past
// one): tgmm's streamed tiles take the columns before the rows' first line
// boundary apart (kernels/tgmm_driver.h), and the result is the aligned
// output's, bit for bit, at every offset within a line; with rows of whole
// lines (N = 48: the split applies) and not (N = 46), groups of one token
// slice (streamed) and of two, and an empty one.
TEST(GmmOutput, TgmmIntoAMisalignedOutputIsTheAlignedOnesBits) {
  for (int64_t n : {48, 46}) {
    const Case c{"misaligned", 40, 21, n, {7, 0, 20, 13}, {32, 16, 32}};
    const int64_t count = local_of(c) * c.k * c.n;
    for (const Path& path : tgmm_paths()) {
      for (DType dtype : {DType::kF32, DType::kBF16}) {
        const Tensor aligned = run_tgmm(c, path, dtype);
        const int64_t elem = static_cast<int64_t>(dtype_size(dtype));
        for (int64_t offset = 1; offset < 64 / elem; ++offset) {
          const Tensor storage = poisoned({count + 64 / elem}, dtype);
          const TensorView view(dtype, {local_of(c), c.k, c.n},
                                static_cast<char*>(storage.data()) + offset * elem);
          run_tgmm_into(c, path, view, false);
          ASSERT_EQ(std::memcmp(view.data, aligned.data(), count * elem), 0)
              << path.name << " " << dtype_name(dtype) << " n " << n << " offset " << offset;
        }
      }
    }
  }
}

// A start value for accumulation: random, in the output's dtype.
Tensor start_value(const Case& c, DType dtype) {
  return random_tensor({local_of(c), c.k, c.n}, dtype, 31);
}

Tensor copy_of(const Tensor& t) {
  Tensor copy(t.dtype(), t.shape());
  std::memcpy(copy.data(), t.data(), t.numel() * dtype_size(t.dtype()));
  return copy;
}

// out0 + r (f32) or bf16(float(out0) + r), r the f32 result.
Tensor accumulated(const Tensor& out0, const Tensor& r) {
  Tensor expected = copy_of(out0);
  for (int64_t i = 0; i < r.numel(); ++i) {
    const float add = r.as<float>()[i];
    if (out0.dtype() == DType::kF32) {
      expected.as<float>()[i] += add;
    } else {
      uint16_t& bits = expected.as<uint16_t>()[i];
      bits = f32_to_bf16(bf16_to_f32(bits) + add);
    }
  }
  return expected;
}

void accumulate_twice(const Case& c, const Path& path, DType dtype, int threads) {
  const std::string what =
      c.name + "/" + path.name + "/" + dtype_name(dtype) + "/threads " + std::to_string(threads);
  const Tensor r = run_tgmm(c, path, DType::kF32);
  const Tensor out0 = start_value(c, dtype);
  Tensor out = copy_of(out0);
  run_tgmm_into(c, path, out, true, threads);
  const Tensor once = accumulated(out0, r);
  expect_bitwise_equal(out, once, what + " once");
  run_tgmm_into(c, path, out, true, threads);
  expect_bitwise_equal(out, accumulated(once, r), what + " twice");
  // Empty groups: untouched, bit for bit.
  const int64_t slice = c.k * c.n * static_cast<int64_t>(dtype_size(dtype));
  for (int64_t g = 0; g < local_of(c); ++g) {
    if (c.sizes[c.group_offset + g] != 0) continue;
    EXPECT_EQ(std::memcmp(static_cast<const char*>(out.data()) + g * slice,
                          static_cast<const char*>(out0.data()) + g * slice, slice),
              0)
        << what << " empty group " << g;
  }
}

TEST(GmmOutput, TgmmAccumulateAddsOnceAndLeavesEmptyGroups) {
  for (const Case& c : cases()) {
    for (const Path& path : tgmm_paths()) {
      for (DType dtype : {DType::kF32, DType::kBF16}) {
        for (int threads : {1, 3}) accumulate_twice(c, path, dtype, threads);
      }
    }
  }
}

// gmm accumulate: rows of the local groups get out + value, the others
// (past the groups, or of other experts) stay as they were, bit for bit.
void gmm_accumulate_twice(const Case& c, const Path& path, bool transpose, DType dtype,
                          int threads) {
  const std::string what = c.name + "/" + path.name + (transpose ? "/dlhs/" : "/fwd/") +
                           dtype_name(dtype) + "/threads " + std::to_string(threads);
  const Tensor r = run_gmm(c, path, transpose, DType::kF32);
  const GmmInputs x = gmm_inputs(c, path, transpose);
  GmmOptions o = gmm_options(c, path, x, transpose, dtype, threads);
  o.accumulate = true;
  const Tensor out0 = random_tensor(r.shape(), dtype, 32);
  Tensor out = copy_of(out0);
  EXPECT_TRUE(kernels::force_bf16_microkernel(path.bf16_kernel)) << path.bf16_kernel;
  gmm_into(x.lhs, x.rhs, sizes_tensor(c.sizes), out, o);
  const Tensor once = accumulated(out0, r);
  expect_bitwise_equal(out, once, what + " once");
  gmm_into(x.lhs, x.rhs, sizes_tensor(c.sizes), out, o);
  kernels::force_bf16_microkernel("");
  expect_bitwise_equal(out, accumulated(once, r), what + " twice");
  // Rows outside the local groups: untouched.
  const int64_t first = testing::starts_of(c.sizes)[c.group_offset];
  const int64_t last = testing::starts_of(c.sizes)[c.group_offset + local_of(c)];
  const int64_t row = r.dim(1) * static_cast<int64_t>(dtype_size(dtype));
  const char* got = static_cast<const char*>(out.data());
  const char* start = static_cast<const char*>(out0.data());
  EXPECT_EQ(std::memcmp(got, start, first * row), 0) << what << " rows before the groups";
  EXPECT_EQ(std::memcmp(got + last * row, start + last * row, (c.m - last) * row), 0)
      << what << " rows after the groups";
}

TEST(GmmOutput, GmmAccumulateAddsOnceAndLeavesOtherRows) {
  for (const Case& c : cases()) {
    for (const Path& path : gmm_paths()) {
      if (path.swiglu && c.n % 2 != 0) continue;
      for (bool transpose : {false, true}) {
        for (DType dtype : {DType::kF32, DType::kBF16}) {
          for (int threads : {1, 3}) gmm_accumulate_twice(c, path, transpose, dtype, threads);
        }
      }
    }
  }
}

TEST(GmmOutput, AllEmptyNonEmptyPatternsOfFourGroups) {
  for (int mask = 0; mask < 16; ++mask) {
    Case c{"pattern " + std::to_string(mask), 45, 13, 18, {}, {4, 4, 8}};
    for (int g = 0; g < 4; ++g) c.sizes.push_back(mask & (1 << g) ? 9 + g : 0);
    for (const Path& path : {gmm_paths()[1], gmm_paths()[5], gmm_paths()[0]}) {
      expect_rounded(run_gmm(c, path, false, DType::kBF16), run_gmm(c, path, false, DType::kF32),
                     c.name + "/" + path.name);
    }
    for (const Path& path : {tgmm_paths()[1], tgmm_paths()[3], tgmm_paths()[0]}) {
      expect_rounded(run_tgmm(c, path, DType::kBF16), run_tgmm(c, path, DType::kF32),
                     c.name + "/" + path.name + "/drhs");
      accumulate_twice(c, path, DType::kBF16, 2);
    }
  }
}

TEST(GmmOutput, AllocatingOpsReturnOutDtype) {
  const Case c = cases()[0];
  const Path path = gmm_paths()[1];
  const GmmInputs x = gmm_inputs(c, path, false);
  GmmOptions o = gmm_options(c, path, x, false, DType::kBF16, 2);
  const Tensor out = gmm(x.lhs, x.rhs, sizes_tensor(c.sizes), o);
  EXPECT_EQ(out.dtype(), DType::kBF16);
  expect_rounded(out, run_gmm(c, path, false, DType::kF32), "gmm()");
  const TgmmInputs t = tgmm_inputs(c, path);
  const Tensor drhs =
      tgmm(t.lhs, t.dout, sizes_tensor(c.sizes), tgmm_options(c, path, DType::kBF16, false, 2));
  EXPECT_EQ(drhs.dtype(), DType::kBF16);
  expect_rounded(drhs, run_tgmm(c, path, DType::kF32), "tgmm()");
}

// Quantized passes: the int8 driver (integer dot products), the fp8 paths
// through the decoding kernels, and quantized tgmm with accumulation.
TEST(GmmOutput, QuantizedPassesRoundOnceAndAccumulate) {
  const Case c{"quant", 67, 40, 48, {20, 0, 31, 9}, {8, 8, 16}};
  const Tensor lhs = random_tensor({c.m, c.k}, DType::kF32, 41);
  const Tensor weight = random_tensor({4, c.k, c.n}, DType::kF32, 42);
  const Tensor dout = random_tensor({c.m, c.n}, DType::kF32, 43);
  const Tensor gs = sizes_tensor(c.sizes);
  for (QuantRecipe recipe : {QuantRecipe::kInt8, QuantRecipe::kFp8}) {
    for (KernelVersion kernel : {KernelVersion::kV1, KernelVersion::kV2}) {
      const std::string what = std::string(quant_recipe_name(recipe)) + "/" + kernel_name(kernel);
      QuantGmmOptions q;
      q.recipe = recipe;
      GmmOptions o;
      o.kernel = kernel;
      o.tiles = c.tiles;
      o.threads = 2;
      const Tensor f32 = quantized_gmm(lhs, weight, gs, o, q);
      o.out_dtype = DType::kBF16;
      const Tensor bf16 = quantized_gmm(lhs, weight, gs, o, q);
      expect_rounded(bf16, f32, what + "/fwd");
      // Accumulating into a bf16 out (the int8 driver's output stage too).
      const QuantizedGmmOperands gops = prepare_quantized_gmm(lhs, quantize_weight(weight, recipe,
                                                              q.rhs_scaling), gs, o, q);
      const Tensor gf32 = [&] {
        GmmOptions f = o;
        f.out_dtype = DType::kF32;
        return run_quantized_gmm(gops, gs, f, q);
      }();
      o.accumulate = true;
      const Tensor gout0 = random_tensor({c.m, c.n}, DType::kBF16, 45);
      Tensor gout = copy_of(gout0);
      run_quantized_gmm_into(gops, gs, gout, o, q);
      expect_bitwise_equal(gout, accumulated(gout0, gf32), what + "/fwd accumulate");

      TgmmOptions t;
      t.kernel = kernel;
      t.tiles = c.tiles;
      t.threads = 2;
      const QuantizedTgmmOperands ops = prepare_quantized_tgmm(lhs, dout, gs, t, q);
      const Tensor r = run_quantized_tgmm(ops, gs, t);
      t.out_dtype = DType::kBF16;
      expect_rounded(run_quantized_tgmm(ops, gs, t), r, what + "/drhs");
      t.accumulate = true;
      const Tensor out0 = random_tensor({4, c.k, c.n}, DType::kBF16, 44);
      Tensor out = copy_of(out0);
      run_quantized_tgmm_into(ops, gs, out, t);
      expect_bitwise_equal(out, accumulated(out0, r), what + "/drhs accumulate");
    }
  }
}

// The refusals name the argument and its value, and write nothing.
template <class F>
void expect_refused(F&& call, const std::string& argument, const std::string& text) {
  try {
    call();
    ADD_FAILURE() << "not refused: " << argument;
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), argument) << e.what();
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST(GmmOutput, BadOutputSettingsAreRefusedBeforeAnyWrite) {
  const Case c = cases()[0];
  const Path path = gmm_paths()[1];
  const GmmInputs x = gmm_inputs(c, path, false);
  const Tensor gs = sizes_tensor(c.sizes);
  // out is bf16 but out_dtype says f32, and the other way round.
  GmmOptions o = gmm_options(c, path, x, false, DType::kF32, 2);
  Tensor out = poisoned({c.m, c.n}, DType::kBF16);
  const Tensor before = copy_of(out);
  expect_refused([&] { gmm_into(x.lhs, x.rhs, gs, out, o); }, "out", "bf16");
  expect_bitwise_equal(out, before, "gmm_into refused");
  o.out_dtype = DType::kBF16;
  Tensor out32 = poisoned({c.m, c.n}, DType::kF32);
  expect_refused([&] { gmm_into(x.lhs, x.rhs, gs, out32, o); }, "out",
                 "must match out_dtype = bf16");
  o.out_dtype = DType::kF16;
  expect_refused([&] { gmm(x.lhs, x.rhs, gs, o); }, "out_dtype", "f16");
  Tensor out16 = poisoned({c.m, c.n}, DType::kF16);
  expect_refused([&] { gmm_into(x.lhs, x.rhs, gs, out16, o); }, "out_dtype", "f16");

  const TgmmInputs t = tgmm_inputs(c, path);
  TgmmOptions to = tgmm_options(c, path, DType::kBF16, true, 2);
  Tensor tout = poisoned({local_of(c), c.k, c.n}, DType::kF32);
  const Tensor tbefore = copy_of(tout);
  expect_refused([&] { tgmm_into(t.lhs, t.dout, gs, tout, to); }, "out", "f32");
  expect_bitwise_equal(tout, tbefore, "tgmm_into refused");
  expect_refused([&] { tgmm(t.lhs, t.dout, gs, to); }, "accumulate", "tgmm_into");
  GmmOptions acc = gmm_options(c, path, x, false, DType::kF32, 2);
  acc.accumulate = true;
  expect_refused([&] { gmm(x.lhs, x.rhs, gs, acc); }, "accumulate", "gmm_into");
  to.out_dtype = DType::kI32;
  expect_refused([&] { tgmm(t.lhs, t.dout, gs, to); }, "out_dtype", "i32");
}

}  // namespace
}  // namespace raggemm
