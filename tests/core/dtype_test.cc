// Scalar dtype conversions: bf16 and f16 against hand-picked bit patterns
// (ties, NaN, infinities, subnormals, overflow), against an independent
// nearest-value search in double precision, and against the F16C hardware
// converter when the CPU has one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "core/float_bits.h"
#include "raggemm/dtype.h"
#include "raggemm/error.h"

namespace raggemm {
namespace {

using core::bits_of;
using core::float_of;

// ---- names and sizes ----------------------------------------------------

TEST(DTypeTest, NamesRoundTripAndSizesMatch) {
  struct Case {
    DType dtype;
    const char* name;
    size_t size;
  };
  const Case cases[] = {
      {DType::kF32, "f32", 4}, {DType::kBF16, "bf16", 2},       {DType::kF16, "f16", 2},
      {DType::kI32, "i32", 4}, {DType::kI64, "i64", 8},         {DType::kI8, "i8", 1},
      {DType::kU8, "u8", 1},   {DType::kF8E4M3, "fp8_e4m3", 1}, {DType::kF8E5M2, "fp8_e5m2", 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_STREQ(dtype_name(c.dtype), c.name);
    EXPECT_EQ(dtype_size(c.dtype), c.size);
    EXPECT_EQ(parse_dtype(c.name, "--dtype"), c.dtype);
  }
}

TEST(DTypeTest, UnknownNameNamesArgumentAndValue) {
  for (const char* bad : {"f64", "F32", "", "bf16 ", "float32"}) {
    SCOPED_TRACE(bad);
    try {
      parse_dtype(bad, "--dtype");
      FAIL() << "expected an Error";
    } catch (const Error& error) {
      EXPECT_EQ(error.argument(), "--dtype");
      EXPECT_EQ(error.value(), bad);
    }
  }
}

// ---- bf16 ---------------------------------------------------------------

TEST(Bf16Test, RoundsToNearestEvenOnBitPatterns) {
  struct Case {
    uint32_t input;
    uint16_t expected;
    const char* why;
  };
  const Case cases[] = {
      {0x3f800000u, 0x3f80, "1.0 exact"},
      {0x3f808000u, 0x3f80, "tie, lower neighbour even: down"},
      {0x3f818000u, 0x3f82, "tie, lower neighbour odd: up"},
      {0x3f808001u, 0x3f81, "just above a tie: up"},
      {0x3f807fffu, 0x3f80, "just below a tie: down"},
      {0xbf818000u, 0xbf82, "negative tie, odd: away from zero"},
      {0xbf808000u, 0xbf80, "negative tie, even: toward zero"},
      {0x3fffffffu, 0x4000, "carry into the exponent"},
      {0x7f7f7fffu, 0x7f7f, "largest finite that stays finite"},
      {0x7f7f8000u, 0x7f80, "tie at the top rounds to even: infinity"},
      {0x7f7fffffu, 0x7f80, "FLT_MAX overflows to infinity"},
      {0xff7fffffu, 0xff80, "-FLT_MAX overflows to -infinity"},
      {0x7f800000u, 0x7f80, "+inf"},
      {0xff800000u, 0xff80, "-inf"},
      {0x00000000u, 0x0000, "+0"},
      {0x80000000u, 0x8000, "-0"},
      {0x00008000u, 0x0000, "subnormal tie, even: to zero"},
      {0x00018000u, 0x0002, "subnormal tie, odd: up"},
      {0x00010001u, 0x0001, "subnormal just above"},
      {0x007fffffu, 0x0080, "largest subnormal rounds to smallest normal"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.why);
    EXPECT_EQ(f32_to_bf16(float_of(c.input)), c.expected);
  }
}

TEST(Bf16Test, NanStaysQuietNanWithItsSign) {
  const uint32_t nans[] = {0x7f800001u, 0x7fbfffffu, 0x7fc00000u, 0x7fffffffu,
                           0xff800001u, 0xffc00000u, 0x7f810000u, 0x7f800100u};
  for (uint32_t nan : nans) {
    SCOPED_TRACE(nan);
    uint16_t out = f32_to_bf16(float_of(nan));
    EXPECT_EQ(out & 0x7f80u, 0x7f80u) << "exponent all ones";
    EXPECT_NE(out & 0x007fu, 0u) << "mantissa non-zero: still a NaN, not an infinity";
    EXPECT_NE(out & 0x0040u, 0u) << "quiet bit set";
    EXPECT_EQ(out & 0x8000u, (nan >> 16) & 0x8000u) << "sign kept";
    EXPECT_TRUE(std::isnan(bf16_to_f32(out)));
  }
}

// Independent oracle: the two bf16 neighbours of x, compared in double.
uint16_t bf16_reference(float x) {
  uint32_t bits = bits_of(x);
  uint16_t low = static_cast<uint16_t>(bits >> 16);  // truncation toward zero
  if ((bits & 0xffffu) == 0) return low;
  uint16_t high = static_cast<uint16_t>(low + 1);  // next magnitude up (may be inf)
  double value = std::fabs(static_cast<double>(x));
  double low_value = std::fabs(static_cast<double>(bf16_to_f32(low)));
  double high_value = (high & 0x7fffu) == 0x7f80u
                          ? std::ldexp(1.0, 128)  // rounding past FLT_MAX's bf16: the next step
                          : std::fabs(static_cast<double>(bf16_to_f32(high)));
  double down = value - low_value, up = high_value - value;
  if (down < up) return low;
  if (up < down) return high;
  return (low & 1u) ? high : low;
}

TEST(Bf16Test, MatchesNeighbourSearchOnSampledFloats) {
  // A stride prime to 2^32 walks every exponent and mantissa pattern class;
  // ties and near-ties are added explicitly because a stride rarely hits them.
  std::vector<uint32_t> inputs;
  for (uint64_t bits = 0; bits < (1ull << 32); bits += 65537)
    inputs.push_back(static_cast<uint32_t>(bits));
  std::mt19937 random(1234);
  for (int i = 0; i < 20000; ++i) {
    uint32_t upper = random() & 0xffff0000u;
    for (uint32_t low : {0x7fffu, 0x8000u, 0x8001u, 0x0001u, 0xffffu})
      inputs.push_back(upper | low);
  }
  int checked = 0;
  for (uint32_t bits : inputs) {
    if ((bits & 0x7fffffffu) >= 0x7f800000u) continue;  // inf/NaN have their own tests
    ASSERT_EQ(f32_to_bf16(float_of(bits)), bf16_reference(float_of(bits))) << std::hex << bits;
    ++checked;
  }
  EXPECT_GT(checked, 150000);
}

TEST(Bf16Test, WideningIsExactForEveryPattern) {
  for (uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    uint16_t half = static_cast<uint16_t>(bits);
    float wide = bf16_to_f32(half);
    EXPECT_EQ(bits_of(wide), bits << 16);
    if (!std::isnan(wide)) {
      ASSERT_EQ(f32_to_bf16(wide), half) << "bf16 -> f32 -> bf16 must be the identity";
    }
  }
}

// ---- f16 ----------------------------------------------------------------

// Independent decode of a binary16 pattern into double, from the definition.
double f16_value_reference(uint16_t bits) {
  int sign = (bits & 0x8000u) ? -1 : 1;
  int exponent = (bits >> 10) & 0x1f;
  int mantissa = bits & 0x3ff;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  if (exponent == 31) return mantissa ? NAN : sign * INFINITY;
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

// Independent encode: the nearest of all finite positive halves (searched in
// double), ties to the even pattern, and infinity from 65520 (= max + ulp/2).
uint16_t f16_reference(float x) {
  static const std::vector<double> kPositive = [] {
    std::vector<double> values;
    for (uint32_t bits = 0; bits < 0x7c00u; ++bits) values.push_back(f16_value_reference(bits));
    return values;
  }();
  uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  double magnitude = std::fabs(static_cast<double>(x));
  if (magnitude >= 65520.0) return sign | 0x7c00;
  auto above = std::lower_bound(kPositive.begin(), kPositive.end(), magnitude);
  if (above == kPositive.begin()) return sign;  // +-0
  uint16_t high = static_cast<uint16_t>(above - kPositive.begin());
  if (above != kPositive.end() && *above == magnitude) return sign | high;
  uint16_t low = static_cast<uint16_t>(high - 1);
  if (above == kPositive.end()) return sign | low;  // below 65520 past the max: max
  double down = magnitude - kPositive[low], up = kPositive[high] - magnitude;
  if (down < up) return sign | low;
  if (up < down) return sign | high;
  return sign | ((low & 1u) ? high : low);
}

TEST(F16Test, DecodesEveryPatternExactly) {
  for (uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    uint16_t half = static_cast<uint16_t>(bits);
    float value = f16_to_f32(half);
    double expected = f16_value_reference(half);
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(value)) << std::hex << bits;
      EXPECT_EQ(std::signbit(value), (bits & 0x8000u) != 0);
    } else {
      ASSERT_EQ(static_cast<double>(value), expected) << std::hex << bits;
      ASSERT_EQ(std::signbit(value), (bits & 0x8000u) != 0) << std::hex << bits;
    }
  }
}

TEST(F16Test, EveryNonNanPatternRoundTrips) {
  for (uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    uint16_t half = static_cast<uint16_t>(bits);
    if ((half & 0x7c00u) == 0x7c00u && (half & 0x3ffu)) continue;
    ASSERT_EQ(f32_to_f16(f16_to_f32(half)), half) << std::hex << bits;
  }
}

TEST(F16Test, NanStaysQuietNan) {
  for (uint32_t nan :
       {0x7f800001u, 0x7fc00000u, 0x7fffffffu, 0xff800001u, 0xffc00001u, 0x7f802000u}) {
    SCOPED_TRACE(nan);
    uint16_t out = f32_to_f16(float_of(nan));
    EXPECT_EQ(out & 0x7c00u, 0x7c00u);
    EXPECT_NE(out & 0x0200u, 0u) << "quiet bit set (so never collapses to infinity)";
    EXPECT_EQ(out & 0x8000u, (nan >> 16) & 0x8000u);
  }
}

TEST(F16Test, RoundsOnBoundaries) {
  struct Case {
    float input;
    uint16_t expected;
    const char* why;
  };
  const float min_subnormal = std::ldexp(1.0f, -24);
  const Case cases[] = {
      {1.0f, 0x3c00, "1"},
      {1.0f + std::ldexp(1.0f, -11), 0x3c00, "tie after 1: even (down)"},
      {1.0f + 3 * std::ldexp(1.0f, -11), 0x3c02, "tie after 1+ulp: even (up)"},
      {65504.0f, 0x7bff, "max half"},
      {65519.99f, 0x7bff, "just below the overflow threshold"},
      {65520.0f, 0x7c00, "tie at the top: overflow to inf"},
      {1e9f, 0x7c00, "large: inf"},
      {-1e9f, 0xfc00, "large negative: -inf"},
      {INFINITY, 0x7c00, "inf"},
      {-INFINITY, 0xfc00, "-inf"},
      {-0.0f, 0x8000, "-0"},
      {min_subnormal, 0x0001, "smallest subnormal"},
      {min_subnormal / 2, 0x0000, "half the smallest subnormal: tie to even zero"},
      {min_subnormal * 1.5f, 0x0002, "1.5 subnormals: tie to even (2)"},
      {min_subnormal * 2.5f, 0x0002, "2.5 subnormals: tie to even (2)"},
      {std::nextafter(min_subnormal / 2, 1.0f), 0x0001, "just above the zero tie"},
      {-min_subnormal / 2, 0x8000, "negative tie to -0"},
      {std::ldexp(1.0f, -14), 0x0400, "smallest normal"},
      {std::ldexp(1023.5f, -24), 0x0400, "largest-subnormal tie rounds up into normals"},
      {std::ldexp(1.0f, -40), 0x0000, "far below: zero"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.why);
    EXPECT_EQ(f32_to_f16(c.input), c.expected);
    EXPECT_EQ(f16_reference(c.input), c.expected) << "the oracle itself";
  }
}

// Ties and their neighbours between every pair of adjacent halves, plus a
// sweep of random floats across the whole f16 range and beyond.
std::vector<float> f16_probe_inputs() {
  std::vector<float> inputs;
  for (uint32_t bits = 0; bits < 0x7c00u; ++bits) {
    double low = f16_value_reference(static_cast<uint16_t>(bits));
    double high =
        bits + 1 < 0x7c00u ? f16_value_reference(static_cast<uint16_t>(bits + 1)) : 65536.0;
    float mid = static_cast<float>((low + high) / 2);  // exact: halves have <= 11 significant bits
    for (float x :
         {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY), static_cast<float>(low)}) {
      inputs.push_back(x);
      inputs.push_back(-x);
    }
  }
  std::mt19937 random(99);
  std::uniform_int_distribution<uint32_t> exponent(90, 145);  // 2^-37 .. 2^18
  for (int i = 0; i < 200000; ++i) {
    uint32_t bits = (random() & 0x807fffffu) | (exponent(random) << 23);
    inputs.push_back(float_of(bits));
  }
  return inputs;
}

TEST(F16Test, MatchesNearestValueSearch) {
  for (float x : f16_probe_inputs()) {
    ASSERT_EQ(f32_to_f16(x), f16_reference(x)) << "x=" << x << " bits=" << std::hex << bits_of(x);
  }
}

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
__attribute__((target("f16c"))) uint16_t f16c_encode(float x) {
  return static_cast<uint16_t>(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
__attribute__((target("f16c"))) float f16c_decode(uint16_t h) { return _cvtsh_ss(h); }

TEST(F16Test, MatchesF16cHardware) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "CPU has no F16C";
  for (float x : f16_probe_inputs()) {
    ASSERT_EQ(f32_to_f16(x), f16c_encode(x)) << "x=" << x << " bits=" << std::hex << bits_of(x);
  }
  for (uint32_t nan : {0x7f800001u, 0x7fc00000u, 0xffc12345u, 0x7fffffffu}) {
    EXPECT_EQ(f32_to_f16(float_of(nan)), f16c_encode(float_of(nan))) << std::hex << nan;
  }
  for (uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    uint16_t half = static_cast<uint16_t>(bits);
    float hardware = f16c_decode(half);
    float ours = f16_to_f32(half);
    if (std::isnan(hardware)) {
      ASSERT_TRUE(std::isnan(ours)) << std::hex << bits;
    } else {
      ASSERT_EQ(bits_of(ours), bits_of(hardware)) << std::hex << bits;
    }
  }
}
#endif

}  // namespace
}  // namespace raggemm
