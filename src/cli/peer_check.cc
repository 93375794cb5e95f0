#include "cli/peer_check.h"

#include <cmath>
#include <vector>

#include "core/group_offsets.h"

namespace raggemm::bench {
namespace {

constexpr int kSamples = 512;

// The group of each row (-1 past the groups) and each group's first row.
struct Rows {
  std::vector<int64_t> group_of_row, first_row;
};

Rows rows_of(const PeerOperands& p) {
  Rows rows;
  rows.group_of_row.assign(static_cast<size_t>(p.m), -1);
  rows.first_row = group_row_starts(*p.group_sizes);
  for (size_t g = 0; g < p.group_sizes->size(); ++g) {
    for (int64_t row = rows.first_row[g]; row < rows.first_row[g + 1]; ++row) {
      rows.group_of_row[row] = int64_t(g);
    }
  }
  return rows;
}

// sum_i x[i * x_step] * y[i * y_step] in f64.
double dot(const float* x, int64_t x_step, const float* y, int64_t y_step, int64_t count) {
  double sum = 0;
  for (int64_t i = 0; i < count; ++i) sum += double(x[i * x_step]) * y[i * y_step];
  return sum;
}

// Element `index` of the exact output, in f64.
double reference(const PeerOperands& p, const Rows& rows, bool dense, int64_t index) {
  const int64_t k = p.k, n = p.n;
  if (p.op == BenchOp::kTgmm) {  // out[g, c, j] = sum_{r in g} a[r, c] b[r, j]
    const int64_t g = index / (k * n), c = index / n % k, j = index % n;
    const int64_t begin = dense ? 0 : rows.first_row[g];
    const int64_t end = dense ? p.m : rows.first_row[g + 1];
    return dot(p.a + begin * k + c, k, p.b + begin * n + j, n, end - begin);
  }
  // gmm: out[r, j] = sum_c a[r, c] b[g, c, j]; dlhs: out[r, c] = sum_j a[r, j] b[g, c, j].
  const bool gmm = p.op == BenchOp::kGmm;
  const int64_t width = gmm ? n : k, depth = gmm ? k : n;
  const int64_t a_row = gmm ? k : n;
  const int64_t r = index / width, col = index % width;
  const int64_t g = dense ? 0 : rows.group_of_row[r];
  if (g < 0) return 0;
  const float* weights = p.b + g * k * n;
  // gmm walks a column of b[g] (stride N); dlhs a row of it (stride 1).
  return dot(p.a + r * a_row, 1, gmm ? weights + col : weights + col * n, gmm ? n : 1, depth);
}

}  // namespace

double sampled_relative_error(const PeerOperands& p, const float* out, bool dense) {
  const Rows rows = rows_of(p);
  const int64_t count = dense ? dense_out_elements(p.op, p.m, p.k, p.n)
                        : p.op == BenchOp::kTgmm
                            ? int64_t(p.group_sizes->size()) * p.k * p.n
                            : dense_out_elements(p.op, p.m, p.k, p.n);
  SplitMix rng(kBenchSeed ^ 0xc4ec4ull);
  double diff = 0, norm = 0;
  for (int i = 0; i < kSamples; ++i) {
    const auto index = static_cast<int64_t>(rng.below(static_cast<uint64_t>(count)));
    const double expected = reference(p, rows, dense, index);
    const double error = double(out[index]) - expected;
    diff += error * error;
    norm += expected * expected;
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

}  // namespace raggemm::bench
