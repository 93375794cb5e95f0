// Parameters and their reproducible initialisation.
#include <cmath>
#include <cstdint>

#include "raggemm/moe.h"

namespace raggemm::moe {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t hash_name(const std::string& name) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h;
}

// A uniform in (0, 1) from 53 random bits.
double unit(uint64_t bits) { return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53; }

}  // namespace

template <class T>
void Param<T>::reset(std::string param_name, Shape param_shape, bool is_trainable) {
  name = std::move(param_name);
  shape = std::move(param_shape);
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  value.assign(static_cast<size_t>(count), T(0));
  grad.assign(static_cast<size_t>(count), T(0));
  trainable = is_trainable;
}

template <class T>
void init_normal(Param<T>& param, uint64_t seed, double stddev) {
  const uint64_t key = splitmix64(seed ^ hash_name(param.name));
  const int64_t count = param.size();
  for (int64_t i = 0; i < count; i += 2) {
    // Box-Muller on a counter-based stream: element i depends only on (seed, name, i).
    const double u1 = unit(splitmix64(key + 2 * static_cast<uint64_t>(i)));
    const double u2 = unit(splitmix64(key + 2 * static_cast<uint64_t>(i) + 1));
    const double radius = std::sqrt(-2.0 * std::log(u1)) * stddev;
    param.value[i] = static_cast<T>(radius * std::cos(2 * M_PI * u2));
    if (i + 1 < count) param.value[i + 1] = static_cast<T>(radius * std::sin(2 * M_PI * u2));
  }
}

template struct Param<float>;
template struct Param<double>;
template void init_normal<float>(Param<float>&, uint64_t, double);
template void init_normal<double>(Param<double>&, uint64_t, double);

}  // namespace raggemm::moe
