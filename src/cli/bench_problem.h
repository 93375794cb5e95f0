// The problems that `raggemm bench` and bench/gmm_bench.cc time: which pass,
// which shapes, and group sizes drawn from a named distribution with a fixed
// seed, so two runs (and the two tools) time exactly the same routing.
//
// Header-only so that the CLI, the Google Benchmark binary and the tests
// share it without a library of their own. Random numbers come from our own
// splitmix64 and mappings (not <random>'s distributions, whose output differs
// between standard libraries), so the sizes are the same on every platform.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "raggemm/error.h"
#include "raggemm/tensor.h"

namespace raggemm::bench {

// The three passes of DESIGN.md section 1, in bench terms for a problem of
// shape (m, k, n):
//   gmm:  a = lhs  [M,K], b = rhs  [G,K,N], out [M,N]   out = a @ b[g]
//   dlhs: a = dout [M,N], b = rhs  [G,K,N], out [M,K]   out = a @ b[g]^T
//   tgmm: a = lhs  [M,K], b = dout [M,N],   out [G,K,N] out[g] = a_g^T @ b_g
// Each costs 2*M*K*N flops when the groups cover all M rows.
enum class BenchOp { kGmm, kDlhs, kTgmm };

inline const char* bench_op_name(BenchOp op) {
  switch (op) {
    case BenchOp::kGmm:
      return "gmm";
    case BenchOp::kDlhs:
      return "dlhs";
    case BenchOp::kTgmm:
      return "tgmm";
  }
  return "?";
}

inline BenchOp parse_bench_op(const std::string& text, const std::string& argument) {
  for (BenchOp op : {BenchOp::kGmm, BenchOp::kDlhs, BenchOp::kTgmm}) {
    if (text == bench_op_name(op)) return op;
  }
  fail(argument, text, "expected gmm, dlhs or tgmm");
}

struct BenchShapes {
  Shape a, b, out;
};

inline BenchShapes bench_shapes(BenchOp op, int64_t m, int64_t k, int64_t n, int64_t groups) {
  switch (op) {
    case BenchOp::kGmm:
      return {{m, k}, {groups, k, n}, {m, n}};
    case BenchOp::kDlhs:
      return {{m, n}, {groups, k, n}, {m, k}};
    case BenchOp::kTgmm:
      return {{m, k}, {m, n}, {groups, k, n}};
  }
  return {};
}

// How group sizes are drawn. All of them sum to exactly M.
//   uniform:  each of the M rows picks a group uniformly at random
//             (a multinomial draw: sizes near M/G, not exactly equal);
//   zipf:S:   size of the group of rank r proportional to 1/r^S, ranks
//             shuffled over the groups; S = 0 is an even split;
//   empty:F:  round(F*G) groups, chosen at random, get no rows (at most
//             G-1 of them); the rows go uniformly to the others.
struct GroupDist {
  enum class Kind { kUniform, kZipf, kEmpty };
  Kind kind = Kind::kUniform;
  double param = 0;
  std::string text = "uniform";
};

inline GroupDist parse_group_dist(const std::string& text, const std::string& argument) {
  auto number_after = [&](size_t prefix, double min, double max, bool max_open) {
    double value = 0;
    const char* begin = text.data() + prefix;
    const char* end = text.data() + text.size();
    auto [stop, status] = std::from_chars(begin, end, value);
    if (begin == end || status != std::errc() || stop != end || !std::isfinite(value) ||
        value < min || value > max || (max_open && value == max)) {
      fail(argument, text,
           "expected uniform, zipf:S with 0 <= S <= 16, or empty:F with 0 <= F < 1");
    }
    return value;
  };
  if (text == "uniform") return {GroupDist::Kind::kUniform, 0, text};
  if (text.rfind("zipf:", 0) == 0) {
    return {GroupDist::Kind::kZipf, number_after(5, 0, 16, false), text};
  }
  if (text.rfind("empty:", 0) == 0) {
    return {GroupDist::Kind::kEmpty, number_after(6, 0, 1, true), text};
  }
  fail(argument, text, "expected uniform, zipf:S with 0 <= S <= 16, or empty:F with 0 <= F < 1");
}

// A tiny deterministic generator: splitmix64.
class SplitMix {
 public:
  explicit SplitMix(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, bound); bound >= 1. Lemire's multiply-shift, whose bias
  // (< bound / 2^64) is far below anything a benchmark can see.
  uint64_t below(uint64_t bound) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * bound) >> 64);
  }
  // Uniform in [-1, 1).
  float symmetric_unit() {
    return static_cast<float>(static_cast<double>(next() >> 11) * 0x1.0p-52 - 1.0);
  }

 private:
  uint64_t state_;
};

