#include "kernels/v1_metadata.h"

#include <algorithm>

namespace raggemm::kernels {

V1Metadata build_v1_metadata(const int64_t* starts, int64_t group_offset, int64_t local_groups,
                             int64_t m, int64_t tile) {
  V1Metadata meta;
  meta.m_tiles = (m + tile - 1) / tile;
  meta.tile_visit_begin.assign(static_cast<size_t>(meta.m_tiles) + 1, 0);
  // Groups are contiguous and sorted, so one sweep over (tile, group) pairs
  // in row order visits each overlap once.
  int64_t g = 0;
  for (int64_t t = 0; t < meta.m_tiles; ++t) {
    const int64_t r0 = t * tile;
    const int64_t r1 = std::min(m, r0 + tile);
    meta.tile_visit_begin[t] = static_cast<int64_t>(meta.visits.size());
    while (g < local_groups && starts[group_offset + g + 1] <= r0) ++g;
    for (int64_t h = g; h < local_groups; ++h) {
      const int64_t begin = std::max(r0, starts[group_offset + h]);
      const int64_t end = std::min(r1, starts[group_offset + h + 1]);
      if (starts[group_offset + h] >= r1) break;
      if (end > begin) meta.visits.push_back({t, h, begin, end});
    }
  }
  meta.tile_visit_begin[meta.m_tiles] = static_cast<int64_t>(meta.visits.size());
  return meta;
}

}  // namespace raggemm::kernels
