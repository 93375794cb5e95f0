// The vectorized glue (kernels/glue_simd.h) against the scalar loops it replaces:
// the same bits, not merely close (the training run's loss curve must not move).
#include "kernels/glue_simd.h"

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "moe/swiglu.h"

namespace raggemm::moe {
using kernels::exp_f32;
using kernels::glue_simd_vectorized;
using kernels::swiglu_backward_f32;
using kernels::swiglu_forward_f32;
namespace {

uint32_t bits_of(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

float float_of(uint32_t b) {
  float v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

// Equal bits, or both NaN.
::testing::AssertionResult same_float(float expected, float actual, float input) {
  if (bits_of(expected) == bits_of(actual) || (std::isnan(expected) && std::isnan(actual))) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "input " << std::hexfloat << input << ": expected "
                                       << expected << ", got " << actual;
}

// Runs `check` once per Highway target this CPU supports and the library was
// compiled for (AVX-512, AVX2, SSE4, ...), each forced in turn.
template <class Check>
void for_each_target(Check check) {
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    check();
  }
  hwy::SetSupportedTargetsForTest(0);
}

// Inputs that reach every path: a stride through all float bit patterns of
// both signs (the fast path |x| < 88 and beyond, subnormal inputs,
// underflow and overflow), specials, and a random middle.
std::vector<float> exp_inputs() {
  std::vector<float> x;
  for (uint64_t b = 0; b <= 0x7f800000u; b += 4099) {
    x.push_back(float_of(static_cast<uint32_t>(b)));
    x.push_back(-float_of(static_cast<uint32_t>(b)));
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), 88.0f,
                  -88.0f, 88.72283f, 88.72284f, -103.97208f, -103.97209f, -87.33654f,
                  std::nextafter(88.0f, 0.0f), -std::nextafter(88.0f, 0.0f), 1e-30f, -1e-30f}) {
    x.push_back(v);
  }
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  for (int i = 0; i < 100003; ++i) x.push_back(normal(rng));
  return x;
}

TEST(GlueSimd, ExpMatchesStdExpBitForBit) {
  bool vector_path_ran = false;
  for_each_target([&] {
    vector_path_ran |= glue_simd_vectorized();
    const std::vector<float> x = exp_inputs();
    std::vector<float> y(x.size());
    exp_f32(x.data(), static_cast<int64_t>(x.size()), y.data());
    int64_t failures = 0;
    for (size_t i = 0; i < x.size() && failures < 10; ++i) {
      const auto same = same_float(std::exp(x[i]), y[i], x[i]);
      if (!same) ++failures;
      EXPECT_TRUE(same);
    }
    // In place, and every length up to a few vectors (the scalar tail).
    for (int64_t n = 0; n < 40; ++n) {
      std::vector<float> v(x.end() - n, x.end());
      exp_f32(v.data(), n, v.data());
      for (int64_t i = 0; i < n; ++i) ASSERT_TRUE(same_float(std::exp(x.end()[i - n]), v[i], 0));
    }
  });
  // On a CPU with AVX2 (hence FMA) the vector path must have been the one tested.
  if (hwy::SupportedTargets() & HWY_AVX2) {
    EXPECT_TRUE(vector_path_ran);
  }
}

// Gates from a wide normal plus values off glibc's fast path (-gate beyond
// +-88, infinities), at a length that is no multiple of any vector width.
void swiglu_inputs(std::vector<float>& gate, std::vector<float>& up, std::vector<float>& dact) {
  const size_t n = 4099;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  gate.resize(n);
  up.resize(n);
  dact.resize(n);
  for (size_t i = 0; i < n; ++i) {
    gate[i] = normal(rng);
    up[i] = normal(rng);
    dact[i] = normal(rng);
  }
  gate[17] = 95.0f;
  gate[18] = -95.0f;
  gate[1001] = std::numeric_limits<float>::infinity();
  gate[2002] = 88.5f;
}

TEST(GlueSimd, SwigluForwardMatchesScalarLoop) {
  for_each_target([&] {
    std::vector<float> gate, up, dact;
    swiglu_inputs(gate, up, dact);
    const int64_t n = static_cast<int64_t>(gate.size());
    std::vector<float> act(gate.size());
    swiglu_forward_f32(gate.data(), up.data(), n, act.data());
    for (int64_t i = 0; i < n; ++i) {
      const float expected = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
      ASSERT_TRUE(same_float(expected, act[i], gate[i])) << "element " << i;
    }
  });
}

TEST(GlueSimd, SwigluBackwardMatchesScalarLoop) {
  for_each_target([&] {
    std::vector<float> gate, up, dact;
    swiglu_inputs(gate, up, dact);
    const int64_t n = static_cast<int64_t>(gate.size());
    std::vector<float> dgate(gate.size()), dup(gate.size());
    swiglu_backward_f32(gate.data(), up.data(), dact.data(), n, dgate.data(), dup.data());
    for (int64_t i = 0; i < n; ++i) {
      const float g = gate[i];
      const float sig = 1.0f / (1.0f + std::exp(-g));
      const float silu = g * sig;
      ASSERT_TRUE(same_float(dact[i] * up[i] * sig * (1.0f + g * (1.0f - sig)), dgate[i], g))
          << "element " << i;
      ASSERT_TRUE(same_float(dact[i] * silu, dup[i], g)) << "element " << i;
    }
  });
}

// The layer's row loops (moe/swiglu.h) in f32, with the fused gate|up
// layout's stride, equal to the double-free scalar formula row by row.
TEST(GlueSimd, SwigluRowsWithStrideMatchScalarLoop) {
  for_each_target([&] {
    const int64_t rows = 37, width = 67, stride = 2 * width;
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0.0f, 2.0f);
    std::vector<float> h(static_cast<size_t>(rows * stride)), dact(static_cast<size_t>(rows * width));
    for (float& v : h) v = normal(rng);
    for (float& v : dact) v = normal(rng);
    std::vector<float> act(dact.size()), dh(h.size(), -1.0f);
    swiglu_forward(h.data(), h.data() + width, rows, width, stride, act.data());
    swiglu_backward(h.data(), h.data() + width, dact.data(), rows, width, stride, dh.data(),
                    dh.data() + width);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < width; ++i) {
        const float g = h[r * stride + i], u = h[r * stride + width + i], da = dact[r * width + i];
        ASSERT_TRUE(same_float(g / (1.0f + std::exp(-g)) * u, act[r * width + i], g));
        const float sig = 1.0f / (1.0f + std::exp(-g));
        ASSERT_TRUE(same_float(da * u * sig * (1.0f + g * (1.0f - sig)), dh[r * stride + i], g));
        ASSERT_TRUE(same_float(da * (g * sig), dh[r * stride + width + i], g));
      }
    }
  });
}

}  // namespace
}  // namespace raggemm::moe