template <class T>
void shuffle_with(std::vector<T>& items, SplitMix& rng) {
  for (size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[rng.below(i)]);
}

constexpr uint64_t kBenchSeed = 0x5eed2024ull;

// Group sizes for `rows` rows over `groups` >= 1 groups; they sum to `rows`.
inline std::vector<int32_t> draw_group_sizes(int64_t rows, int64_t groups, const GroupDist& dist,
                                             uint64_t seed = kBenchSeed) {
  require(groups >= 1, "groups", groups, "need at least one group");
  require(rows >= 0 && rows <= INT32_MAX, "m", rows, "rows must be in [0, 2^31)");
  SplitMix rng(seed);
  std::vector<int32_t> sizes(static_cast<size_t>(groups), 0);
  auto scatter_uniformly = [&](const std::vector<int64_t>& targets) {
    for (int64_t row = 0; row < rows; ++row) {
      ++sizes[static_cast<size_t>(targets[rng.below(targets.size())])];
    }
  };
  std::vector<int64_t> all(static_cast<size_t>(groups));
  std::iota(all.begin(), all.end(), 0);
  switch (dist.kind) {
    case GroupDist::Kind::kUniform:
      scatter_uniformly(all);
      break;
    case GroupDist::Kind::kZipf: {
      // Largest-remainder rounding of rows * w_r / sum(w), w_r = 1/r^S.
      std::vector<double> share(static_cast<size_t>(groups));
      for (int64_t r = 0; r < groups; ++r) share[r] = std::pow(double(r + 1), -dist.param);
      const double total = std::accumulate(share.begin(), share.end(), 0.0);
      std::vector<int64_t> by_rank(static_cast<size_t>(groups));
      std::vector<std::pair<double, int64_t>> remainders;
      int64_t assigned = 0;
      for (int64_t r = 0; r < groups; ++r) {
        const double exact = double(rows) * share[r] / total;
        by_rank[r] = static_cast<int64_t>(std::floor(exact));
        assigned += by_rank[r];
        remainders.emplace_back(exact - double(by_rank[r]), r);
      }
      std::stable_sort(remainders.begin(), remainders.end(),
                       [](const auto& x, const auto& y) { return x.first > y.first; });
      for (int64_t i = 0; assigned < rows; ++i, ++assigned) {
        ++by_rank[remainders[static_cast<size_t>(i % groups)].second];
      }
      shuffle_with(all, rng);  // all[r] is the group that gets rank r
      for (int64_t r = 0; r < groups; ++r) sizes[all[r]] = static_cast<int32_t>(by_rank[r]);
      break;
    }
    case GroupDist::Kind::kEmpty: {
      int64_t empty = std::llround(dist.param * double(groups));
      empty = std::min(empty, groups - 1);
      shuffle_with(all, rng);
      std::vector<int64_t> filled(all.begin() + empty, all.end());
      std::sort(filled.begin(), filled.end());
      scatter_uniformly(filled);
      break;
    }
  }
  return sizes;
}

// Fills a buffer with uniform values in [-1, 1) from a fixed seed.
inline void fill_symmetric(float* data, int64_t count, uint64_t seed) {
  SplitMix rng(seed);
  for (int64_t i = 0; i < count; ++i) data[i] = rng.symmetric_unit();
}

}  // namespace raggemm::bench
