// quantize / dequantize and the SPEC grammar (include/raggemm/quant.h).
#include "raggemm/quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "raggemm/error.h"
#include "raggemm/fp8.h"

namespace raggemm {
namespace {

Tensor random_normal(const Shape& shape, uint32_t seed, float stddev = 1.0f) {
  Tensor t(DType::kF32, shape);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, stddev);
  for (int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] = normal(rng);
  return t;
}

// --- SPEC grammar ----------------------------------------------------------

struct SpecCase {
  const char* spec;
  std::vector<int> axes;
  int block_axis;
  int64_t block_size;
};

TEST(Granularity, ParsesTheGrammar) {
  const SpecCase cases[] = {
      {"per_tensor", {}, -1, 0},
      {"channel:0", {0}, -1, 0},
      {"channel:0,2", {0, 2}, -1, 0},
      {"channel:2,0", {0, 2}, -1, 0},
      {"channel:0,2+block:1:128", {0, 2}, 1, 128},
      {"channel:0+block:1:512", {0}, 1, 512},
      {"channel:1+block:0:32", {1}, 0, 32},
      {"channel:0+block:1:100", {0}, 1, 100},
  };
  for (const SpecCase& c : cases) {
    Granularity g = parse_granularity(c.spec, "granularity");
    EXPECT_EQ(g.channel_axes, c.axes) << c.spec;
    EXPECT_EQ(g.block_axis, c.block_axis) << c.spec;
    EXPECT_EQ(g.block_size, c.block_size) << c.spec;
    EXPECT_EQ(parse_granularity(g.to_string(), "granularity"), g) << c.spec;
  }
}

TEST(Granularity, RefusesBadSpecsNamingTheArgument) {
  const char* bad[] = {"",
                       "per-tensor",
                       "PER_TENSOR",
                       "per_tensor+block:1:128",
                       "channel",
                       "channel:",
                       "channel:a",
                       "channel:-1",
                       "channel:0,",
                       "channel:,0",
                       "channel:0,0",
                       "channel:1.5",
                       "channel:64",
                       "channel:0+",
                       "channel:0+block",
                       "channel:0+block:1",
                       "channel:0+block:1:",
                       "channel:0+block:1:16",
                       "channel:0+block:1:31",
                       "channel:0+block:1:513",
                       "channel:0+block:1:1024",
                       "channel:0+block:0:128",
                       "channel:0+blocks:1:128",
                       "channel:0+block:1:128+block:2:64",
                       "channel:0+block:1:128:4",
                       " channel:0",
                       "channel:0 "};
  for (const char* spec : bad) {
    try {
      parse_granularity(spec, "--granularity");
      ADD_FAILURE() << "accepted '" << spec << "'";
    } catch (const Error& error) {
      EXPECT_EQ(error.argument(), "--granularity") << spec;
      EXPECT_EQ(error.value(), spec);
    }
  }
}

struct ShapeCase {
  const char* spec;
  Shape input;
  Shape scales;
};

TEST(Granularity, ScaleShapes) {
  const ShapeCase cases[] = {
      {"per_tensor", {7, 5}, {1, 1}},
      {"per_tensor", {2, 3, 4}, {1, 1, 1}},
      {"channel:0", {7, 5}, {7, 1}},
      {"channel:1", {7, 5}, {1, 5}},
      {"channel:0,2", {4, 300, 6}, {4, 1, 6}},
      {"channel:0,2+block:1:128", {4, 300, 6}, {4, 3, 6}},
      {"channel:0,2+block:1:128", {4, 256, 6}, {4, 2, 6}},
      {"channel:0+block:1:512", {9, 1024}, {9, 2}},
      {"channel:0+block:1:512", {9, 0}, {9, 0}},
  };
  for (const ShapeCase& c : cases) {
    EXPECT_EQ(parse_granularity(c.spec, "g").scale_shape(c.input, "g"), c.scales) << c.spec;
  }
  EXPECT_THROW(parse_granularity("channel:2", "g").scale_shape({3, 4}, "g"), Error);
  EXPECT_THROW(parse_granularity("channel:0+block:2:64", "g").scale_shape({3, 4}, "g"), Error);
}

TEST(Granularity, InferredFromScaleShapes) {
  const ShapeCase cases[] = {
      {"per_tensor", {7, 5}, {1, 1}},
      {"channel:0", {7, 5}, {7, 1}},
      {"channel:0,2", {4, 300, 6}, {4, 1, 6}},
      {"channel:0,2+block:1:128", {4, 300, 6}, {4, 3, 6}},
      {"channel:0,2+block:1:32", {4, 1000, 6}, {4, 32, 6}},
      {"channel:0,2+block:1:512", {4, 1024, 6}, {4, 2, 6}},
      {"channel:1+block:0:33", {1000, 3}, {31, 3}},  // the only size giving 31 blocks
  };
  for (const ShapeCase& c : cases) {
    EXPECT_EQ(infer_granularity(c.input, c.scales, "s"), parse_granularity(c.spec, "g")) << c.spec;
  }
  EXPECT_THROW(infer_granularity({4, 5}, {4, 1, 1}, "s"), Error);    // rank
  EXPECT_THROW(infer_granularity({400, 400}, {3, 3}, "s"), Error);   // two block axes
  EXPECT_THROW(infer_granularity({4, 1000}, {4, 500}, "s"), Error);  // no size fits
  EXPECT_THROW(infer_granularity({4, 1000}, {4, 9}, "s"), Error);    // 112..124: ambiguous
}

TEST(QuantNames, ParseAndPrint) {
  for (QuantType type : {QuantType::kFp8E4M3, QuantType::kFp8E5M2, QuantType::kInt8}) {
    EXPECT_EQ(parse_quant_type(quant_type_name(type), "t"), type);
  }
  EXPECT_THROW(parse_quant_type("fp8", "--type"), Error);
  EXPECT_THROW(parse_quant_type("e4m3", "--type"), Error);
  EXPECT_THROW(parse_quant_type("int4", "--type"), Error);
  EXPECT_EQ(parse_quant_recipe("fp8", "q"), QuantRecipe::kFp8);
  EXPECT_EQ(parse_quant_recipe("int8", "q"), QuantRecipe::kInt8);
  EXPECT_THROW(parse_quant_recipe("fp8_e4m3", "--quant"), Error);
  EXPECT_EQ(parse_rhs_scaling("channel", "r"), RhsScaling{});
  EXPECT_EQ(parse_rhs_scaling("block:128", "r"), RhsScaling{128});
  for (const char* bad :
       {"", "block", "block:", "block:16", "block:1024", "block:12x", "channels", "per_tensor"}) {
    EXPECT_THROW(parse_rhs_scaling(bad, "--rhs-scales"), Error) << bad;
  }
}

// --- quantize / dequantize --------------------------------------------------

struct QuantCase {
  QuantType type;
  const char* spec;
  Shape shape;
};

std::string case_name(const QuantCase& c) {
  return std::string(quant_type_name(c.type)) + " " + c.spec + " " + shape_string(c.shape);
}

// Largest error of one value, relative to its cell's scale: int8 rounds to
// the nearest integer code (half a unit); fp8 keeps 3 (2) mantissa bits of
// normal values (relative half-ulp 2^-4, 2^-3) and subnormal steps of
// 2^-9 (2^-16) units of the scale.
double error_bound(QuantType type, float x, float scale) {
  switch (type) {
    case QuantType::kInt8:
      return 0.5 * scale * (1 + 1e-5);
    case QuantType::kFp8E4M3:
      return std::max(std::fabs(x) * 0.0625, scale * std::ldexp(1.0, -10)) * (1 + 1e-5);
    case QuantType::kFp8E5M2:
      return std::max(std::fabs(x) * 0.125, scale * std::ldexp(1.0, -17)) * (1 + 1e-5);
  }
  return 0;
}

class QuantizeTest : public ::testing::TestWithParam<QuantCase> {};

TEST_P(QuantizeTest, DynamicAbsmaxRoundTrips) {
  const QuantCase& c = GetParam();
  const Granularity g = parse_granularity(c.spec, "g");
  Tensor x = random_normal(c.shape, 11, 3.0f);
  QuantizedTensor q = quantize(x, c.type, g);
  EXPECT_EQ(q.values.dtype(), quant_storage_dtype(c.type));
  EXPECT_EQ(q.values.shape(), c.shape);
  EXPECT_EQ(q.scales.shape(), g.scale_shape(c.shape, "g"));
  Tensor back = dequantize(q);
  ASSERT_EQ(back.shape(), c.shape);

  // Recompute every cell's absmax independently through the dense index.
  const Shape scale_strides = row_major_strides(q.scales.shape());
  const Shape strides = row_major_strides(c.shape);
  std::vector<float> absmax(static_cast<size_t>(q.scales.numel()), 0.0f);
  auto cell_of = [&](int64_t flat) {
    int64_t cell = 0;
    for (size_t a = 0; a < c.shape.size(); ++a) {
      const int64_t i = flat / strides[a] % c.shape[a];
      const int64_t divisor = g.keeps(static_cast<int>(a))          ? 1
                              : static_cast<int>(a) == g.block_axis ? g.block_size
                                                                    : c.shape[a];
      cell += i / divisor * scale_strides[a];
    }
    return cell;
  };
  for (int64_t i = 0; i < x.numel(); ++i) {
    float& m = absmax[cell_of(i)];
    m = std::max(m, std::fabs(x.as<float>()[i]));
  }
  for (int64_t cell = 0; cell < q.scales.numel(); ++cell) {
    EXPECT_FLOAT_EQ(q.scales.as<float>()[cell], absmax[cell] / quant_type_max(c.type))
        << case_name(c) << " cell " << cell;
  }
  int failures = 0;
  for (int64_t i = 0; i < x.numel() && failures < 5; ++i) {
    const float value = x.as<float>()[i];
    const float scale = q.scales.as<float>()[cell_of(i)];
    const double error = std::fabs(back.as<float>()[i] - value);
    if (error > error_bound(c.type, value, scale)) {
      ++failures;
      ADD_FAILURE() << case_name(c) << " element " << i << ": " << value << " came back as "
                    << back.as<float>()[i];
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Granularities, QuantizeTest, ::testing::ValuesIn([] {
      std::vector<QuantCase> cases;
      for (QuantType type : {QuantType::kFp8E4M3, QuantType::kFp8E5M2, QuantType::kInt8}) {
        cases.push_back({type, "per_tensor", {13, 70}});
        cases.push_back({type, "channel:0", {13, 70}});
        cases.push_back({type, "channel:1", {13, 70}});
        cases.push_back({type, "channel:0+block:1:32", {13, 70}});
        cases.push_back({type, "channel:0,2", {3, 40, 9}});
        cases.push_back({type, "channel:0,2+block:1:32", {3, 100, 9}});
        cases.push_back({type, "channel:0+block:2:64", {3, 2, 130}});
        cases.push_back({type, "channel:0", {0, 5}});
        cases.push_back({type, "channel:0", {5}});
      }
      return cases;
    }()),
    [](const auto& info) {
      std::string name = std::to_string(info.index) + "_" + quant_type_name(info.param.type);
      return name;
    });

TEST(Quantize, TheCellMaxGetsTheTypeMax) {
  Tensor x(DType::kF32, {2, 4});
  const float rows[2][4] = {{1, -3, 2, 0.5f}, {-0.25f, 0.125f, 0, 0.1f}};
  for (int i = 0; i < 8; ++i) x.as<float>()[i] = rows[i / 4][i % 4];
  QuantizedTensor i8 = quantize(x, QuantType::kInt8, Granularity::channel({0}));
  EXPECT_EQ(i8.values.as<int8_t>()[1], -127);
  EXPECT_EQ(i8.values.as<int8_t>()[4], -127);
  QuantizedTensor e4 = quantize(x, QuantType::kFp8E4M3, Granularity::channel({0}));
  EXPECT_EQ(e4.values.as<uint8_t>()[1], 0xfe);  // -448
  EXPECT_FLOAT_EQ(e4.scales.as<float>()[0], 3.0f / 448.0f);
  QuantizedTensor e5 = quantize(x, QuantType::kFp8E5M2, Granularity::channel({0}));
  EXPECT_EQ(e5.values.as<uint8_t>()[1], 0xfb);  // -57344
}

TEST(Quantize, AZeroCellGetsScaleOneAndZeroCodes) {
  Tensor x(DType::kF32, {3, 64});
  for (int j = 0; j < 64; ++j) x.as<float>()[64 + j] = static_cast<float>(j) - 20.0f;
  for (QuantType type : {QuantType::kFp8E4M3, QuantType::kFp8E5M2, QuantType::kInt8}) {
    QuantizedTensor q = quantize(x, type, Granularity::channel({0}));
    for (int row : {0, 2}) {
      EXPECT_EQ(q.scales.as<float>()[row], 1.0f);
      for (int j = 0; j < 64; ++j) EXPECT_EQ(q.values.as<uint8_t>()[row * 64 + j], 0);
    }
    EXPECT_FLOAT_EQ(q.scales.as<float>()[1], 43.0f / quant_type_max(type));
  }
}

TEST(Quantize, Int8RoundsHalfToEvenAndClamps) {
  const float inputs[] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 126.5f, 200.0f, -200.0f, 3.49f};
  const int expected[] = {0, 2, 2, 0, -2, -2, 126, 127, -127, 3};
  Tensor x(DType::kF32, {10});
  for (int i = 0; i < 10; ++i) x.as<float>()[i] = inputs[i];
  QuantizedTensor q = quantize(x, QuantType::kInt8, Granularity::per_tensor(), 127.0f);
  EXPECT_EQ(q.scales.as<float>()[0], 1.0f);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(q.values.as<int8_t>()[i], expected[i]) << inputs[i];
}

TEST(Quantize, StaticRangeSaturates) {
  Tensor x(DType::kF32, {4});
  const float inputs[] = {1.0f, -10.0f, INFINITY, 0.5f};
  for (int i = 0; i < 4; ++i) x.as<float>()[i] = inputs[i];
  QuantizedTensor q = quantize(x, QuantType::kFp8E4M3, Granularity::per_tensor(), 2.0f);
  EXPECT_FLOAT_EQ(q.scales.as<float>()[0], 2.0f / 448.0f);
  Tensor back = dequantize(q);
  EXPECT_FLOAT_EQ(back.as<float>()[0], 1.0f);
  EXPECT_FLOAT_EQ(back.as<float>()[1], -2.0f);
  EXPECT_FLOAT_EQ(back.as<float>()[2], 2.0f);
  EXPECT_FLOAT_EQ(back.as<float>()[3], 0.5f);
  EXPECT_THROW(quantize(x, QuantType::kInt8, Granularity::per_tensor(), 0.0f), Error);
  EXPECT_THROW(quantize(x, QuantType::kInt8, Granularity::per_tensor(), -1.0f), Error);
  EXPECT_THROW(quantize(x, QuantType::kInt8, Granularity::per_tensor(), NAN), Error);
}

TEST(Quantize, DynamicCalibrationRefusesNonFiniteInputs) {
  for (float bad : {NAN, INFINITY, -INFINITY}) {
    Tensor x(DType::kF32, {2, 3});
    x.as<float>()[4] = bad;
    try {
      quantize(x, QuantType::kFp8E4M3, Granularity::channel({0}));
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& error) {
      EXPECT_EQ(error.argument(), "input");
      EXPECT_NE(std::string(error.what()).find("element 4"), std::string::npos);
    }
  }
  // bf16 inputs are read through f32 chunks: the same element is named.
  for (float bad : {NAN, INFINITY}) {
    Tensor x(DType::kBF16, {2, 3});
    x.as<uint16_t>()[4] = f32_to_bf16(bad);
    try {
      quantize(x, QuantType::kFp8E4M3, Granularity::channel({0}));
      ADD_FAILURE() << "accepted bf16 " << bad;
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("element 4"), std::string::npos) << error.what();
    }
  }
  // The same with scales along the last axis (rows walked whole, one cell
  // per element) and across it: the first bad element is named either way.
  for (float bad : {NAN, INFINITY}) {
    Tensor x = random_normal({3, 5}, 2);
    x.as<float>()[7] = bad;
    x.as<float>()[12] = bad;
    for (const Granularity& g : {Granularity::channel({1}), Granularity::channel({1}, 0, 2)}) {
      try {
        quantize(x, QuantType::kInt8, g);
        ADD_FAILURE() << "accepted " << bad << " with " << g.to_string();
      } catch (const Error& error) {
        EXPECT_NE(std::string(error.what()).find("element 7"), std::string::npos)
            << error.what();
      }
    }
  }
  Tensor nan(DType::kF32, {1});
  nan.as<float>()[0] = NAN;
  EXPECT_THROW(quantize(nan, QuantType::kInt8, Granularity::per_tensor(), 1.0f), Error);
  QuantizedTensor fp8 = quantize(nan, QuantType::kFp8E4M3, Granularity::per_tensor(), 1.0f);
  EXPECT_EQ(fp8.values.as<uint8_t>()[0], 0x7f);  // NaN stays NaN
}

TEST(Quantize, StridedAndBf16InputsMatchContiguousF32) {
  Tensor x = random_normal({6, 40}, 3);
  // The transpose of x, as a strided view of x: [40, 6].
  TensorView transposed(DType::kF32, Shape{40, 6}, x.data());
  transposed.strides = {1, 40};
  Tensor dense(DType::kF32, {40, 6});
  for (int i = 0; i < 40; ++i) {
    for (int j = 0; j < 6; ++j) dense.as<float>()[i * 6 + j] = x.as<float>()[j * 40 + i];
  }
  const Granularity g = parse_granularity("channel:1+block:0:32", "g");
  QuantizedTensor a = quantize(transposed, QuantType::kFp8E4M3, g);
  QuantizedTensor b = quantize(dense, QuantType::kFp8E4M3, g);
  ASSERT_EQ(a.values.nbytes(), b.values.nbytes());
  EXPECT_EQ(std::memcmp(a.values.data(), b.values.data(), a.values.nbytes()), 0);
  EXPECT_EQ(std::memcmp(a.scales.data(), b.scales.data(), a.scales.nbytes()), 0);

  Tensor bf16(DType::kBF16, dense.shape());
  Tensor rounded(DType::kF32, dense.shape());
  for (int64_t i = 0; i < dense.numel(); ++i) {
    bf16.as<uint16_t>()[i] = f32_to_bf16(dense.as<float>()[i]);
    rounded.as<float>()[i] = bf16_to_f32(bf16.as<uint16_t>()[i]);
  }
  QuantizedTensor c = quantize(bf16, QuantType::kInt8, g);
  QuantizedTensor d = quantize(rounded, QuantType::kInt8, g);
  EXPECT_EQ(std::memcmp(c.values.data(), d.values.data(), c.values.nbytes()), 0);
}

// Scales along the last axis (a weight's columns: rows walked whole, the
// cell changing per element) give, bit for bit, the codes and scales that
// the same cells give as rows of the transpose (one span per cell), for
// every type, with a zero column and a dominant value.
TEST(Quantize, ColumnScalesMatchRowScalesOfTheTranspose) {
  const int64_t rows = 70, cols = 33;
  Tensor x = random_normal({rows, cols}, 5, 3.0f);
  for (int64_t i = 0; i < rows; ++i) x.as<float>()[i * cols + 4] = 0.0f;
  x.as<float>()[9 * cols + 20] = -700.0f;
  // Column 7's int8 scale is 889 / 127 = 7 and its values are 7 (k + 0.5):
  // x / 7 is a tie that rounds to even, where x * (1 / 7) often is not one
  // in f32; codes are defined as encode(x / scale).
  for (int64_t i = 0; i < rows; ++i) x.as<float>()[i * cols + 7] = 7.0f * (i % 60 + 0.5f);
  x.as<float>()[7] = 889.0f;
  Tensor transpose(DType::kF32, {cols, rows});
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) transpose.as<float>()[j * rows + i] = x.as<float>()[i * cols + j];
  }
  for (QuantType type : {QuantType::kInt8, QuantType::kFp8E4M3, QuantType::kFp8E5M2}) {
    const QuantizedTensor columns = quantize(x, type, Granularity::channel({1}));
    const QuantizedTensor by_rows = quantize(transpose, type, Granularity::channel({0}));
    ASSERT_EQ(columns.scales.nbytes(), by_rows.scales.nbytes());
    EXPECT_EQ(std::memcmp(columns.scales.data(), by_rows.scales.data(), columns.scales.nbytes()), 0)
        << quant_type_name(type);
    const auto* a = static_cast<const uint8_t*>(columns.values.data());
    const auto* b = static_cast<const uint8_t*>(by_rows.values.data());
    int mismatches = 0;
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) mismatches += a[i * cols + j] != b[j * rows + i];
    }
    EXPECT_EQ(mismatches, 0) << quant_type_name(type);
  }
}

