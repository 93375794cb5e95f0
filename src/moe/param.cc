// Parameters and their reproducible initialisation.
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "core/float_bits.h"
#include "raggemm/error.h"
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
  bf16 = false;
  bits.clear();
}

template <class T>
void Param<T>::store_bf16() {
  require(std::is_same_v<T, float>, "weight_dtype", "bf16",
          "bf16 storage exists for f32 parameters only (" + name + ")");
  if (bf16) return;
  bits.resize(value.size());
  const int64_t count = static_cast<int64_t>(value.size());
  const T* src = value.data();
  uint16_t* dst = bits.data();
#pragma omp parallel for schedule(static) if (count > 65536)
  for (int64_t i = 0; i < count; ++i) dst[i] = core::bf16_bits_of(static_cast<float>(src[i]));
  std::vector<T>().swap(value);  // release the f32 bytes, not just clear them
  bf16 = true;
}

template <class T>
void Param<T>::set_values(const std::vector<float>& values) {
  require(static_cast<int64_t>(values.size()) == size(), "values", values.size(),
          "must have one value per element of " + name + " (" + std::to_string(size()) + ")");
  const int64_t count = size();
  if (bf16) {
#pragma omp parallel for schedule(static) if (count > 65536)
    for (int64_t i = 0; i < count; ++i) bits[i] = core::bf16_bits_of(values[i]);
  } else {
    for (int64_t i = 0; i < count; ++i) value[i] = static_cast<T>(values[i]);
  }
}

template <class T>
std::vector<float> Param<T>::values_f32() const {
  std::vector<float> out(static_cast<size_t>(size()));
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = bf16 ? core::float_of(static_cast<uint32_t>(bits[i]) << 16)
                  : static_cast<float>(value[i]);
  }
  return out;
}

template <class T>
int64_t Param<T>::storage_bytes() const {
  return size() * static_cast<int64_t>(bf16 ? sizeof(uint16_t) : sizeof(T));
}

template <class T>
WeightArg<T> Param<T>::weight() const {
  if constexpr (std::is_same_v<T, float>) {
    if (bf16) return WeightRef(bits.data());
    return WeightRef(value.data());
  } else {
    return value.data();
  }
}

template <class T>
void init_normal(Param<T>& param, uint64_t seed, double stddev) {
  require(!param.bf16, "param", param.name,
          "is stored as bf16: initialise it before the optimizer switches its storage");
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
