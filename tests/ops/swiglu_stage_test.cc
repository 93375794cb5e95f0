// The gmm's SwiGLU stage (GmmOptions::swiglu_forward_stage and
// swiglu_backward_stage, include/raggemm/swiglu_stage.h) against the
// separate pass it replaces: the same call without the stage, then the
// layer's SwiGLU loops (kernels/glue_simd.h) over the rows the local groups
// cover, zeros elsewhere. Bit for bit, on every path that writes a gmm
// output: v1 and v2 on f32, v2 with its scales and bias, the bf16 dot
// drivers (SIMD and scalar), the widening path, every f32 microkernel target,
// the quantized recipes (int8 on integer dot products, fp8), the reference
// backend; in the forward and the dlhs pass, 1 and 2 threads; over
// non-dividing tiles, sum(group_sizes) < M, expert-parallel group ranges and
// every empty/non-empty pattern of 3 groups. The stage's inputs and the gmm
// output are left as the plain call leaves them; bad settings are refused
// before anything is written.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "kernels/glue_simd.h"
#include "kernels/microkernel_registry.h"
#include "raggemm/error.h"
#include "raggemm/quant.h"
#include "support/every_target.h"
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
  std::vector<Case> all = {
      {"non_dividing_multi_slice", 67, 37, 46, {20, 0, 31, 9}, {8, 8, 16}},
      {"sum_less_than_m", 50, 17, 24, {10, 0, 15}, {8, 4, 8}},
      {"default_tiles", 120, 70, 62, {50, 0, 40, 13}, {0, 0, 0}},
      {"group_range", 60, 19, 22, {12, 9, 0, 20, 7}, {8, 8, 8}, 1, 3},
      {"all_empty", 12, 6, 10, {0, 0, 0}, {4, 4, 4}},
  };
  for (int pattern = 0; pattern < 8; ++pattern) {  // every empty/non-empty pattern of 3 groups
    std::vector<int64_t> sizes;
    for (int g = 0; g < 3; ++g) sizes.push_back((pattern >> g) & 1 ? 5 + 4 * g : 0);
    all.push_back({"pattern_" + std::to_string(pattern), 30, 13, 18, sizes, {8, 8, 8}});
  }
  return all;
}

struct Path {
  std::string name;
  DType input = DType::kF32;
  KernelVersion kernel = KernelVersion::kV2;
  std::string bf16_kernel;  // force_bf16_microkernel: "" auto, "SCALAR", "WIDEN"
  bool epilogue = false;    // v2: row/col scales and a bias before the stage
  std::optional<QuantRecipe> recipe;
  std::string backend;
};

// A path by name and the fields it changes from v2 on f32.
Path path(std::string name, DType input, KernelVersion kernel) {
  Path p;
  p.name = std::move(name);
  p.input = input;
  p.kernel = kernel;
  return p;
}

std::vector<Path> paths() {
  const DType f32 = DType::kF32, bf16 = DType::kBF16;
  const KernelVersion v1 = KernelVersion::kV1, v2 = KernelVersion::kV2;
  std::vector<Path> all = {path("v1_f32", f32, v1),        path("v2_f32", f32, v2),
                           path("v2_epilogue", f32, v2),   path("v1_bf16", bf16, v1),
                           path("v2_bf16_dot", bf16, v2),  path("v2_bf16_dot_scalar", bf16, v2),
                           path("v2_bf16_widened", bf16, v2), path("v2_fp8", f32, v2),
                           path("v1_fp8", f32, v1),        path("v2_int8", f32, v2),
                           path("reference", f32, v2)};
  all[2].epilogue = true;
  all[5].bf16_kernel = "SCALAR";
  all[6].bf16_kernel = "WIDEN";
  all[7].recipe = all[8].recipe = QuantRecipe::kFp8;
  all[9].recipe = QuantRecipe::kInt8;
  all[10].backend = "reference";
  return all;
}

int64_t local_of(const Case& c) {
  return c.local_groups < 0 ? static_cast<int64_t>(c.sizes.size()) : c.local_groups;
}