TEST(Quantize, RefusesBadArguments) {
  Tensor x = random_normal({4, 8}, 1);
  EXPECT_THROW(quantize(x, QuantType::kInt8, Granularity::channel({2})), Error);
  Tensor ints(DType::kI32, {4});
  EXPECT_THROW(quantize(ints, QuantType::kInt8, Granularity::per_tensor()), Error);
}

TEST(Dequantize, RefusesMismatchedInputs) {
  Tensor x = random_normal({4, 64}, 1);
  QuantizedTensor q = quantize(x, QuantType::kFp8E5M2, Granularity::channel({0}));
  // Raw uint8 codes are accepted for fp8 (that is how .npy files hold them).
  TensorView raw(DType::kU8, q.values.shape(), q.values.data());
  Tensor a = dequantize(raw, q.scales, q.type, q.granularity);
  Tensor b = dequantize(q);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.nbytes()), 0);
  // Wrong granularity for the scale shape, int8 type on fp8 codes, f16 scales.
  EXPECT_THROW(dequantize(q.values, q.scales, q.type, Granularity::channel({1})), Error);
  EXPECT_THROW(dequantize(q.values, q.scales, QuantType::kInt8, q.granularity), Error);
  Tensor half_scales(DType::kF16, q.scales.shape());
  EXPECT_THROW(dequantize(q.values, half_scales, q.type, q.granularity), Error);
}

}  // namespace
}  // namespace raggemm

