// Helpers shared by the MoE layer tests: deterministic inputs, copying
// parameters between layers of different scalar types, and norms.
#pragma once

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
