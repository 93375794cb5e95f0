#include "backends/cpu/heuristic.h"

#include <algorithm>
#include <numeric>

#include "kernels/microkernel.h"

namespace raggemm::backends::cpu {
namespace {

constexpr int64_t kFloatBytes = 4;  // packed panels are f32 whatever the storage
// The rules follow the loops of the drivers (docs/kernels.md): the macro
// kernel keeps one kc x NR B micro-panel while MR x kc A micro-panels stream
// through, so the A micro-panel (with its neighbour) stays in L1:
// MR * kc <= half of L1. A long kc is cheap (the microkernel streams B from
// L2 at a fraction of its bandwidth) and amortizes the C tile's load and
// store, so kc takes all of that; the B micro-panel, at most kL2ShareBPanel
// of L2, is the second bound. Measured at M = 4096, K = N = 1024, 2 threads
// (December 2026, Zen 5): k = 512 or 1024 ran 2-15% faster than k = 256.
constexpr double kL1ShareA = 0.5;
// The forward v2 gmm runs a group that fits one m-tile as a small item: B
// in chunks (an eighth of L2: 128 columns at kc = 256 on a 1 MiB L2), each
// gathered from kc rows of the stored rhs that lie N floats apart, while
// the next chunk's source streams in; a
// shorter kc means fewer strided rows (and pages) in flight per chunk. So
// when most groups fit one m-tile (the 90th percentile does), its k takes
// the A micro-panel within a quarter of L1 (kc = 256 on a 48 KiB L1,
// MR = 12), while m keeps the bound from the regular k. Measured at
// M = 4096, 2 threads, same-run medians of 4 rounds (December 2026, Zen 5),
// k = 256 over k = 512: 128 groups 0.97-1.39x (1.39x at K = 2048, N = 768,
// uniform), 32 groups 1.03-1.06x. Larger groups run whole m x k blocks,
// where every k-slice re-reads the C block: at 8 groups k = 256 matched 512
// on a quiet machine but lost 5-10% on four of five shapes under
// neighbours' memory traffic, so they keep the regular k. dlhs, whose B
// chunks are runs of contiguous rhs rows, keeps the regular k: there
// k = 256 lost 7-20% (K = 4096, N = 1024, G = 8/32/128).
constexpr double kL1ShareAV2Gmm = 0.25;
constexpr double kL2ShareBPanel = 0.125;
// The packed A block (m x kc) is re-read from L2 for every B micro-panel, so
// it takes 40% of L2 and leaves the rest to the B micro-panel and the C rows.
constexpr double kL2ShareA = 0.4;
// The packed B block (kc x n) is read from L3 once per m-tile; each thread
// holds one, so n takes up to half of L3 divided among the threads. Since
// every n-tile re-packs the item's A block, the widest n wins: on the shapes
// of the benchmark table n = N beat n = 256 by 1.1-1.3x for gmm and dlhs.
constexpr double kL3ShareB = 0.5;
// tgmm (v2) contracts each group's tokens from its own first token, so a
// k-tile longer than a group costs that group nothing, while every extra
// k-slice of a long group re-reads and re-writes its whole m x n
// accumulator block (from L3 once the block outgrows L2). So k takes the
// longest group, up to the B micro-panel's bound alone: past the A
// micro-panel's L1 bound, since streaming that panel from L2 costs less
// than one more accumulator pass (bound 1024 against 512, same run, medians
// of 3 rounds: 0.99-1.10x on the 10 benchmark shapes it changes, 1.06-1.10x
// at 8 groups). m grows until the packed A block (m x k) takes its
// thread's share of L3: every m-tile re-packs the dout block, and the
// output tiles of a group's short contraction are written once. Measured
// at M = 4096, 2 threads (December 2026, Zen 5) against k at the 90th
// percentile of the groups and m filling L2: 128 zipf:1.2 groups 1.13x
// (K = N = 1024) and 1.09x (K = 2048, N = 768); 8 uniform groups
// 1.03-1.2x; 32 groups 1.00-1.04x; 128 uniform groups unchanged.
constexpr double kL3ShareTgmmA = 0.5;
// v1 tgmm (explicit only) visits every group inside each (K-tile, N-tile)
// item, so its m keeps the packed A block within L2.
constexpr double kL2ShareTgmmV1 = 1.0;
// An explicit v1 keeps the v2 tile while it recomputes at most this fraction
// of rows on tiles straddling group boundaries (beyond it, see v1_tile).
constexpr double kMaxV1Waste = 0.02;
// Groups up to this quantile of the sizes fit one ragged-axis tile in v2.
constexpr double kGroupQuantile = 0.9;

int64_t round_up(int64_t value, int64_t multiple) { return (value + multiple - 1) / multiple * multiple; }
int64_t round_down(int64_t value, int64_t multiple) { return value / multiple * multiple; }

// Splits `extent` into the fewest pieces of at most `limit`, evenly, and
// rounds the piece up to `align` (so a dim just over the limit gives two
// halves instead of a full tile and a sliver).
int64_t balanced_tile(int64_t extent, int64_t limit, int64_t align) {
  limit = std::max(limit, align);
  if (extent <= 0) return align;
  const int64_t pieces = (extent + limit - 1) / limit;
  return std::min(round_up((extent + pieces - 1) / pieces, align), round_up(extent, align));
}

int64_t mean_nonempty(const std::vector<int64_t>& sizes) {
  int64_t total = 0, nonempty = 0;
  for (int64_t size : sizes) {
    total += size;
    nonempty += size > 0;
  }
  return nonempty == 0 ? 0 : (total + nonempty - 1) / nonempty;
}

// The q-quantile of the non-empty group sizes (0 if none).
int64_t quantile_nonempty(const std::vector<int64_t>& sizes, double q) {
  std::vector<int64_t> nonempty;
  for (int64_t size : sizes) {
    if (size > 0) nonempty.push_back(size);
  }
  if (nonempty.empty()) return 0;
  std::sort(nonempty.begin(), nonempty.end());
  const auto at = static_cast<size_t>(q * static_cast<double>(nonempty.size() - 1) + 0.5);
  return nonempty[std::min(at, nonempty.size() - 1)];
}

bool all_nonempty_equal(const std::vector<int64_t>& sizes) {
  int64_t first = -1;
  for (int64_t size : sizes) {
    if (size == 0) continue;
    if (first < 0) first = size;
    if (size != first) return false;
  }
  return true;
}

// The tile of the ragged axis (gmm: m over rows; tgmm: k over tokens) for
// v2: each group's rows split evenly into tiles of at most `limit`.
int64_t ragged_tile(const std::vector<int64_t>& sizes, int64_t limit, int64_t align) {
  if (mean_nonempty(sizes) == 0) return align;
  // v2 tiles each group from its own first row, so a group just over the
  // tile gets a sliver tile that pays a whole packing pass (of B in gmm) for
  // a few rows. Sizing from a high quantile of the group sizes rather than
  // the mean makes most groups one tile.
  return balanced_tile(quantile_nonempty(sizes, kGroupQuantile), limit, align);
}

// The ragged-axis tile for an explicit v1, which lays tiles over the global
// row space and recomputes a whole tile once per group it touches.
// Balanced groups: a tile that divides the group size wastes nothing.
// Otherwise the v2 tile while it wastes at most kMaxV1Waste; beyond that a
// smaller tile wastes fewer recomputed rows while every tile visit also
// pays fixed costs (packing its B; in gmm also the row-masked copy-out) worth
// about kV1VisitOverheadTiles register tiles of rows: the tile minimizing
// (1 + waste(t)) * (t + overhead) / t over the aligned tiles up to `limit`.
constexpr int64_t kV1VisitOverheadTiles = 2;

int64_t v1_tile(const std::vector<int64_t>& sizes, int64_t limit, int64_t align) {
  const int64_t mean = mean_nonempty(sizes);
  if (mean == 0) return align;
  if (all_nonempty_equal(sizes)) {
    int64_t pieces = (mean + limit - 1) / limit;
    while (pieces <= mean && mean % pieces != 0) ++pieces;
    const int64_t aligned = mean / pieces;
    if (aligned >= align && v1_row_waste(sizes, aligned) <= kMaxV1Waste) return aligned;
  }
  const int64_t v2_tile = ragged_tile(sizes, limit, align);
  if (v1_row_waste(sizes, v2_tile) <= kMaxV1Waste) return v2_tile;
  const auto overhead = static_cast<double>(kV1VisitOverheadTiles * align);
  int64_t best = align;
  double best_cost = 0;
  for (int64_t tile = align; tile <= std::max(limit, align); tile += align) {
    const auto rows = static_cast<double>(tile);
    const double cost = (1.0 + v1_row_waste(sizes, tile)) * (rows + overhead) / rows;
    if (tile == align || cost < best_cost) best = tile, best_cost = cost;
  }
  return best;
}

int64_t max_group(const std::vector<int64_t>& sizes) {
  return sizes.empty() ? 0 : *std::max_element(sizes.begin(), sizes.end());
}

}  // namespace

MachineModel this_machine(int threads) { return kernels::this_machine_model(threads); }

std::vector<int64_t> representative_group_sizes(const GmmShape& shape) {
  if (!shape.group_sizes.empty()) {
    return std::vector<int64_t>(shape.group_sizes.begin(), shape.group_sizes.end());
  }
  const int64_t groups = std::max<int64_t>(shape.groups, 1);
  std::vector<int64_t> sizes(static_cast<size_t>(groups), shape.m / groups);
  for (int64_t g = 0; g < shape.m % groups; ++g) ++sizes[static_cast<size_t>(g)];
  return sizes;
}

double v1_row_waste(const std::vector<int64_t>& group_sizes, int64_t tile) {
  const int64_t total = std::accumulate(group_sizes.begin(), group_sizes.end(), int64_t{0});
  if (total == 0 || tile <= 0) return 0.0;
  int64_t computed = 0;
  size_t g = 0;
  int64_t group_end = 0;  // end row of group g (exclusive)
  for (int64_t start = 0; start < total; start += tile) {
    const int64_t end = std::min(start + tile, total);
    // Visits of this tile: one per non-empty group overlapping [start, end).
    int64_t visits = 0;
    while (g < group_sizes.size() && group_end + group_sizes[g] <= start) group_end += group_sizes[g++];
    int64_t row = group_end;
    for (size_t h = g; h < group_sizes.size() && row < end; ++h) {
      if (group_sizes[h] > 0 && row + group_sizes[h] > start) ++visits;
      row += group_sizes[h];
    }
    computed += visits * (end - start);
  }
  return static_cast<double>(computed) / static_cast<double>(total) - 1.0;
}

TuneCandidate heuristic(const GmmShape& shape, const MachineModel& machine,
                        std::optional<KernelVersion> kernel) {
  const int64_t mr = machine.mr, nr = machine.nr;
  // k steps in whole cache lines of f32, so every packed panel row starts
  // on a line of its own.
  const int64_t k_align = std::max<int64_t>(1, machine.line_bytes / kFloatBytes);
  const Tiles extents = kernel_extents(shape);
  const std::vector<int64_t> sizes = representative_group_sizes(shape);

  // k: the MR x kc A micro-panel within L1's share, the kc x NR B
  // micro-panel within its share of L2.
  const auto a_panel_bytes = static_cast<int64_t>(kL1ShareA * static_cast<double>(machine.caches.l1d));
  const auto b_panel_bytes = static_cast<int64_t>(kL2ShareBPanel * static_cast<double>(machine.caches.l2));
  // The B micro-panel's bound alone: dlhs's whole rows and tgmm's k.
  const int64_t b_panel_k_limit = std::max(k_align, round_down(b_panel_bytes / (nr * kFloatBytes), k_align));
  const int64_t kc_limit =
      std::max(k_align, std::min(b_panel_k_limit, round_down(a_panel_bytes / (mr * kFloatBytes), k_align)));

  // v2 unless the caller fixes v1: v2 ran faster on every shape measured,
  // exactly balanced groups included, where v1 wastes nothing (M = 4096,
  // K = N = 1024, 2 threads, G = 8/32/128 of equal sizes: gmm 1.03x / 1.10x /
  // 1.23x, tgmm 1.2x / 1.7x / 2.8x). v1 stays available, with its own tiles.
  const bool v1 = kernel == KernelVersion::kV1;
  TuneCandidate config;
  config.kernel = kernel.value_or(KernelVersion::kV2);
  config.input_buffer_count = 1;
  if (shape.pass != Pass::kGradRhs) {
    config.tiles.k = balanced_tile(extents.k, kc_limit, k_align);
    // m: the packed A block (m x kc) fits L2's share; the ragged axis.
    const auto l2_a = static_cast<int64_t>(kL2ShareA * static_cast<double>(machine.caches.l2));
    int64_t m_limit = std::max(mr, round_down(l2_a / (config.tiles.k * kFloatBytes), mr));
    if (shape.pass == Pass::kForward && !v1 &&
        quantile_nonempty(sizes, kGroupQuantile) <= m_limit) {  // m kept from the regular k
      const auto a_panel_v2 =
          static_cast<int64_t>(kL1ShareAV2Gmm * static_cast<double>(machine.caches.l1d));
      const int64_t kc_v2 = std::max(
          k_align, round_down(std::min(kc_limit, a_panel_v2 / (mr * kFloatBytes)), k_align));
      config.tiles.k = balanced_tile(extents.k, kc_v2, k_align);
    }
    // dlhs packs B from rows of the stored rhs that run along the contracted
    // dim: a slice of the whole row reads each row, and the whole block, as
    // one contiguous stream. Taken while the B micro-panel stays within its
    // L2 share, with m kept from the regular k (measured, 2 threads: whole
    // rows with m = 192 gave 445 GFLOP/s at N = 1024, G = 8 against 426 for
    // k = 512, and 1.05x at N = 768, G = 128). Whole rows also keep the
    // MR x k A micro-panel within L1 (a 32 KiB L1 with MR = 12 stops at
    // k = 682) and the A block with one B micro-panel within L2, so m may
    // shrink from the regular k's.
    const int64_t whole_rows_a_panel_limit = machine.caches.l1d / (mr * kFloatBytes);
    if (shape.pass == Pass::kGradLhs && extents.k > 0 && extents.k <= b_panel_k_limit &&
        extents.k <= whole_rows_a_panel_limit) {
      config.tiles.k = extents.k;
      const int64_t l2_left = machine.caches.l2 - extents.k * nr * kFloatBytes;
      m_limit = std::max(mr, std::min(m_limit, round_down(l2_left / (extents.k * kFloatBytes), mr)));
    }
    config.tiles.m = v1 ? v1_tile(sizes, m_limit, mr) : ragged_tile(sizes, m_limit, mr);
  } else if (v1) {
    // tgmm contracts the tokens: k is the ragged axis, m tiles the K rows.
    config.tiles.k = v1_tile(sizes, kc_limit, k_align);
    const auto l2_tgmm = static_cast<int64_t>(kL2ShareTgmmV1 * static_cast<double>(machine.caches.l2));
    const int64_t m_limit = std::max(mr, round_up(l2_tgmm / (config.tiles.k * kFloatBytes), mr));
    config.tiles.m = balanced_tile(extents.m, m_limit, mr);
  } else {
    config.tiles.k = std::min(b_panel_k_limit, round_up(std::max<int64_t>(max_group(sizes), 1), k_align));
    const auto l3_a =
        static_cast<int64_t>(kL3ShareTgmmA * static_cast<double>(machine.l3_per_thread()));
    const int64_t m_limit = std::max(mr, round_down(l3_a / (config.tiles.k * kFloatBytes), mr));
    config.tiles.m = balanced_tile(extents.m, m_limit, mr);
  }
  // n: the packed B block (kc x n) within its share of this thread's L3,
  // and within what the A block (m x kc) leaves of it (a small per-core L3,
  // as on Skylake-X, is where the A block's share matters).
  const int64_t l3_thread = machine.l3_per_thread();
  const int64_t l3_b = std::min(static_cast<int64_t>(kL3ShareB * static_cast<double>(l3_thread)),
                                l3_thread - config.tiles.m * config.tiles.k * kFloatBytes);
  const int64_t n_limit = std::max(nr, round_down(l3_b / (config.tiles.k * kFloatBytes), nr));
  config.tiles.n = balanced_tile(extents.n, n_limit, nr);

  // Enough work items for the threads: the drivers spread items over
  // threads (v2: (group, m-tile, n-tile); v1 gmm: (global m-tile, n-tile);
  // v1 tgmm: (K-tile, N-tile), all groups inside one item), so split n
  // further while there are fewer than two items per thread.
  auto items = [&] {
    const int64_t n_tiles = (extents.n + config.tiles.n - 1) / config.tiles.n;
    int64_t total = 0, nonempty = 0;
    for (int64_t size : sizes) {
      total += size;
      nonempty += size > 0;
    }
    if (shape.pass == Pass::kGradRhs) {
      const int64_t m_tiles = (extents.m + config.tiles.m - 1) / config.tiles.m;
      return (config.kernel == KernelVersion::kV1 ? 1 : nonempty) * m_tiles * n_tiles;
    }
    if (config.kernel == KernelVersion::kV1) {
      return (total + config.tiles.m - 1) / config.tiles.m * n_tiles;
    }
    int64_t m_tiles = 0;
    for (int64_t size : sizes) m_tiles += (size + config.tiles.m - 1) / config.tiles.m;
    return m_tiles * n_tiles;
  };
  while (items() < 2 * machine.threads && config.tiles.n > nr) {
    config.tiles.n = round_up(config.tiles.n / 2, nr);
  }
  return config;
}

}  // namespace raggemm::backends::cpu
