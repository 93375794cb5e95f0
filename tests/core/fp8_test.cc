// fp8 e4m3fn / e5m2 against an independent oracle written from the format
// definitions: decode by the textbook formula (ldexp), encode by brute-force
// search for the nearest representable value with ties to the even code.
#include "raggemm/fp8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "raggemm/error.h"

namespace raggemm {
namespace {

struct Format {
  const char* name;
  DType dtype;
  int exponent_bits;
  int mantissa_bits;
  int bias;
  bool ieee;  // e5m2: all-ones exponent is inf/NaN; e4m3fn: only S.1111.111 is NaN
  float max;
};

constexpr Format kE4M3{"e4m3", DType::kF8E4M3, 4, 3, 7, false, 448.0f};
constexpr Format kE5M2{"e5m2", DType::kF8E5M2, 5, 2, 15, true, 57344.0f};

// Decoding straight from the definition, sharing nothing with fp8.cc.
double oracle_decode(const Format& f, int code) {
  const int sign = code >> 7;
  const int exponent = (code >> f.mantissa_bits) & ((1 << f.exponent_bits) - 1);
  const int mantissa = code & ((1 << f.mantissa_bits) - 1);
  const int all_ones = (1 << f.exponent_bits) - 1;
  double magnitude;
  if (f.ieee && exponent == all_ones) {
    magnitude = mantissa == 0 ? INFINITY : NAN;
  } else if (!f.ieee && exponent == all_ones && mantissa == (1 << f.mantissa_bits) - 1) {
    magnitude = NAN;
  } else if (exponent == 0) {
    magnitude = std::ldexp(mantissa, 1 - f.bias - f.mantissa_bits);
  } else {
    magnitude = std::ldexp(1.0 + std::ldexp(mantissa, -f.mantissa_bits), exponent - f.bias);
  }
  return sign ? -magnitude : magnitude;
}

float decode(const Format& f, uint8_t code) {
  return f.ieee ? fp8_e5m2_to_f32(code) : fp8_e4m3_to_f32(code);
}

uint8_t encode(const Format& f, float x, bool saturate) {
  return f.ieee ? f32_to_fp8_e5m2(x, saturate) : f32_to_fp8_e4m3(x);
}

// Nearest finite code (or, for a non-saturating e5m2, infinity placed at
// 2^16 as IEEE rounding does), ties to the code with an even last bit.
// Returns -1 for NaN (any NaN code is right).
int oracle_encode(const Format& f, float x, bool saturate) {
  if (std::isnan(x)) return -1;
  const int sign = std::signbit(x) ? 0x80 : 0;
  const double magnitude = std::fabs(static_cast<double>(x));
  const bool overflow_to_inf = f.ieee && !saturate;
  const int max_code = f.ieee ? 0x7b : 0x7e;
  if (std::isinf(x)) return sign | (overflow_to_inf ? 0x7c : max_code);
  // Saturation: past the max the nearest finite value is the max (said
  // outright: far out, distances tie in double).
  if (!overflow_to_inf && magnitude >= f.max) return sign | max_code;
  int best = -1;
  double best_distance = INFINITY;
  for (int code = 0; code < 0x80; ++code) {
    double value = oracle_decode(f, code);
    if (std::isnan(value)) continue;
    if (std::isinf(value)) {
      if (!overflow_to_inf) continue;
      value = std::ldexp(1.0, 16);  // where the next binade would start
    }
    const double distance = std::fabs(value - magnitude);
    if (distance < best_distance || (distance == best_distance && (code & 1) == 0)) {
      best = code;
      best_distance = distance;
    }
  }
  return sign | best;
}

float next_up(float x) { return std::nextafter(x, INFINITY); }
float next_down(float x) { return std::nextafter(x, -INFINITY); }

// Values around every representable value and midpoint, the subnormals, the
// max and beyond, infinities, NaN, zeros and a random spread.
std::vector<float> sweep(const Format& f) {
  std::vector<float> values = {0.0f,
                               -0.0f,
                               INFINITY,
                               -INFINITY,
                               NAN,
                               -NAN,
                               std::numeric_limits<float>::max(),
                               std::numeric_limits<float>::denorm_min(),
                               std::numeric_limits<float>::min(),
                               f.max,
                               2 * f.max,
                               1e30f};
  std::vector<double> grid;
  for (int code = 0; code < 0x80; ++code) {
    double value = oracle_decode(f, code);
    if (std::isfinite(value)) grid.push_back(value);
  }
  grid.push_back(std::ldexp(1.0, f.ieee ? 16 : 9));  // past the max
  for (size_t i = 0; i < grid.size(); ++i) {
    const float value = static_cast<float>(grid[i]);
    for (float x : {value, next_up(value), next_down(value)}) values.push_back(x);
    if (i + 1 < grid.size()) {
      const float mid = static_cast<float>((grid[i] + grid[i + 1]) / 2);  // exact in f32
      for (float x : {mid, next_up(mid), next_down(mid)}) values.push_back(x);
    }
  }
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int i = 0; i < 2000; ++i) {
    values.push_back(std::ldexp(normal(rng), static_cast<int>(rng() % 40) - 24));
  }
  std::vector<float> with_negatives = values;
  for (float x : values) with_negatives.push_back(-x);
  return with_negatives;
}

class Fp8Test : public ::testing::TestWithParam<Format> {};

TEST_P(Fp8Test, EveryCodeDecodesExactly) {
  const Format& f = GetParam();
  const float* table = fp8_decode_table(f.dtype);
  for (int code = 0; code < 256; ++code) {
    const double expected = oracle_decode(f, code);
    const float got = decode(f, static_cast<uint8_t>(code));
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(got)) << f.name << " code " << code;
    } else {
      EXPECT_EQ(static_cast<double>(got), expected) << f.name << " code " << code;
      EXPECT_EQ(std::signbit(got), std::signbit(expected)) << f.name << " code " << code;
    }
    EXPECT_EQ(std::memcmp(&table[code], &got, sizeof(float)), 0) << "table, code " << code;
  }
}