Tensor copy_of(const Tensor& t) {
  Tensor copy(t.dtype(), t.shape());
  std::memcpy(copy.data(), t.data(), t.nbytes());
  return copy;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.numel() == b.numel() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

struct Inputs {
  Tensor lhs, rhs, row_scale, col_scale, col_bias;
  Tensor gate, up;  // the stage's inputs, [M, N_out]
};

Inputs inputs(const Case& c, const Path& path, bool transpose) {
  const int64_t g = local_of(c);
  const int64_t out_cols = transpose ? c.k : c.n;
  const int64_t contracted = transpose ? c.n : c.k;
  Inputs x;
  x.lhs = random_tensor({c.m, contracted}, path.input, 11);
  x.rhs = random_tensor(Shape{g, c.k, c.n}, path.input, 12);
  x.row_scale = random_tensor({c.m}, DType::kF32, 13);
  x.col_scale = random_tensor({out_cols}, DType::kF32, 14);
  x.col_bias = random_tensor({g, out_cols}, DType::kF32, 15);
  x.gate = random_tensor({c.m, out_cols}, DType::kF32, 16);
  x.up = random_tensor({c.m, out_cols}, DType::kF32, 17);
  return x;
}

GmmOptions options(const Case& c, const Path& path, const Inputs& x, bool transpose,
                   int threads) {
  GmmOptions o;
  o.transpose_rhs = transpose;
  o.tiles = c.tiles;
  o.kernel = path.kernel;
  o.threads = threads;
  o.group_offset = c.group_offset;
  o.local_groups = c.local_groups;
  o.backend = path.backend;
  if (path.epilogue) {
    o.row_scale = x.row_scale.view();
    o.col_scale = x.col_scale.view();
    o.col_bias = x.col_bias.view();
  }
  if (path.recipe) o.quantize = QuantGmmOptions{*path.recipe};
  return o;
}

struct Outputs {
  Tensor out, first, second;  // forward: act in first; backward: dgate, dup
};

// The call with the stage (`stage` true) or without it followed by the
// separate pass over the covered rows.
Outputs run(const Case& c, const Path& path, bool transpose, bool backward, bool stage,
            int threads) {
  const Inputs x = inputs(c, path, transpose);
  GmmOptions o = options(c, path, x, transpose, threads);
  const int64_t out_cols = transpose ? c.k : c.n;
  Outputs y{poisoned({c.m, out_cols}), poisoned({c.m, out_cols}), poisoned({c.m, out_cols})};
  const Tensor gate_before = copy_of(x.gate), up_before = copy_of(x.up);
  if (stage && backward) {
    o.swiglu_backward_stage =
        SwigluBackwardStage{x.gate.view(), x.up.view(), y.first.view(), y.second.view()};
  } else if (stage) {
    o.swiglu_forward_stage = SwigluForwardStage{x.gate.view(), y.first.view()};
  }
  EXPECT_TRUE(kernels::force_bf16_microkernel(path.bf16_kernel)) << path.bf16_kernel;
  gmm_into(x.lhs, x.rhs, sizes_tensor(c.sizes), y.out, o);
  kernels::force_bf16_microkernel("");
  EXPECT_TRUE(same_bits(x.gate, gate_before) && same_bits(x.up, up_before)) << "inputs written";
  if (stage) return y;
  const std::vector<int64_t> starts = testing::starts_of(c.sizes);
  const int64_t first = starts[c.group_offset], last = starts[c.group_offset + local_of(c)];
  std::fill_n(y.first.as<float>(), y.first.numel(), 0.0f);
  std::fill_n(y.second.as<float>(), y.second.numel(), 0.0f);
  const int64_t at = first * out_cols, count = (last - first) * out_cols;
  if (backward) {
    kernels::swiglu_backward_f32(x.gate.as<float>() + at, x.up.as<float>() + at,
                                 y.out.as<float>() + at, count, y.first.as<float>() + at,
                                 y.second.as<float>() + at);
  } else {
    kernels::swiglu_forward_f32(x.gate.as<float>() + at, y.out.as<float>() + at, count,
                                y.first.as<float>() + at);
  }
  return y;
}

void expect_stage_matches(const Case& c, const Path& path, int threads) {
  for (const bool transpose : {false, true}) {
    for (const bool backward : {false, true}) {
      SCOPED_TRACE(c.name + " " + path.name + (transpose ? " dlhs" : " fwd") +
                   (backward ? " backward" : " forward") + " threads " + std::to_string(threads));
      const Outputs fused = run(c, path, transpose, backward, true, threads);
      const Outputs separate = run(c, path, transpose, backward, false, threads);
      EXPECT_TRUE(same_bits(fused.out, separate.out)) << "gmm output";
      EXPECT_TRUE(same_bits(fused.first, separate.first)) << (backward ? "dgate" : "act");
      if (backward) {
        EXPECT_TRUE(same_bits(fused.second, separate.second)) << "dup";
      }
    }
  }
}

TEST(SwigluStage, GivesTheSeparatePassBitsOnEveryPath) {
  for (const Path& path : paths()) {
    for (const Case& c : cases()) {
      for (const int threads : {1, 2}) expect_stage_matches(c, path, threads);
    }
  }
}

TEST(SwigluStage, GivesTheSeparatePassBitsOnEveryF32Target) {
  testing::on_every_target([] {
    for (const Case& c : cases()) expect_stage_matches(c, paths()[1], 2);
  });
}

// The stage's arguments, refused by name before the output or the stage's
// outputs are touched.
TEST(SwigluStage, RefusesBadSettingsBeforeWriting) {
  const Case c{"small", 20, 8, 12, {7, 0, 9}, {8, 8, 8}};
  const Path path = paths()[1];
  const Inputs x = inputs(c, path, false);
  auto expect_refused = [&](const std::string& argument, auto edit) {
    SCOPED_TRACE(argument);
    Tensor out = poisoned({c.m, c.n}), act = poisoned({c.m, c.n}), dup = poisoned({c.m, c.n});
    const Tensor out_before = copy_of(out), act_before = copy_of(act);
    GmmOptions o = options(c, path, x, false, 2);
    o.swiglu_forward_stage = SwigluForwardStage{x.gate.view(), act.view()};
    TensorView out_view = out.view();
    edit(o, out_view, act, dup);
    try {
      gmm_into(x.lhs, x.rhs, sizes_tensor(c.sizes), out_view, o);
      ADD_FAILURE() << "not refused";
    } catch (const Error& e) {
      EXPECT_EQ(e.argument(), argument) << e.what();
    }
    EXPECT_TRUE(same_bits(out, out_before)) << "out written";
    EXPECT_TRUE(same_bits(act, act_before)) << "act written";
  };
  using O = GmmOptions;
  expect_refused("swiglu_backward_stage", [&](O& o, TensorView&, Tensor& act, Tensor& d) {
    o.swiglu_backward_stage = SwigluBackwardStage{x.gate.view(), x.up.view(), act.view(), d.view()};
  });
  expect_refused("swiglu_forward_stage", [&](O& o, TensorView& out, Tensor&, Tensor&) {
    o.fuse_swiglu = true;
    out.shape = {c.m, c.n / 2};  // the fused SwiGLU's output
    out.strides = row_major_strides(out.shape);
  });
  expect_refused("accumulate", [&](O& o, TensorView&, Tensor&, Tensor&) { o.accumulate = true; });
  expect_refused("swiglu_forward_stage.gate", [&](O& o, TensorView&, Tensor& act, Tensor&) {
    o.swiglu_forward_stage->gate = x.up.view();
    o.swiglu_forward_stage->gate.shape = {c.m - 1, c.n};
    (void)act;
  });
  expect_refused("swiglu_forward_stage.act", [&](O& o, TensorView&, Tensor&, Tensor&) {
    o.swiglu_forward_stage->act.dtype = DType::kBF16;
  });
  expect_refused("swiglu_forward_stage.act", [&](O& o, TensorView& out, Tensor&, Tensor&) {
    o.swiglu_forward_stage->act = out;  // the stage's output over the gmm's
  });
  expect_refused("swiglu_forward_stage.act", [&](O& o, TensorView&, Tensor&, Tensor&) {
    o.swiglu_forward_stage->act = x.gate.view();  // over its own input
  });
  expect_refused("swiglu_backward_stage.dgate", [&](O& o, TensorView&, Tensor& act, Tensor&) {
    o.swiglu_forward_stage.reset();
    o.swiglu_backward_stage =
        SwigluBackwardStage{x.gate.view(), x.up.view(), act.view(), act.view()};
  });
}

// out_dtype bf16 with the stage: refused by name (the stage reads f32).
TEST(SwigluStage, RefusesABf16Output) {
  const Case c{"small", 20, 8, 12, {7, 0, 9}, {8, 8, 8}};
  const Inputs x = inputs(c, paths()[1], false);
  Tensor out(DType::kBF16, {c.m, c.n}), act = poisoned({c.m, c.n});
  const Tensor act_before = copy_of(act);
  GmmOptions o = options(c, paths()[1], x, false, 2);
  o.out_dtype = DType::kBF16;
  o.swiglu_forward_stage = SwigluForwardStage{x.gate.view(), act.view()};
  try {
    gmm_into(x.lhs, x.rhs, sizes_tensor(c.sizes), out, o);
    ADD_FAILURE() << "not refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "out_dtype") << e.what();
  }
  EXPECT_TRUE(same_bits(act, act_before));
}

}  // namespace
}  // namespace raggemm
