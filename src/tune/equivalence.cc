#include "tune/equivalence.h"

#include <algorithm>
#include <cmath>

#include "core/group_offsets.h"

namespace raggemm::tune {
namespace {

// f32 accumulation of k products may differ from the f64 sum by about
// k * eps * sum|products| in the worst case; real differences are far
// smaller, and any real bug (a skipped tile, a wrong group, a swapped axis)
// is of the order of the values themselves.
constexpr double kRelativeBound = 1e-5;
constexpr double kAbsoluteBound = 1e-6;

std::vector<int64_t> spread(int64_t count, int samples) {
  std::vector<int64_t> picks;
  if (count <= 0) return picks;
  const int64_t want = std::min<int64_t>(count, samples);
  for (int64_t i = 0; i < want; ++i) picks.push_back(i * count / want);
  picks.push_back(count - 1);
  std::sort(picks.begin(), picks.end());
  picks.erase(std::unique(picks.begin(), picks.end()), picks.end());
  return picks;
}

}  // namespace

SampledReference sample_reference(const GmmShape& shape, const std::vector<int32_t>& group_sizes,
                                  const float* lhs, const float* rhs, int samples) {
  SampledReference ref;
  const int64_t m = shape.m, k = shape.k, n = shape.n;
  ref.n = n;
  const std::vector<int64_t> starts = group_row_starts(group_sizes);
  auto add_row = [&](int64_t offset, const std::vector<double>& sum, const std::vector<double>& abs_sum,
                     int64_t terms) {
    ref.row_offsets.push_back(offset);
    for (int64_t j = 0; j < n; ++j) {
      ref.expected.push_back(sum[static_cast<size_t>(j)]);
      ref.bound.push_back(kRelativeBound * static_cast<double>(std::max<int64_t>(terms, 1)) / 64.0 *
                              abs_sum[static_cast<size_t>(j)] +
                          kAbsoluteBound);
    }
  };
  std::vector<double> sum(static_cast<size_t>(n)), abs_sum(static_cast<size_t>(n));

  if (shape.pass != Pass::kGradRhs) {
    const bool transposed = shape.pass == Pass::kGradLhs;
    for (int64_t row : spread(m, samples)) {
      std::fill(sum.begin(), sum.end(), 0.0);
      std::fill(abs_sum.begin(), abs_sum.end(), 0.0);
      const auto owner = std::upper_bound(starts.begin(), starts.end(), row) - starts.begin() - 1;
      if (row < starts.back()) {
        const float* b = rhs + owner * k * n;
        for (int64_t p = 0; p < k; ++p) {
          const double a = lhs[row * k + p];
          for (int64_t j = 0; j < n; ++j) {
            const double product = a * (transposed ? b[j * k + p] : b[p * n + j]);
            sum[static_cast<size_t>(j)] += product;
            abs_sum[static_cast<size_t>(j)] += std::fabs(product);
          }
        }
      }
      add_row(row * n, sum, abs_sum, k);  // rows past the groups: zero
    }
    return ref;
  }
  // tgmm: out[g][i, :] = sum over rows r of g of lhs[r, i] * dout[r, :].
  const float* dout = rhs;
  const int64_t groups = static_cast<int64_t>(group_sizes.size());
  const int per_group = std::max(1, samples / static_cast<int>(std::max<int64_t>(groups, 1)));
  for (int64_t g : spread(groups, samples)) {
    for (int64_t i : spread(k, per_group)) {
      std::fill(sum.begin(), sum.end(), 0.0);
      std::fill(abs_sum.begin(), abs_sum.end(), 0.0);
      for (int64_t r = starts[static_cast<size_t>(g)]; r < starts[static_cast<size_t>(g) + 1]; ++r) {
        const double a = lhs[r * k + i];
        for (int64_t j = 0; j < n; ++j) {
          const double product = a * dout[r * n + j];
          sum[static_cast<size_t>(j)] += product;
          abs_sum[static_cast<size_t>(j)] += std::fabs(product);
        }
      }
      add_row((g * k + i) * n, sum, abs_sum, group_sizes[static_cast<size_t>(g)]);
    }
  }
  return ref;
}

bool matches_reference(const SampledReference& reference, const float* out) {
  for (size_t s = 0; s < reference.row_offsets.size(); ++s) {
    const float* row = out + reference.row_offsets[s];
    for (int64_t j = 0; j < reference.n; ++j) {
      const size_t at = s * static_cast<size_t>(reference.n) + static_cast<size_t>(j);
      const double difference = std::fabs(static_cast<double>(row[j]) - reference.expected[at]);
      if (!(difference <= reference.bound[at])) return false;  // NaN fails too
    }
  }
  return true;
}

}  // namespace raggemm::tune
