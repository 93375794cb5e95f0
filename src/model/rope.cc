#include "model/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "raggemm/error.h"

namespace raggemm::model {
namespace {

// The dimension index at which a frequency makes `rotations` turns over
// `positions` (YaRN, arXiv:2309.00071, section 3.2).
double correction_dim(double rotations, int64_t dim, double base, double positions) {
  return static_cast<double>(dim) * std::log(positions / (rotations * 2 * std::numbers::pi)) /
         (2 * std::log(base));
}

}  // namespace

std::vector<double> rope_frequencies(const RopeConfig& config, int64_t dim) {
  require(dim >= 2 && dim % 2 == 0, "rope dimension", dim, "must be even and at least 2");
  require(config.max_timescale > 1, "rope_max_timescale", config.max_timescale,
          "must be greater than 1");
  const int64_t half = dim / 2;
  std::vector<double> freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    freq[i] = std::pow(config.max_timescale, -2.0 * static_cast<double>(i) / static_cast<double>(dim));
  }
  if (config.type == RopeType::kDefault) return freq;
  require(config.factor >= 1, "rope_factor", config.factor, "must be at least 1");
  require(config.beta_fast > 0 && config.beta_slow > 0, "beta_fast,beta_slow",
          std::to_string(config.beta_fast) + "," + std::to_string(config.beta_slow),
          "must be positive");
  const double positions = static_cast<double>(config.original_max_position_embeddings);
  double low = std::floor(correction_dim(config.beta_fast, dim, config.max_timescale, positions));
  double high = std::ceil(correction_dim(config.beta_slow, dim, config.max_timescale, positions));
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // a one-point ramp: avoid 0/0
  for (int64_t i = 0; i < half; ++i) {
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    // ramp 0 (high frequencies, below `low`) keeps f; ramp 1 interpolates f / factor.
    freq[i] = freq[i] / config.factor * ramp + freq[i] * (1 - ramp);
  }
  return freq;
}

double mla_softmax_factor(const RopeConfig& config) {
  if (config.type != RopeType::kYarn ||
      config.max_position_embeddings <= config.original_max_position_embeddings) {
    return 1.0;
  }
  const double m = 0.1 * config.mscale * std::log(config.factor) + 1.0;
  return m * m;
}

Rope::Rope(const RopeConfig& config, int64_t dim)
    : type_(config.type), dim_(dim), frequencies_(rope_frequencies(config, dim)) {}

void Rope::prepare(int64_t seq_len) {
  if (seq_len <= table_len_) return;
  const int64_t half = dim_ / 2;
  cos_.resize(static_cast<size_t>(seq_len * half));
  sin_.resize(cos_.size());
  for (int64_t p = 0; p < seq_len; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(p) * frequencies_[i];
      cos_[p * half + i] = std::cos(angle);
      sin_[p * half + i] = std::sin(angle);
    }
  }
  table_len_ = seq_len;
}

template <class T>
void Rope::apply(T* x, int64_t tokens, int64_t seq_len, int64_t heads, int64_t row_stride,
                 int64_t head_stride, bool inverse) {
  prepare(seq_len);
  const int64_t half = dim_ / 2;
  // Pair i is (first + i * step, first + i * step + partner).
  const int64_t step = type_ == RopeType::kYarn ? 2 : 1;
  const int64_t partner = type_ == RopeType::kYarn ? 1 : half;
  const T sign = inverse ? T(-1) : T(1);
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t position = t % seq_len;
    const double* c = cos_.data() + position * half;
    const double* s = sin_.data() + position * half;
    for (int64_t h = 0; h < heads; ++h) {
      T* v = x + t * row_stride + h * head_stride;
      for (int64_t i = 0; i < half; ++i) {
        T& a = v[i * step];
        T& b = v[i * step + partner];
        const T cs = static_cast<T>(c[i]), sn = sign * static_cast<T>(s[i]);
        const T a0 = a, b0 = b;
        a = a0 * cs - b0 * sn;
        b = b0 * cs + a0 * sn;
      }
    }
  }
}

template void Rope::apply<float>(float*, int64_t, int64_t, int64_t, int64_t, int64_t, bool);
template void Rope::apply<double>(double*, int64_t, int64_t, int64_t, int64_t, int64_t, bool);

}  // namespace raggemm::model
