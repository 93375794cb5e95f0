// The dtype-traits table (core/dtype_traits.h) against the behaviour it
// replaced: every 8-bit code decodes to today's decoder's bits, the 16-bit
// float decoders likewise, names and sizes round-trip, the quantized types'
// maxima, and the encoder hooks give the scalar encoders' codes.
#include "core/dtype_traits.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/dtype_codec.h"
#include "core/float_bits.h"
#include "raggemm/error.h"
#include "raggemm/fp8.h"
#include "raggemm/quant_types.h"

namespace raggemm::core {
namespace {

// Today's decoder of each decodable type, written out independently.
float expected_value(DType dtype, uint32_t code) {
  switch (dtype) {
    case DType::kF32:
      return float_of(code);
    case DType::kBF16:
      return bf16_to_f32(static_cast<uint16_t>(code));
    case DType::kF16:
      return f16_to_f32(static_cast<uint16_t>(code));
    case DType::kI8:
      return static_cast<float>(static_cast<int8_t>(code));
    case DType::kU8:
      return static_cast<float>(code);
    case DType::kF8E4M3:
      return fp8_e4m3_to_f32(static_cast<uint8_t>(code));
    case DType::kF8E5M2:
      return fp8_e5m2_to_f32(static_cast<uint8_t>(code));
    default:
      ADD_FAILURE() << "not decodable: " << dtype_name(dtype);
      return 0.0f;
  }
}

TEST(DTypeTraits, RowsFollowTheEnumAndNamesRoundTrip) {
  ASSERT_EQ(all_dtype_traits().size(), static_cast<size_t>(kDTypeCount));
  for (int i = 0; i < kDTypeCount; ++i) {
    const DType dtype = static_cast<DType>(i);
    const DTypeTraits& row = dtype_traits(dtype);
    SCOPED_TRACE(row.name);
    EXPECT_EQ(row.dtype, dtype);
    EXPECT_STREQ(dtype_name(dtype), row.name);
    EXPECT_EQ(parse_dtype(row.name, "--dtype"), dtype);
    EXPECT_EQ(dtype_size(dtype) * 8, static_cast<size_t>(row.bits));
    EXPECT_LT(row.lowest, row.finite_max);
    EXPECT_NE(row.npy_descr, nullptr);
    EXPECT_NE(row.codes_text, nullptr);
    EXPECT_EQ(row.decode == nullptr, row.decode_span == nullptr);
    EXPECT_EQ(row.quant_type.has_value(), row.quant_name != nullptr);
    EXPECT_EQ(row.quant_type.has_value(), row.encode_span != nullptr);
    EXPECT_EQ(row.quant_type.has_value(), row.scale_format != ScaleFormat::kNone);
    EXPECT_EQ(row.scale_block, 0);  // no block-scaled (MX) type yet
    if (row.matmul_operand) {
      EXPECT_NE(row.decode, nullptr);
    }
  }
}

TEST(DTypeTraits, SizesNamesAndRangesAreTodays) {
  struct Case {
    DType dtype;
    const char* name;
    int bits;
    double max;
  };
  const Case cases[] = {
      {DType::kF32, "f32", 32, std::numeric_limits<float>::max()},
      {DType::kBF16, "bf16", 16, 0x1.fep127},
      {DType::kF16, "f16", 16, 65504.0},
      {DType::kI32, "i32", 32, 2147483647.0},
      {DType::kI64, "i64", 64, 0x1p63},
      {DType::kI8, "i8", 8, 127.0},
      {DType::kU8, "u8", 8, 255.0},
      {DType::kF8E4M3, "fp8_e4m3", 8, 448.0},
      {DType::kF8E5M2, "fp8_e5m2", 8, 57344.0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const DTypeTraits& row = dtype_traits(c.dtype);
    EXPECT_STREQ(row.name, c.name);
    EXPECT_EQ(row.bits, c.bits);
    EXPECT_EQ(row.finite_max, c.max);
  }
  EXPECT_TRUE(dtype_traits(DType::kF8E4M3).has_nan);
  EXPECT_TRUE(dtype_traits(DType::kF8E5M2).has_nan);
  EXPECT_FALSE(dtype_traits(DType::kI8).has_nan);
  EXPECT_STREQ(dtype_traits(DType::kF8E4M3).npy_descr, "|u1");
  EXPECT_STREQ(dtype_traits(DType::kBF16).npy_descr, "<f4");
}

TEST(DTypeTraits, QuantTypesReadTheTable) {
  struct Case {
    QuantType type;
    const char* name;
    DType storage;
    float max;
  };
  const Case cases[] = {
      {QuantType::kFp8E4M3, "fp8_e4m3", DType::kF8E4M3, 448.0f},
      {QuantType::kFp8E5M2, "fp8_e5m2", DType::kF8E5M2, 57344.0f},
      {QuantType::kInt8, "int8", DType::kI8, 127.0f},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_STREQ(quant_type_name(c.type), c.name);
    EXPECT_EQ(parse_quant_type(c.name, "type"), c.type);
    EXPECT_EQ(quant_storage_dtype(c.type), c.storage);
    EXPECT_EQ(quant_type_max(c.type), c.max);
    EXPECT_EQ(quant_traits(c.type).dtype, c.storage);
    EXPECT_EQ(quant_traits(c.type).scale_format, ScaleFormat::kF32);
  }
}

TEST(DTypeTraits, ParseErrorsListTheTablesNames) {
  try {
    parse_dtype("f64", "--dtype");
    FAIL() << "expected an Error";
  } catch (const Error& error) {
    EXPECT_EQ(error.argument(), "--dtype");
    EXPECT_EQ(error.value(), "f64");
    EXPECT_NE(std::string(error.what())
                  .find("unknown dtype (expected f32, bf16, f16, i32, i64, i8, u8, fp8_e4m3 or "
                        "fp8_e5m2)"),
              std::string::npos)
        << error.what();
  }
  try {
    parse_quant_type("i8", "type");
    FAIL() << "expected an Error";
  } catch (const Error& error) {
    EXPECT_EQ(error.argument(), "type");
    EXPECT_EQ(error.value(), "i8");
    EXPECT_NE(std::string(error.what())
                  .find("unknown quantized type (expected fp8_e4m3, fp8_e5m2 or int8)"),
              std::string::npos)
        << error.what();
  }
}

uint32_t bits_of_value(float value) { return bits_of(value); }

// Every code of every decodable type of at most 16 bits: the scalar hook,
// the span hook and (8 bits) the code table give today's decoder's bits.
TEST(DTypeTraits, EveryCodeDecodesAsBefore) {
  for (const DTypeTraits& row : all_dtype_traits()) {
    if (!row.decode || row.bits > 16) continue;
    SCOPED_TRACE(row.name);
    const uint32_t codes = 1u << row.bits;
    std::vector<uint8_t> storage(codes * (row.bits / 8));
    for (uint32_t code = 0; code < codes; ++code) {
      std::memcpy(storage.data() + code * (row.bits / 8), &code, row.bits / 8);
    }
    std::vector<float> spanned(codes);
    row.decode_span(storage.data(), 0, codes, spanned.data());
    const float* table = row.bits <= 8 ? code_table(row.dtype) : nullptr;
    for (uint32_t code = 0; code < codes; ++code) {
      const uint32_t want = bits_of_value(expected_value(row.dtype, code));
      ASSERT_EQ(bits_of_value(row.decode(code)), want) << "code " << code;
      ASSERT_EQ(bits_of_value(spanned[code]), want) << "code " << code;
      if (table) {
        ASSERT_EQ(bits_of_value(table[code]), want) << "code " << code;
      }
    }
  }
}

TEST(DTypeTraits, SpanDecodersStartAtTheirFirstElement) {
  const uint8_t codes[] = {0x38, 0x40, 0x48, 0xb8};  // e4m3: 1, 2, 4, -1
  float out[2];
  dtype_traits(DType::kF8E4M3).decode_span(codes, 2, 2, out);
  EXPECT_EQ(out[0], 4.0f);
  EXPECT_EQ(out[1], -1.0f);
}

TEST(DTypeTraits, Fp8DecodeTableIsTheCodeTable) {
  EXPECT_EQ(fp8_decode_table(DType::kF8E4M3), code_table(DType::kF8E4M3));
  EXPECT_EQ(fp8_decode_table(DType::kF8E5M2), code_table(DType::kF8E5M2));
  EXPECT_THROW(code_table(DType::kF32), Error);
  EXPECT_THROW(code_table(DType::kI32), Error);
}

// The encoder hooks against the scalar encoders, on values around every
// code, the extremes and the specials.
TEST(DTypeTraits, EncoderHooksGiveTheScalarEncodersCodes) {
  std::vector<float> values = {0.0f,
                               -0.0f,
                               1e-12f,
                               -1e-12f,
                               std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::max(),
                               0.5f,
                               1.5f,
                               2.5f,
                               -126.5f,
                               127.5f,
                               -128.0f,
                               1000.0f};
  std::mt19937 rng(20);
  std::uniform_real_distribution<float> wide(-70000.0f, 70000.0f), narrow(-2.0f, 2.0f);
  for (int i = 0; i < 2000; ++i) values.push_back(i % 2 ? wide(rng) : narrow(rng));
  const std::vector<float> divisors = {1.0f, 0.37f, 3.0f};
  for (const DTypeTraits& row : all_dtype_traits()) {
    if (!row.encode_span) continue;
    SCOPED_TRACE(row.name);
    for (float divisor : divisors) {
      std::vector<uint8_t> codes(values.size() + 3, 0xaa);
      row.encode_span(values.data(), static_cast<int64_t>(values.size()), divisor, codes.data(),
                      3);
      EXPECT_EQ(codes[0], 0xaa);  // nothing before `first`
      for (size_t j = 0; j < values.size(); ++j) {
        const float scaled = values[j] / divisor;
        uint8_t want = 0;
        if (row.dtype == DType::kF8E4M3) {
          want = f32_to_fp8_e4m3(scaled);
        } else if (row.dtype == DType::kF8E5M2) {
          want = f32_to_fp8_e5m2(scaled, /*saturate=*/true);
        } else {
          ASSERT_EQ(row.dtype, DType::kI8);
          const float clamped = std::fmin(127.0f, std::fmax(-127.0f, scaled));
          want = static_cast<uint8_t>(static_cast<int8_t>(std::nearbyint(clamped)));
        }
        ASSERT_EQ(codes[j + 3], want) << "value " << values[j] << " / " << divisor;
      }
    }
  }
}

// The compile-time loaders the kernels instantiate read what the table decodes.
template <DType D>
void expect_codec_matches_table() {
  const DTypeTraits& row = dtype_traits(D);
  SCOPED_TRACE(row.name);
  EXPECT_TRUE(row.matmul_operand);
  std::vector<uint8_t> storage(64 * (row.bits / 8));
  std::mt19937 rng(static_cast<unsigned>(D));
  for (uint8_t& byte : storage) byte = static_cast<uint8_t>(rng());
  std::vector<float> want(64);
  row.decode_span(storage.data(), 0, 64, want.data());
  const auto load = Codec<D>::loader(storage.data(), 5);
  for (int64_t j = 0; j + 5 < 64; ++j) {
    ASSERT_EQ(bits_of_value(load(j)), bits_of_value(want[j + 5])) << "element " << j + 5;
  }
}

TEST(DTypeTraits, CodecsOfMatmulOperandsMatchTheTable) {
  expect_codec_matches_table<DType::kF32>();
  expect_codec_matches_table<DType::kBF16>();
  expect_codec_matches_table<DType::kF16>();
  expect_codec_matches_table<DType::kI8>();
  expect_codec_matches_table<DType::kF8E4M3>();
  expect_codec_matches_table<DType::kF8E5M2>();
  EXPECT_FALSE(Codec<DType::kI32>::kDecodable);
  EXPECT_FALSE(Codec<DType::kU8>::kDecodable);
  for (const DTypeTraits& row : all_dtype_traits()) {
    if (row.dtype == DType::kI32 || row.dtype == DType::kI64 || row.dtype == DType::kU8) {
      EXPECT_FALSE(row.matmul_operand) << row.name;
    }
  }
}

TEST(DTypeTraits, OrListJoinsNames) {
  const char* one[] = {"a"};
  const char* three[] = {"a", "b", "c"};
  EXPECT_EQ(or_list(one), "a");
  EXPECT_EQ(or_list(three), "a, b or c");
}

}  // namespace
}  // namespace raggemm::core
