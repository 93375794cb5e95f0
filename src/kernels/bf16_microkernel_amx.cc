// The AMX_BF16 microkernel (contract in bf16_microkernel.h, layout
// kTileBlocks), compiled for its instructions with a target attribute and
// registered, with the CPU features and the OS permission it needs, in
// microkernel_registry.cc, so the library itself keeps the baseline ISA.
//
// 32 x 32 register tile in the eight tile registers: four 16 x 16 f32
// accumulators (tmm0-3), two 16-row A tiles of one 32-k block (tmm4-5) and
// two 16-column B tiles (tmm6-7); each TDPBF16PS does 16 x 16 x 32
// multiply-adds. On the Intel Xeon model 167 the registry's probe timed it
// at 2038 GFLOP/s on one thread with L1-resident panels, against 192 for
// the f32 microkernel (docs/kernels.md, "AMX tiles").
//
// Tile state is per thread and other code in the process may use it (oneDNN
// in the benchmark's peers, PyTorch beside the Python module) or release it:
// every call reads the thread's tile configuration (STTILECFG, about 16 ns
// here) and loads ours only where it differs (LDTILECFG, about 100 ns).
#include <cstdint>
#include <cstring>

#include "kernels/bf16_microkernel.h"

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kernels/avx512_tile_store.h"
#define RAGGEMM_BF16_AMX 1
#endif

namespace raggemm::kernels {

#ifdef RAGGEMM_BF16_AMX
namespace {

#define RAGGEMM_AMX __attribute__((target("amx-tile,amx-bf16,avx512f")))
constexpr int kMR = 32;
constexpr int kNR = 32;
constexpr int kBlockPairs = kAmxBlockK / 2;  // 16 pairs: one tile row of 64 bytes

// LDTILECFG's 64-byte operand: palette 1, eight tiles of 16 rows x 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

TileConfig our_config() {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.colsb[t] = 64;
    config.rows[t] = 16;
  }
  return config;
}

RAGGEMM_AMX void ensure_config() {
  static const TileConfig kOurs = our_config();
  TileConfig current;
  _tile_storeconfig(&current);
  if (std::memcmp(&current, &kOurs, sizeof(TileConfig)) != 0) _tile_loadconfig(&kOurs);
}

// Tiles computed: the lower A tile only when rows > 16, the right B tile
// only when cols > 16 (a ragged panel does no work on its zero padding).
// The accumulators start at zero: C + acc is the caller's add, so an output
// accumulated into gets out + value, the same bits as the other kernels'
// contract (ops' accumulate-into-output is bit for bit out + the op's value).
template <bool Low, bool Right>
RAGGEMM_AMX void tiles(int64_t kp, const uint16_t* a, const uint16_t* b, float* c, int64_t ldc) {
  const int64_t stride_c = ldc * static_cast<int64_t>(sizeof(float));
  _tile_zero(0);
  if (Right) _tile_zero(1);
  if (Low) _tile_zero(2);
  if (Low && Right) _tile_zero(3);
  const int64_t blocks = kp / kBlockPairs;
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const uint16_t* ab = a + blk * kMR * kAmxBlockK;       // 32 rows x 32 k
    const uint16_t* bb = b + blk * kBlockPairs * kNR * 2;  // 16 pairs x 32 columns x 2
    _tile_loadd(4, ab, 64);
    _tile_loadd(6, bb, kNR * 4);
    _tile_dpbf16ps(0, 4, 6);
    if (Right) {
      _tile_loadd(7, bb + 32, kNR * 4);
      _tile_dpbf16ps(1, 4, 7);
    }
    if (Low) {
      _tile_loadd(5, ab + 16 * kAmxBlockK, 64);
      _tile_dpbf16ps(2, 5, 6);
      if (Right) _tile_dpbf16ps(3, 5, 7);
    }
  }
  _tile_stored(0, c, stride_c);
  if (Right) _tile_stored(1, c + 16, stride_c);
  if (Low) _tile_stored(2, c + 16 * ldc, stride_c);
  if (Low && Right) _tile_stored(3, c + 16 * ldc + 16, stride_c);
}

RAGGEMM_AMX void run(int64_t kp, const uint16_t* a, const uint16_t* b, float* c, int64_t ldc,
                     int rows, int cols, Store store) {
  ensure_config();
  const bool low = rows > 16, right = cols > 16;
  using Fn = void (*)(int64_t, const uint16_t*, const uint16_t*, float*, int64_t);
  static constexpr Fn kTiles[2][2] = {{&tiles<false, false>, &tiles<false, true>},
                                      {&tiles<true, false>, &tiles<true, true>}};
  const Fn fn = kTiles[low][right];
  if (store == Store::kOverwrite && rows == (low ? 32 : 16) && cols == (right ? 32 : 16)) {
    fn(kp, a, b, c, ldc);  // whole tiles, straight into C
    return;
  }
  // Otherwise through a staging block, written to C row by row: the valid
  // part of a ragged block; C + acc when accumulating; and non-temporal rows
  // for a final tile written once (tgmm's small groups), where TILESTORED
  // would read each output line before writing it (it doubled tgmm's DRAM
  // traffic at 128 groups).
  alignas(64) float staged[kMR * kNR];
  fn(kp, a, b, staged, kNR);
  const bool stream = store == Store::kStream && cols == kNR;
  const bool accumulate = store == Store::kAccumulate;
  for (int i = 0; i < rows; ++i) {
    const __m512 lo = _mm512_load_ps(staged + i * kNR), hi = _mm512_load_ps(staged + i * kNR + 16);
    if (stream) {
      avx512_tile::stream_row(c + i * ldc, lo, hi);
    } else {
      avx512_tile::store_row(c + i * ldc, lo, hi, cols, accumulate);
    }
  }
}

}  // namespace

bool amx_tile_data_permitted() {
  // Linux hands out the 8 KiB tile state only to a process that asks
  // (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA, Linux 5.16+);
  // the permission holds for every thread of the process.
  static const bool permitted = [] {
    constexpr int kArchReqXcompPerm = 0x1023;
    constexpr int kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return permitted;
}

Bf16Microkernel bf16_microkernel_amx() {
  return Bf16Microkernel{{kMR, kNR, "AMX_BF16", &run}, Bf16Layout::kTileBlocks};
}

#else  // not x86-64 Linux with GCC/Clang

bool amx_tile_data_permitted() { return false; }

Bf16Microkernel bf16_microkernel_amx() {
  return Bf16Microkernel{{0, 0, "AMX_BF16", nullptr}, Bf16Layout::kTileBlocks};
}

#endif

}  // namespace raggemm::kernels
