// The AVX-512 and AVX2 fp8 encoders (ops/fp8_encode.h) give the scalar
// encoders' bits for e4m3 and e5m2: every code's value and the midpoints between
// neighbouring codes (ties to even), subnormals, values past the max,
// infinities, NaN, signed zeros, random values, and tails.
#include "ops/fp8_encode.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "raggemm/fp8.h"

namespace raggemm::ops {
namespace {

// Each vector encoder this CPU runs; skipped when it runs none.
TEST(Fp8Encode, VectorEncodersMatchTheScalarEncoders) {
  int ran = 0;
  for (DType dtype : {DType::kF8E4M3, DType::kF8E5M2}) {
    const bool e4m3 = dtype == DType::kF8E4M3;
    std::vector<float> src;
    std::vector<float> values;
    for (int c = 0; c < 128; ++c) {
      const float v = e4m3 ? fp8_e4m3_to_f32(static_cast<uint8_t>(c))
                           : fp8_e5m2_to_f32(static_cast<uint8_t>(c));
      if (std::isfinite(v)) values.push_back(v);
    }
    for (size_t i = 0; i < values.size(); ++i) {
      for (float sign : {1.0f, -1.0f}) {
        src.push_back(sign * values[i]);
        if (i + 1 < values.size()) {
          const float mid = 0.5f * (values[i] + values[i + 1]);
          src.push_back(sign * mid);
          src.push_back(sign * std::nextafter(mid, 0.0f));
          src.push_back(sign * std::nextafter(mid, INFINITY));
        }
      }
    }
    for (float v : {INFINITY, -INFINITY, NAN, -NAN, 0.0f, -0.0f, 1e30f, -1e30f, 1e-30f, 500.0f,
                    464.0f, 60000.0f, 61440.0f, 3.4e38f}) {
      src.push_back(v);
    }
    std::mt19937 rng(9);
    std::normal_distribution<float> normal(0.0f, 100.0f);
    for (int i = 0; i < 2000; ++i) src.push_back(normal(rng));
    for (float divisor : {1.0f, 0.37f, 1.0f / 448.0f}) {
      for (int64_t count : {static_cast<int64_t>(src.size()), int64_t{7}, int64_t{16}}) {
        for (const char* isa : {"AVX512", "AVX2"}) {
          std::vector<uint8_t> got(src.size(), 0x55);
          if (!encode_fp8_span_on(isa, dtype, src.data(), count, divisor, got.data())) continue;
          ++ran;
          for (int64_t j = 0; j < count; ++j) {
            const float x = src[j] / divisor;
            const uint8_t want = e4m3 ? f32_to_fp8_e4m3(x) : f32_to_fp8_e5m2(x, true);
            ASSERT_EQ(got[j], want)
                << isa << " " << dtype_name(dtype) << " " << src[j] << " / " << divisor;
          }
          for (size_t j = count; j < got.size(); ++j) {
            ASSERT_EQ(got[j], 0x55) << isa << " wrote past count";
          }
        }
      }
    }
  }
  if (ran == 0) GTEST_SKIP() << "no vector fp8 encoder on this CPU";
}

}  // namespace
}  // namespace raggemm::ops
