// Group metadata of v1 (megablox-style) gmm, built per call from the group
// sizes: which (tile, group) pairs to visit, tiles laid over the global row
// space in steps of `tile`. (v1 tgmm walks the same tiles over the tokens
// per group without a table: TgmmSlicing in kernels/tgmm_driver.h.)
#pragma once

#include <cstdint>
#include <vector>

namespace raggemm::kernels {

struct V1Visit {
  int64_t tile;       // index of the tile over [0, M)
  int64_t group;      // local group index
  int64_t row_begin;  // rows of the tile that the group owns
  int64_t row_end;
};

struct V1Metadata {
  int64_t m_tiles = 0;
  std::vector<V1Visit> visits;              // ordered by tile, then group
  std::vector<int64_t> tile_visit_begin;    // size m_tiles + 1
};

// Visits for local groups [0, local_groups) (global group_offset + g); empty
// groups get no visit; tiles covering only rows past the groups get none.
V1Metadata build_v1_metadata(const int64_t* starts, int64_t group_offset, int64_t local_groups,
                             int64_t m, int64_t tile);

}  // namespace raggemm::kernels
