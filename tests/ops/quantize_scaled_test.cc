// quantize_scaled (ops/quantize_scaled.h) against its definition:
// quantize() of the scaled f32 copy, codes, scales and errors bit for bit.
#include "ops/quantize_scaled.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "raggemm/dtype.h"
#include "raggemm/error.h"

namespace raggemm {
namespace {

// How the rows of a case are scaled.
enum class Pattern {
  kNone,          // no row scaled (factors() returns null everywhere)
  kRowConstant,   // every row by one factor, filled into scratch (tgmm's fold)
  kColumns,       // every row by a vector of column factors (dlhs's fold)
  kMixed,         // every third row unscaled, the others by column factors
  kNoCallback,    // an empty RowFactors
};

struct Case {
  int64_t rows, columns;
  DType input_dtype;
  QuantType type;
  int kept_axis;
  Pattern pattern;
  int threads;
};

std::string describe(const Case& c) {
  return std::to_string(c.rows) + "x" + std::to_string(c.columns) + " " +
         dtype_name(c.input_dtype) + " type " + std::to_string(static_cast<int>(c.type)) +
         " kept_axis " + std::to_string(c.kept_axis) + " pattern " +
         std::to_string(static_cast<int>(c.pattern)) + " threads " + std::to_string(c.threads);
}

// Input values, with whole zero rows and columns, spread over several
// decades so that scales differ per row and per column.
std::vector<float> values_of(const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> decade(-6, 6);
  std::vector<float> v(static_cast<size_t>(c.rows * c.columns));
  for (int64_t r = 0; r < c.rows; ++r) {
    const float row_scale = std::ldexp(1.0f, decade(rng));
    for (int64_t j = 0; j < c.columns; ++j) {
      const bool zero = (c.rows > 3 && r % 7 == 3) || (c.columns > 3 && j % 5 == 2);
      v[r * c.columns + j] = zero ? 0.0f : normal(rng) * row_scale;
    }
  }
  return v;
}

Tensor tensor_of(const std::vector<float>& v, const Case& c) {
  Tensor t(c.input_dtype, {c.rows, c.columns});
  for (size_t i = 0; i < v.size(); ++i) {
    if (c.input_dtype == DType::kF32) {
      t.as<float>()[i] = v[i];
    } else {
      t.as<uint16_t>()[i] = f32_to_bf16(v[i]);
    }
  }
  return t;
}

float as_f32(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kF32 ? t.as<const float>()[i] : bf16_to_f32(t.as<const uint16_t>()[i]);
}

struct Factors {
  std::vector<float> columns;  // per column, positive, with a zero
  std::vector<float> per_row;  // one per row, with a zero
  ops::RowFactors fn;
};

Factors factors_of(const Case& c, uint32_t seed, float magnitude = 1.0f) {
  Factors f;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(0.01f, 4.0f);
  for (int64_t j = 0; j < c.columns; ++j) f.columns.push_back(uniform(rng) * magnitude);
  for (int64_t r = 0; r < c.rows; ++r) f.per_row.push_back(uniform(rng) * magnitude);
  if (c.columns > 1) f.columns[1] = 0.0f;
  if (c.rows > 1) f.per_row[1] = 0.0f;
  const Pattern pattern = c.pattern;
  const int64_t columns = c.columns;
  if (pattern == Pattern::kNoCallback) return f;
  const std::vector<float>* cols = &f.columns;
  const std::vector<float>* rows = &f.per_row;
  f.fn = [pattern, columns, cols, rows](int64_t r, float* scratch) -> const float* {
    switch (pattern) {
      case Pattern::kNone:
        return nullptr;
      case Pattern::kRowConstant:
        for (int64_t j = 0; j < columns; ++j) scratch[j] = (*rows)[r];
        return scratch;
      case Pattern::kColumns:
        return cols->data();
      case Pattern::kMixed:
        return r % 3 == 0 ? nullptr : cols->data();
      default:
        return nullptr;
    }
  };
  return f;
}

// The definition: the scaled f32 copy, quantized by quantize().
Tensor scaled_copy(const Tensor& input, const Case& c, const Factors& f) {
  Tensor copy(DType::kF32, {c.rows, c.columns});
  std::vector<float> scratch(static_cast<size_t>(c.columns));
  for (int64_t r = 0; r < c.rows; ++r) {
    const float* factors = f.fn ? f.fn(r, scratch.data()) : nullptr;
    for (int64_t j = 0; j < c.columns; ++j) {
      const float x = as_f32(input, r * c.columns + j);
      copy.as<float>()[r * c.columns + j] = factors ? x * factors[j] : x;
    }
  }
  return copy;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// Runs both; equal codes and scales, or the same error message.
void expect_as_defined(const Case& c, const Tensor& input, const Factors& f) {
  SCOPED_TRACE(describe(c));
  const Granularity granularity = Granularity::channel({c.kept_axis});
  std::optional<QuantizedTensor> want, got;
  std::string want_error, got_error;
  try {
    want = quantize(scaled_copy(input, c, f), c.type, granularity, std::nullopt, 1);
  } catch (const Error& e) {
    want_error = e.what();
  }
  try {
    got = ops::quantize_scaled(input, c.type, c.kept_axis, f.fn, c.threads);
  } catch (const Error& e) {
    got_error = e.what();
  }
  ASSERT_EQ(got_error, want_error);
  if (!want) return;
  ASSERT_TRUE(got.has_value());
  EXPECT_TRUE(same_bytes(got->values, want->values));
  EXPECT_TRUE(same_bytes(got->scales, want->scales));
  EXPECT_EQ(got->type, want->type);
  EXPECT_EQ(got->granularity.to_string(), want->granularity.to_string());
}

TEST(QuantizeScaled, MatchesQuantizeOfTheScaledCopy) {
  const std::vector<std::pair<int64_t, int64_t>> shapes = {
      {37, 19}, {1, 1}, {5, 1}, {1, 5}, {0, 7}, {7, 0}, {300, 1024}, {129, 257}};
  const QuantType types[] = {QuantType::kFp8E4M3, QuantType::kFp8E5M2, QuantType::kInt8};
  const Pattern patterns[] = {Pattern::kNone, Pattern::kRowConstant, Pattern::kColumns,
                              Pattern::kMixed, Pattern::kNoCallback};
  uint32_t seed = 1;
  for (const auto& [rows, columns] : shapes) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      for (QuantType type : types) {
        for (int kept_axis : {0, 1}) {
          for (Pattern pattern : patterns) {
            for (int threads : {1, 3}) {
              const Case c{rows, columns, dtype, type, kept_axis, pattern, threads};
              const Tensor input = tensor_of(values_of(c, ++seed), c);
              expect_as_defined(c, input, factors_of(c, ++seed));
            }
          }
        }
      }
    }
  }
}

// A NaN or infinity in the input, or a product that overflows to infinity,
// is refused with the first such element of the scaled matrix named, as
// quantize() names it; nothing is returned.
TEST(QuantizeScaled, NonFiniteElementsAreNamedAsQuantizeNamesThem) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int kept_axis : {0, 1}) {
    for (int threads : {1, 2}) {
      for (int64_t bad : {int64_t{0}, int64_t{5 * 64 + 3}, int64_t{199 * 64 + 63}}) {
        for (float poison : {inf, -inf, nan}) {
          const Case c{200, 64, DType::kF32, QuantType::kFp8E4M3, kept_axis, Pattern::kColumns,
                       threads};
          std::vector<float> v = values_of(c, 7);
          v[static_cast<size_t>(bad)] = poison;
          v[static_cast<size_t>(150 * 64 + 9)] = nan;  // a later one is not the one named
          expect_as_defined(c, tensor_of(v, c), factors_of(c, 8));
        }
      }
      // Finite inputs whose products overflow (factors near the f32 max).
      const Case c{50, 33, DType::kF32, QuantType::kInt8, kept_axis, Pattern::kRowConstant,
                   threads};
      expect_as_defined(c, tensor_of(values_of(c, 9), c), factors_of(c, 10, 1e37f));
    }
  }
}

TEST(QuantizeScaled, RefusesWhatItCannotRead) {
  const Tensor rank3(DType::kF32, {2, 3, 4});
  EXPECT_THROW(ops::quantize_scaled(rank3, QuantType::kFp8E4M3, 0, nullptr, 1), Error);
  const Tensor ints(DType::kI32, {2, 3});
  EXPECT_THROW(ops::quantize_scaled(ints, QuantType::kFp8E4M3, 0, nullptr, 1), Error);
  const Tensor matrix(DType::kF32, {2, 3});
  EXPECT_THROW(ops::quantize_scaled(matrix, QuantType::kFp8E4M3, 2, nullptr, 1), Error);
  EXPECT_THROW(ops::quantize_scaled(matrix, QuantType::kFp8E4M3, 0, nullptr, -1), Error);
  TensorView columns_strided = matrix.view();
  columns_strided.shape = {2, 2};
  columns_strided.strides = {3, 2};
  try {
    ops::quantize_scaled(columns_strided, QuantType::kFp8E4M3, 0, nullptr, 1);
    FAIL() << "a strided row was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("contiguous"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace raggemm
