// Kernel generations and tiles: the terms every layer from the kernels up
// shares (the public ops, the backends, the tuner, the plans), so they live
// in core, below the kernels that read them.
#pragma once

#include <cstdint>
#include <string>

namespace raggemm {

enum class KernelVersion : uint8_t { kV1, kV2 };
const char* kernel_name(KernelVersion version);  // "v1", "v2"
KernelVersion parse_kernel(const std::string& name, const std::string& argument);

// Kernel tiles: m rows of the output, k of the contracted dim, n output
// columns. For tgmm, m and n tile the [K,N] output and k tiles the tokens.
// All three zero means "not set": the op picks them. Otherwise every field
// must be positive (any size works, dividing the dims or not).
struct Tiles {
  int64_t m = 0;
  int64_t k = 0;
  int64_t n = 0;
  bool operator==(const Tiles&) const = default;
};

// The one tile limit, enforced by the ops and stated by every way of setting
// tiles (the CLI's --tiles, the plan keys, tune-cache entries): each tile at
// most kMaxTile, and each packed block (m*k, k*n, m*n elements) at most
// kMaxTileBlock (256 MiB of f32), so a block always fits the workspace.
inline constexpr int64_t kMaxTile = int64_t{1} << 16;        // 65536
inline constexpr int64_t kMaxTileBlock = int64_t{1} << 26;   // 67108864

// Why `tiles` cannot run, or "" if they can (all three zero, "not set",
// can). Products are taken after the per-tile bound, so they cannot overflow.
inline std::string tile_limit_violation(const Tiles& tiles) {
  if (tiles == Tiles{}) return "";
  for (int64_t v : {tiles.m, tiles.k, tiles.n}) {
    if (v <= 0) return "tile sizes must be positive (or all unset)";
    if (v > kMaxTile) return "each tile must be at most " + std::to_string(kMaxTile);
  }
  if (tiles.m * tiles.k > kMaxTileBlock || tiles.k * tiles.n > kMaxTileBlock ||
      tiles.m * tiles.n > kMaxTileBlock) {
    return "tile blocks m*k, k*n and m*n must each be at most " + std::to_string(kMaxTileBlock) +
           " elements (the 256 MiB workspace cap)";
  }
  return "";
}

}  // namespace raggemm
