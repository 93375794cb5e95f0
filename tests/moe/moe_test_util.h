// Helpers shared by the MoE layer tests: deterministic inputs, copying
// parameters between layers of different scalar types, and norms.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "raggemm/moe.h"

namespace raggemm::moe::testing {

inline std::vector<double> random_values(int64_t count, uint64_t seed, double scale = 1.0) {
  Param<double> p;
  p.reset("input", {count});
  init_normal(p, seed, scale);
  return p.value;
}

template <class To, class From>
std::vector<To> cast_values(const std::vector<From>& values) {
  return std::vector<To>(values.begin(), values.end());
}

// Copies every parameter value of `from` into `to` (same config, same order).
template <class To, class From>
void copy_params(const std::vector<Param<From>*>& from, const std::vector<Param<To>*>& to) {
  for (size_t i = 0; i < from.size(); ++i) {
    for (size_t j = 0; j < from[i]->value.size(); ++j) {
      to[i]->value[j] = static_cast<To>(from[i]->value[j]);
    }
  }
}

// ||a - b|| / ||b||.
template <class A, class B>
double relative_frobenius(const std::vector<A>& a, const std::vector<B>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    diff += d * d;
    norm += static_cast<double>(b[i]) * static_cast<double>(b[i]);
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
}

// A layer's second step on new values in the same input buffers (the
// layer's own buffers keep their addresses too) gives, bit for bit, what a
// fresh layer with the same parameters gives on them: nothing of the first
// step (a memoized bf16 copy) is read again. run(layer, x, probe, out, dx)
// is one forward and backward; grads and dx start at zero each step.
template <class Layer, class Run>
void expect_second_step_is_a_fresh_layers_first(Layer& stepped, Layer& fresh, int64_t n,
                                                 const Run& run) {
  std::vector<float> x = cast_values<float>(random_values(n, 21));
  std::vector<float> probe = cast_values<float>(random_values(n, 22));
  auto step = [&](Layer& layer, std::vector<float>& out, std::vector<float>& dx) {
    for (auto* p : layer.params()) std::fill(p->grad.begin(), p->grad.end(), 0.0f);
    std::fill(dx.begin(), dx.end(), 0.0f);
    run(layer, x, probe, out, dx);
  };
  std::vector<float> out(x.size()), dx(x.size());
  step(stepped, out, dx);
  const std::vector<double> x2 = random_values(n, 23), probe2 = random_values(n, 24);
  std::copy(x2.begin(), x2.end(), x.begin());  // new values, the same buffers
  std::copy(probe2.begin(), probe2.end(), probe.begin());
  step(stepped, out, dx);
  std::vector<float> want(x.size()), want_dx(x.size());
  step(fresh, want, want_dx);
  EXPECT_EQ(out, want);
  EXPECT_EQ(dx, want_dx);
  for (size_t i = 0; i < fresh.params().size(); ++i) {
    EXPECT_EQ(stepped.params()[i]->grad, fresh.params()[i]->grad) << fresh.params()[i]->name;
  }
}

// Did the build enable AddressSanitizer? Big shapes are skipped there (a
// smaller shape covers the same code).
constexpr bool kSanitized =
#if defined(__SANITIZE_ADDRESS__)
    true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    true;
#else
    false;
#endif
#else
    false;
#endif

}  // namespace raggemm::moe::testing