TEST_P(Fp8Test, BulkDecodeMatchesTheTableBitForBit) {
  const Format& f = GetParam();
  const float* table = fp8_decode_table(f.dtype);
  // Every code, at offsets 0..3 so vector bodies and scalar tails both see each.
  for (int offset = 0; offset < 4; ++offset) {
    std::vector<uint8_t> codes(256 + offset);
    std::vector<float> col_scales(codes.size());
    for (size_t i = 0; i < codes.size(); ++i) {
      codes[i] = static_cast<uint8_t>(i - offset);
      col_scales[i] = 0.25f + 0.01f * static_cast<float>(i % 7);
    }
    std::vector<float> plain(codes.size()), scaled(codes.size()), per_column(codes.size());
    fp8_decode_span(f.dtype, codes.data(), static_cast<int64_t>(codes.size()), 1.0f, nullptr,
                    plain.data());
    fp8_decode_span(f.dtype, codes.data(), static_cast<int64_t>(codes.size()), 0.375f, nullptr,
                    scaled.data());
    fp8_decode_span(f.dtype, codes.data(), static_cast<int64_t>(codes.size()), 1.0f,
                    col_scales.data(), per_column.data());
    for (size_t i = 0; i < codes.size(); ++i) {
      const float value = table[codes[i]];
      const std::pair<float, float> checks[] = {
          {plain[i], value}, {scaled[i], value * 0.375f}, {per_column[i], value * col_scales[i]}};
      for (auto [got, want] : checks) {
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(got)) << f.name << " code " << int(codes[i]);
        } else {
          EXPECT_EQ(std::memcmp(&got, &want, sizeof(float)), 0)
              << f.name << " code " << int(codes[i]) << ": " << got << " vs " << want;
        }
      }
    }
  }
  EXPECT_THROW(fp8_decode_span(DType::kI8, nullptr, 0, 1.0f, nullptr, nullptr), Error);
}

TEST_P(Fp8Test, EncodeRoundsToNearestEvenAndSaturates) {
  const Format& f = GetParam();
  for (bool saturate : {true, false}) {
    if (!f.ieee && !saturate) continue;  // e4m3 encoding always saturates
    int mismatches = 0;
    for (float x : sweep(f)) {
      const int expected = oracle_encode(f, x, saturate);
      const uint8_t got = encode(f, x, saturate);
      if (expected < 0) {
        EXPECT_TRUE(std::isnan(decode(f, got))) << f.name << " NaN input gave " << int(got);
        EXPECT_EQ(got >> 7, std::signbit(x) ? 1 : 0) << "NaN keeps its sign";
      } else if (got != expected && ++mismatches < 10) {
        ADD_FAILURE() << f.name << " saturate=" << saturate << " x=" << x << " got " << int(got)
                      << " expected " << expected;
      }
    }
    EXPECT_EQ(mismatches, 0);
  }
}

