// Output tiling shared by both tgmm generations: items are (local group,
// K-tile of tiles.m rows, N-tile of tiles.n columns) of out [G_local, K, N].
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/gmm_kernel.h"

namespace raggemm::kernels {

struct TgmmTile {
  int64_t group, row0, rows, col0, cols;
};

struct TgmmTiling {
  int64_t k = 0, n = 0, tm = 1, tn = 1, groups = 0;
  int64_t row_tiles() const { return (k + tm - 1) / tm; }
  int64_t col_tiles() const { return (n + tn - 1) / tn; }
  int64_t tiles_per_group() const { return row_tiles() * col_tiles(); }
  int64_t items() const { return groups * tiles_per_group(); }
  TgmmTile tile(int64_t item) const {
    const int64_t g = item / tiles_per_group();
    const int64_t rest = item % tiles_per_group();
    const int64_t row0 = (rest / col_tiles()) * tm;
    const int64_t col0 = (rest % col_tiles()) * tn;
    return {g, row0, std::min(tm, k - row0), col0, std::min(tn, n - col0)};
  }
};

inline TgmmTiling tgmm_tiling(const TgmmProblem& p, const Tiles& t) {
  return TgmmTiling{p.k, p.n, t.m, t.n, p.local_groups};
}

inline void zero_tile(float* c, int64_t rows, int64_t cols, int64_t ldc) {
  for (int64_t i = 0; i < rows; ++i) std::memset(c + i * ldc, 0, sizeof(float) * cols);
}

// Output stage of tgmm: an optional per-group scalar scale.
inline void scale_tile(const TgmmProblem& p, const TgmmTile& tile, float* c) {
  if (!p.out_group_scale) return;
  const float scale = p.out_group_scale[tile.group];
  for (int64_t i = 0; i < tile.rows; ++i) {
    for (int64_t j = 0; j < tile.cols; ++j) c[i * p.n + j] *= scale;
  }
}

}  // namespace raggemm::kernels
