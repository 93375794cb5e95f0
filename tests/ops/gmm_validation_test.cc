// Every rejected input of gmm / tgmm names the argument, and nothing is
// written: the output buffer keeps its sentinel values.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "raggemm/error.h"
#include "support/gmm_case.h"

namespace raggemm {
namespace {

using testing::random_tensor;
using testing::sizes_tensor;

struct GmmInputs {
  Tensor lhs = random_tensor({10, 4}, DType::kF32, 1);
  Tensor rhs = random_tensor({3, 4, 6}, DType::kF32, 2);
  Tensor group_sizes = sizes_tensor({3, 0, 5});
  TensorView lhs_view = lhs.view();
  TensorView rhs_view = rhs.view();
  TensorView gs_view = group_sizes.view();
  Tensor out = Tensor(DType::kF32, {10, 6});
  TensorView out_view = out.view();
  GmmOptions options;
};

struct GmmErrorCase {
  std::string name;
  std::string argument;  // Error::argument() expected
  std::function<void(GmmInputs&)> mutate;
};

Tensor vector_of(DType dtype, Shape shape) { return Tensor(dtype, std::move(shape)); }

std::vector<GmmErrorCase> gmm_error_cases() {
  static Tensor keep_alive[8];
  return {
      {"lhs_rank", "lhs", [](GmmInputs& in) { in.lhs_view.shape = {40}; in.lhs_view.strides = {1}; }},
      {"lhs_dtype", "lhs", [](GmmInputs& in) { in.lhs_view.dtype = DType::kI32; }},
      {"lhs_null", "lhs", [](GmmInputs& in) { in.lhs_view.data = nullptr; }},
      {"lhs_strided", "lhs", [](GmmInputs& in) { in.lhs_view.strides = {8, 1}; }},
      {"lhs_negative_dim", "lhs", [](GmmInputs& in) { in.lhs_view.shape = {-1, 4}; }},
      {"lhs_overflowing_dims", "lhs",
       [](GmmInputs& in) {
         in.lhs_view.shape = {int64_t{1} << 40, int64_t{1} << 40};
         in.lhs_view.strides = {int64_t{1} << 40, 1};
       }},
      {"rhs_rank", "rhs", [](GmmInputs& in) { in.rhs_view.shape = {12, 6}; in.rhs_view.strides = {6, 1}; }},
      {"rhs_k_mismatch", "rhs",
       [](GmmInputs& in) { in.rhs_view.shape = {3, 6, 4}; in.rhs_view.strides = {24, 4, 1}; }},
      {"rhs_k_mismatch_transposed", "rhs", [](GmmInputs& in) { in.options.transpose_rhs = true; }},
      {"rhs_groups_mismatch", "rhs",
       [](GmmInputs& in) { in.rhs_view.shape = {2, 4, 6}; in.rhs_view.strides = {24, 6, 1}; }},
      {"rhs_dtype", "rhs", [](GmmInputs& in) { in.rhs_view.dtype = DType::kI8; }},
      {"group_sizes_dtype", "group_sizes", [](GmmInputs& in) { in.gs_view.dtype = DType::kF32; }},
      {"group_sizes_rank", "group_sizes",
       [](GmmInputs& in) { in.gs_view.shape = {3, 1}; in.gs_view.strides = {1, 1}; }},
      {"group_sizes_empty", "group_sizes",
       [](GmmInputs& in) { in.gs_view.shape = {0}; }},
      {"group_sizes_negative", "group_sizes[1]",
       [](GmmInputs& in) { in.group_sizes.as<int32_t>()[1] = -1; }},
      {"group_sizes_sum_over_m", "group_sizes",
       [](GmmInputs& in) { in.group_sizes.as<int32_t>()[2] = 8; }},
      {"group_sizes_int64_overflow", "group_sizes",
       [](GmmInputs& in) {
         keep_alive[0] = Tensor(DType::kI64, {3});
         keep_alive[0].as<int64_t>()[0] = std::numeric_limits<int64_t>::max();
         keep_alive[0].as<int64_t>()[1] = std::numeric_limits<int64_t>::max();
         in.gs_view = keep_alive[0].view();
       }},
      {"tiles_zero", "tiles", [](GmmInputs& in) { in.options.tiles = {0, 4, 4}; }},
      {"tiles_negative", "tiles", [](GmmInputs& in) { in.options.tiles = {4, -4, 4}; }},
      {"tiles_huge", "tiles", [](GmmInputs& in) { in.options.tiles = {1 << 20, 4, 4}; }},
      {"tiles_block_cap", "tiles", [](GmmInputs& in) { in.options.tiles = {65536, 65536, 4}; }},
      {"threads_negative", "threads", [](GmmInputs& in) { in.options.threads = -2; }},
      {"buffers_zero", "input_buffer_count", [](GmmInputs& in) { in.options.input_buffer_count = 0; }},
      {"buffers_five", "input_buffer_count", [](GmmInputs& in) { in.options.input_buffer_count = 5; }},
      {"v1_with_swiglu", "kernel", [](GmmInputs& in) { in.options.fuse_swiglu = true; }},
      {"swiglu_odd_n", "rhs",
       [](GmmInputs& in) {
         in.options.kernel = KernelVersion::kV2;
         in.options.fuse_swiglu = true;
         in.rhs_view.shape = {3, 4, 5};
         in.rhs_view.strides = {20, 5, 1};
       }},
      {"row_scale_shape", "row_scale",
       [](GmmInputs& in) {
         in.options.kernel = KernelVersion::kV2;
         keep_alive[1] = vector_of(DType::kF32, {9});
         in.options.row_scale = keep_alive[1].view();
       }},
      {"col_scale_shape", "col_scale",
       [](GmmInputs& in) {
         in.options.kernel = KernelVersion::kV2;
         keep_alive[2] = vector_of(DType::kF32, {2, 6});
         in.options.col_scale = keep_alive[2].view();
       }},
      {"col_bias_dtype", "col_bias",
       [](GmmInputs& in) {
         in.options.kernel = KernelVersion::kV2;
         keep_alive[3] = vector_of(DType::kI32, {6});
         in.options.col_bias = keep_alive[3].view();
       }},
      {"group_offset_without_local", "group_offset", [](GmmInputs& in) { in.options.group_offset = 1; }},
      {"local_groups_past_end", "local_groups",
       [](GmmInputs& in) {
         in.options.group_offset = 2;
         in.options.local_groups = 3;
       }},
      {"local_groups_rhs_mismatch", "rhs",
       [](GmmInputs& in) {
         in.options.group_offset = 1;
         in.options.local_groups = 2;
       }},
      {"out_shape", "out", [](GmmInputs& in) { in.out_view.shape = {10, 5}; in.out_view.strides = {5, 1}; }},
      {"out_dtype", "out", [](GmmInputs& in) { in.out_view.dtype = DType::kBF16; }},
  };
}

class GmmValidationTest : public ::testing::TestWithParam<GmmErrorCase> {};

TEST_P(GmmValidationTest, RejectsWithArgumentAndWritesNothing) {
  const GmmErrorCase& c = GetParam();
  GmmInputs in;
  c.mutate(in);
  float* out = in.out.as<float>();
  for (int64_t i = 0; i < in.out.numel(); ++i) out[i] = 12345.0f;
  try {
    gmm_into(in.lhs_view, in.rhs_view, in.gs_view, in.out_view, in.options);
    FAIL() << "accepted " << c.name;
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), c.argument) << e.what();
    EXPECT_NE(std::string(e.what()).find(c.argument + "="), std::string::npos) << e.what();
  }
  for (int64_t i = 0; i < in.out.numel(); ++i) ASSERT_EQ(out[i], 12345.0f) << "written at " << i;
  // The allocating entry point rejects the same inputs (except out-specific ones).
  if (c.argument != "out") {
    EXPECT_THROW(gmm(in.lhs_view, in.rhs_view, in.gs_view, in.options), Error);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, GmmValidationTest, ::testing::ValuesIn(gmm_error_cases()),
                         [](const auto& info) { return info.param.name; });

struct TgmmErrorCase {
  std::string name;
  std::string argument;
  std::function<void(TensorView& lhs, TensorView& dout, TensorView& gs, TensorView& out,
                     TgmmOptions& o)>
      mutate;
};

TEST(TgmmValidation, RejectsWithArgumentAndWritesNothing) {
  const std::vector<TgmmErrorCase> cases = {
      {"lhs_dtype", "lhs", [](auto& l, auto&, auto&, auto&, auto&) { l.dtype = DType::kI64; }},
      {"dout_rows", "dout",
       [](auto&, auto& d, auto&, auto&, auto&) { d.shape = {9, 6}; }},
      {"dout_rank", "dout",
       [](auto&, auto& d, auto&, auto&, auto&) { d.shape = {60}; d.strides = {1}; }},
      {"sizes_negative", "group_sizes[0]",
       [](auto&, auto&, auto& g, auto&, auto&) { static_cast<int32_t*>(g.data)[0] = -3; }},
      {"sizes_sum", "group_sizes",
       [](auto&, auto&, auto& g, auto&, auto&) { static_cast<int32_t*>(g.data)[0] = 11; }},
      {"tiles", "tiles", [](auto&, auto&, auto&, auto&, auto& o) { o.tiles = {4, 0, 4}; }},
      {"buffers", "input_buffer_count",
       [](auto&, auto&, auto&, auto&, auto& o) { o.input_buffer_count = 7; }},
      {"threads", "threads", [](auto&, auto&, auto&, auto&, auto& o) { o.threads = -1; }},
      {"offset_range", "group_offset",
       [](auto&, auto&, auto&, auto&, auto& o) { o.group_offset = 4; o.local_groups = 0; }},
      {"local_range", "local_groups",
       [](auto&, auto&, auto&, auto&, auto& o) { o.group_offset = 1; o.local_groups = 3; }},
      {"out_groups", "out",
       [](auto&, auto&, auto&, auto& out, auto&) { out.shape = {2, 4, 6}; out.strides = {24, 6, 1}; }},
  };
  for (const TgmmErrorCase& c : cases) {
    SCOPED_TRACE(c.name);
    Tensor lhs = random_tensor({10, 4}, DType::kF32, 1);
    Tensor dout = random_tensor({10, 6}, DType::kF32, 2);
    Tensor gs = sizes_tensor({3, 0, 5});
    Tensor out(DType::kF32, {3, 4, 6});
    for (int64_t i = 0; i < out.numel(); ++i) out.as<float>()[i] = -7.0f;
    TensorView lv = lhs.view(), dv = dout.view(), gv = gs.view(), ov = out.view();
    TgmmOptions o;
    c.mutate(lv, dv, gv, ov, o);
    try {
      tgmm_into(lv, dv, gv, ov, o);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.argument(), c.argument) << e.what();
    }
    for (int64_t i = 0; i < out.numel(); ++i) ASSERT_EQ(out.as<float>()[i], -7.0f);
  }
}

TEST(KernelNames, ParseAndPrint) {
  EXPECT_EQ(parse_kernel("v1", "kernel"), KernelVersion::kV1);
  EXPECT_EQ(parse_kernel("v2", "kernel"), KernelVersion::kV2);
  EXPECT_STREQ(kernel_name(KernelVersion::kV2), "v2");
  try {
    parse_kernel("v3", "--kernel");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "--kernel");
    EXPECT_EQ(e.value(), "v3");
  }
}

}  // namespace
}  // namespace raggemm