TEST_P(Fp8Test, BulkEncodeMatchesTheScalarEncoder) {
  const Format& f = GetParam();
  const std::vector<float> values = sweep(f);
  for (float divisor : {1.0f, 0.37f, 3.0f}) {
    std::vector<uint8_t> codes(values.size());
    fp8_encode_span(f.dtype, values.data(), static_cast<int64_t>(values.size()), divisor,
                    codes.data());
    int mismatches = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      const uint8_t want = encode(f, values[i] / divisor, /*saturate=*/true);
      if (codes[i] != want && ++mismatches < 10) {
        ADD_FAILURE() << f.name << " x=" << values[i] << " / " << divisor << ": " << int(codes[i])
                      << " vs " << int(want);
      }
    }
    EXPECT_EQ(mismatches, 0);
  }
  EXPECT_THROW(fp8_encode_span(DType::kF32, nullptr, 0, 1.0f, nullptr), Error);
}

TEST_P(Fp8Test, EveryFiniteCodeRoundTrips) {
  const Format& f = GetParam();
  for (int code = 0; code < 256; ++code) {
    const float value = decode(f, static_cast<uint8_t>(code));
    if (!std::isfinite(value)) continue;
    EXPECT_EQ(encode(f, value, true), code) << f.name << " code " << code;
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, Fp8Test, ::testing::Values(kE4M3, kE5M2),
                         [](const auto& info) { return std::string(info.param.name); });

struct EncodeCase {
  const char* what;
  float input;
  int e4m3;
  int e5m2_saturating;
  int e5m2_ieee;
};

// Hand-checked anchors (values from the format tables).
TEST(Fp8Encode, Anchors) {
  const EncodeCase cases[] = {
      {"one", 1.0f, 0x38, 0x3c, 0x3c},
      {"max", 448.0f, 0x7e, 0x5f, 0x5f},
      {"past e4m3 max", 500.0f, 0x7e, 0x60, 0x60},
      {"e5m2 max", 57344.0f, 0x7e, 0x7b, 0x7b},
      {"e5m2 tie to inf", 61440.0f, 0x7e, 0x7b, 0x7c},
      {"just below e5m2 tie", 61439.996f, 0x7e, 0x7b, 0x7b},
      {"inf", INFINITY, 0x7e, 0x7b, 0x7c},
      {"-inf", -INFINITY, 0xfe, 0xfb, 0xfc},
      {"e4m3 smallest subnormal", 0.001953125f, 0x01, 0x18, 0x18},
      {"half the e4m3 smallest subnormal ties to zero", 0.0009765625f, 0x00, 0x14, 0x14},
      {"e5m2 smallest subnormal", 1.52587890625e-05f, 0x00, 0x01, 0x01},
      {"tie 1.0625 to even 1.0 (e4m3)", 1.0625f, 0x38, 0x3c, 0x3c},
      {"tie 1.1875 to even 1.25 (e4m3)", 1.1875f, 0x3a, 0x3d, 0x3d},
      {"minus zero", -0.0f, 0x80, 0x80, 0x80},
  };
  for (const EncodeCase& c : cases) {
    EXPECT_EQ(f32_to_fp8_e4m3(c.input), c.e4m3) << c.what;
    EXPECT_EQ(f32_to_fp8_e5m2(c.input, true), c.e5m2_saturating) << c.what;
    EXPECT_EQ(f32_to_fp8_e5m2(c.input, false), c.e5m2_ieee) << c.what;
  }
  EXPECT_EQ(f32_to_fp8_e4m3(NAN), 0x7f);
  EXPECT_EQ(f32_to_fp8_e4m3(-NAN), 0xff);
  EXPECT_TRUE(std::isnan(fp8_e5m2_to_f32(f32_to_fp8_e5m2(NAN, true))));
  EXPECT_TRUE(std::isnan(fp8_e5m2_to_f32(f32_to_fp8_e5m2(NAN, false))));
}

TEST(Fp8DecodeTable, RefusesOtherDtypes) {
  EXPECT_THROW(fp8_decode_table(DType::kF32), Error);
  EXPECT_THROW(fp8_decode_table(DType::kI8), Error);
}

}  // namespace
}  // namespace raggemm
