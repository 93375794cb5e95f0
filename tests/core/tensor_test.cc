// TensorView and Tensor: row-major strides, contiguity, 64-byte alignment,
// zero initialization, and the overflow and negative-dim errors.
#include "raggemm/tensor.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>

#include "raggemm/error.h"

namespace raggemm {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

TEST(ShapeTest, StridesAndNumel) {
  struct Case {
    Shape shape;
    Shape strides;
    int64_t numel;
    const char* text;
  };
  const Case cases[] = {
      {{}, {}, 1, "[]"},
      {{5}, {1}, 5, "[5]"},
      {{2, 3}, {3, 1}, 6, "[2,3]"},
      {{2, 3, 4}, {12, 4, 1}, 24, "[2,3,4]"},
      {{4, 0, 3}, {0, 3, 1}, 0, "[4,0,3]"},
      {{1, 1, 7, 2}, {14, 14, 2, 1}, 14, "[1,1,7,2]"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    EXPECT_EQ(row_major_strides(c.shape), c.strides);
    EXPECT_EQ(checked_numel(c.shape, "shape"), c.numel);
    EXPECT_EQ(shape_string(c.shape), c.text);
    TensorView view(DType::kF32, c.shape, static_cast<void*>(nullptr));
    EXPECT_EQ(view.strides, c.strides);
    EXPECT_EQ(view.numel(), c.numel);
    EXPECT_EQ(view.rank(), static_cast<int>(c.shape.size()));
    EXPECT_TRUE(view.is_contiguous());
  }
}

TEST(ShapeTest, CheckedNumelRejectsNegativeAndOverflow) {
  struct Case {
    Shape shape;
    const char* why;
  };
  const Case cases[] = {
      {{-1}, "negative dim"},
      {{3, -2}, "negative inner dim"},
      {{int64_t{1} << 32, int64_t{1} << 31}, "2^63 overflows"},
      {{kMax, 2}, "max times two"},
      {{3037000500, 3037000500}, "just past sqrt(max)^2"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.why);
    try {
      checked_numel(c.shape, "--lhs");
      FAIL() << "expected an Error";
    } catch (const Error& error) {
      EXPECT_EQ(error.argument(), "--lhs");
      EXPECT_EQ(error.value(), shape_string(c.shape));
    }
  }
  EXPECT_EQ(checked_numel({kMax}, "x"), kMax);
  EXPECT_EQ(checked_numel({3037000499, 3037000499}, "x"), int64_t{3037000499} * 3037000499);
}

TEST(TensorViewTest, ContiguityFollowsStrides) {
  float storage[24] = {};
  TensorView view(DType::kF32, Shape{2, 3, 4}, storage);
  EXPECT_TRUE(view.is_contiguous());
  EXPECT_EQ(view.nbytes(), 24 * sizeof(float));

  TensorView transposed = view;  // [4,3,2] over the same memory
  transposed.shape = {4, 3, 2};
  transposed.strides = {1, 4, 12};
  EXPECT_FALSE(transposed.is_contiguous());

  TensorView column = view;  // every other row: a strided slice
  column.shape = {2, 3, 2};
  column.strides = {12, 4, 2};
  EXPECT_FALSE(column.is_contiguous());

  TensorView size_one = view;  // a size-1 dim's stride never matters
  size_one.shape = {1, 3, 4};
  size_one.strides = {999, 4, 1};
  EXPECT_TRUE(size_one.is_contiguous());

  TensorView bad_rank = view;
  bad_rank.strides = {4, 1};
  EXPECT_FALSE(bad_rank.is_contiguous());
}

TEST(TensorTest, AlignedZeroedAndShaped) {
  struct Case {
    DType dtype;
    Shape shape;
  };
  const Case cases[] = {
      {DType::kF32, {}},        {DType::kF32, {1}},          {DType::kBF16, {3, 5}},
      {DType::kF16, {7, 1, 3}}, {DType::kI64, {2, 2, 2, 2}}, {DType::kU8, {65}},
      {DType::kI8, {0, 9}},     {DType::kI32, {129, 3}},     {DType::kF8E4M3, {1000}},
  };
  for (int round = 0; round < 2; ++round) {  // the second round reuses freed memory
    for (const Case& c : cases) {
      SCOPED_TRACE(shape_string(c.shape) + dtype_name(c.dtype));
      Tensor tensor(c.dtype, c.shape);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(tensor.data()) % 64, 0u);
      EXPECT_EQ(tensor.dtype(), c.dtype);
      EXPECT_EQ(tensor.shape(), c.shape);
      EXPECT_EQ(tensor.view().strides, row_major_strides(c.shape));
      EXPECT_EQ(tensor.nbytes(),
                static_cast<size_t>(checked_numel(c.shape, "s")) * dtype_size(c.dtype));
      const uint8_t* bytes = tensor.as<uint8_t>();
      for (size_t i = 0; i < tensor.nbytes(); ++i) ASSERT_EQ(bytes[i], 0) << "byte " << i;
      std::memset(tensor.data(), 0xab, tensor.nbytes());  // dirty it for round two
    }
  }
}

TEST(TensorTest, CopiesShareStorage) {
  Tensor a(DType::kI32, {4});
  Tensor b = a;
  b.as<int32_t>()[2] = 42;
  EXPECT_EQ(a.as<int32_t>()[2], 42);
  EXPECT_EQ(a.data(), b.data());
  const TensorView& view = a;
  EXPECT_EQ(view.data, a.data());
}

TEST(TensorTest, RejectsNegativeAndOversizedShapes) {
  struct Case {
    DType dtype;
    Shape shape;
    const char* why;
  };
  const Case cases[] = {
      {DType::kF32, {-1}, "negative"},
      {DType::kF32, {2, -3}, "negative inner"},
      {DType::kF32, {int64_t{1} << 40, int64_t{1} << 40}, "element count overflows"},
      {DType::kF32, {int64_t{1} << 61}, "bytes overflow size_t"},
      {DType::kI64, {int64_t{1} << 60}, "bytes overflow for 8-byte elements"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.why);
    try {
      Tensor tensor(c.dtype, c.shape);
      FAIL() << "expected an Error";
    } catch (const Error& error) {
      EXPECT_EQ(error.argument(), "shape");
      EXPECT_EQ(error.value(), shape_string(c.shape));
    }
  }
}

}  // namespace
}  // namespace raggemm
