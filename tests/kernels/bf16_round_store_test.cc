// round_row_to_bf16 against core::bf16_bits_of, bit for bit, on every
// runnable Highway target: ties to even either way, the largest finite
// values (rounding up to infinity), infinities, signalling and quiet NaNs of
// both signs, subnormals and zeros; at every start offset within two
// vectors and every length up to past three vectors (the vector loop, the
// element tail, aligned and unaligned streamed stores), with and without
// streaming; nothing past the row is written.
#include "kernels/bf16_round_store.h"

#include <gtest/gtest.h>
#include <hwy/cache_control.h>

#include <cstdint>
#include <vector>

#include "core/float_bits.h"
#include "support/every_target.h"

namespace raggemm::kernels {
namespace {

std::vector<float> special_values() {
  std::vector<float> v;
  for (uint32_t sign : {0u, 0x80000000u}) {
    for (uint32_t bits : {0x00000000u, 0x00000001u, 0x007fffffu, 0x00008000u, 0x00018000u,
                          0x3f808000u, 0x3f818000u, 0x3f807fffu, 0x3f808001u, 0x7f7fffffu,
                          0x7f7f8000u, 0x7f800000u, 0x7f800001u, 0x7fbfffffu, 0x7fc00000u,
                          0x7fffffffu, 0x3f800000u, 0x40490fdbu}) {
      v.push_back(core::float_of(sign | bits));
    }
  }
  // And a spread of ordinary values, every low half.
  for (uint32_t i = 0; i < 200; ++i) v.push_back(core::float_of(0x3e000000u + i * 0x00012345u));
  return v;
}

void check_rows() {
  const std::vector<float> values = special_values();
  constexpr int64_t kSentinel = 0xABCD;
  for (bool stream : {false, true}) {
    for (int64_t offset = 0; offset < 40; ++offset) {
      for (int64_t n = 0; n <= 100; ++n) {
        std::vector<float> src(static_cast<size_t>(n));
        for (int64_t j = 0; j < n; ++j) {
          src[j] = values[static_cast<size_t>((j * 7 + offset * 3) % values.size())];
        }
        // 64-byte aligned storage, the row starting `offset` values in.
        alignas(64) static uint16_t storage[256];
        for (uint16_t& x : storage) x = kSentinel;
        uint16_t* dst = storage + offset;
        round_row_to_bf16(src.data(), n, dst, stream);
        if (stream) hwy::FlushStream();
        for (int64_t j = 0; j < n; ++j) {
          ASSERT_EQ(dst[j], core::bf16_bits_of(src[j]))
              << "stream " << stream << " offset " << offset << " n " << n << " j " << j;
        }
        for (int64_t j = 0; j < 256; ++j) {
          if (j >= offset && j < offset + n) continue;
          ASSERT_EQ(storage[j], kSentinel) << "wrote outside the row at " << j << ", offset "
                                           << offset << " n " << n;
        }
      }
    }
  }
}

TEST(Bf16RoundStore, MatchesBf16BitsOfOnEveryTarget) { testing::on_every_target(check_rows); }

}  // namespace
}  // namespace raggemm::kernels