namespace raggemm {
namespace {

// The thread count changes no bit of codes or scales, for every type and
// for granularities whose cells lie within a row (threads split the rows)
// and across rows (one thread finds the maxima); and a non-finite input is
// reported at the same, first, element. Tensors are large enough that the
// team really splits (quantize keeps small tensors on one thread).
TEST(Quantize, ThreadCountChangesNoBit) {
  Tensor x = random_normal({515, 260}, 11, 3.0f);
  x.as<float>()[7] = 1000.0f;  // one dominant value in one cell
  const Granularity granularities[] = {Granularity::channel({0}), Granularity::channel({1}),
                                       Granularity::per_tensor(), Granularity::channel({0}, 1, 32)};
  for (QuantType type : {QuantType::kInt8, QuantType::kFp8E4M3, QuantType::kFp8E5M2}) {
    for (const Granularity& g : granularities) {
      const QuantizedTensor one = quantize(x, type, g, std::nullopt, 1);
      for (int threads : {2, 3, 7}) {
        const QuantizedTensor many = quantize(x, type, g, std::nullopt, threads);
        ASSERT_EQ(one.scales.nbytes(), many.scales.nbytes());
        EXPECT_EQ(std::memcmp(one.values.data(), many.values.data(), one.values.nbytes()), 0)
            << quant_type_name(type) << " " << g.to_string() << " threads " << threads;
        EXPECT_EQ(std::memcmp(one.scales.data(), many.scales.data(), one.scales.nbytes()), 0)
            << quant_type_name(type) << " " << g.to_string() << " threads " << threads;
      }
    }
  }
  Tensor bad = random_normal({515, 260}, 12);
  bad.as<float>()[400 * 260 + 3] = NAN;
  bad.as<float>()[300 * 260 + 9] = INFINITY;  // the first one, in the other thread's rows
  for (int threads : {1, 2, 3}) {
    try {
      quantize(bad, QuantType::kInt8, Granularity::channel({0}), std::nullopt, threads);
      ADD_FAILURE() << "accepted a non-finite input, threads " << threads;
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("element " + std::to_string(300 * 260 + 9)),
                std::string::npos)
          << error.what();
    }
  }
  EXPECT_THROW(quantize(x, QuantType::kInt8, Granularity::channel({0}), std::nullopt, -1), Error);
}

}  // namespace
}  // namespace raggemm
