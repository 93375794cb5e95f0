// The hand-vectorized int8 encoder (ops/int8_encode.h) gives the scalar
// formula's bits on every implementation this CPU runs: ties (round half to
// even), the clamp, infinities, signed zeros, and tails shorter than a vector.
#include "ops/int8_encode.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace raggemm::ops {
namespace {

TEST(Int8Encode, EveryImplementationMatchesTheScalarFormula) {
  std::vector<float> src;
  for (int i = -300; i <= 300; ++i) src.push_back(0.5f * static_cast<float>(i));  // ties
  for (float v : {INFINITY, -INFINITY, 0.0f, -0.0f, 126.49f, 126.5f, 127.5f, -127.5f, -128.0f,
                  1e30f, -1e30f, 1e-30f}) {
    src.push_back(v);
  }
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 60.0f);
  for (int i = 0; i < 1000; ++i) src.push_back(normal(rng));
  for (float scale : {1.0f, 0.37f, 3.0f}) {
    for (int64_t count : {int64_t{0}, int64_t{5}, int64_t{16}, int64_t{31},
                          static_cast<int64_t>(src.size())}) {
      std::vector<int8_t> want(src.size(), 0x55), got(src.size(), 0x55);
      ASSERT_TRUE(encode_int8_span_on("SCALAR", src.data(), count, scale, want.data()));
      for (int64_t j = 0; j < count; ++j) {  // the formula itself, spelled out
        const float q = std::fmin(127.0f, std::fmax(-127.0f, src[j] / scale));
        ASSERT_EQ(want[j], static_cast<int8_t>(std::nearbyint(q))) << src[j] << " / " << scale;
      }
      for (const char* isa : {"AVX512", "AVX2"}) {
        std::fill(got.begin(), got.end(), int8_t{0x55});
        if (!encode_int8_span_on(isa, src.data(), count, scale, got.data())) continue;
        for (size_t j = 0; j < src.size(); ++j) {
          ASSERT_EQ(got[j], want[j]) << isa << ": " << src[j] << " / " << scale << " at " << j;
        }
      }
    }
  }
}

}  // namespace
}  // namespace raggemm::ops
