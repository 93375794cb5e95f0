// kernels::decode_span resolves the storage type through the dtype table's
// codecs (core/dtype_codec.h): every matmul operand type decodes what the
// table's decoder gives (times its scales), the others are refused.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype_traits.h"
#include "core/float_bits.h"
#include "kernels/decode.h"
#include "raggemm/error.h"

namespace raggemm::kernels {
namespace {

TEST(DecodeDispatch, EveryOperandTypeDecodesAsTheTableSays) {
  constexpr int64_t kRows = 3, kCols = 40, kLd = 45;
  std::mt19937 rng(7);
  for (const core::DTypeTraits& row : core::all_dtype_traits()) {
    SCOPED_TRACE(row.name);
    const size_t bytes = static_cast<size_t>(row.bits / 8);
    std::vector<uint8_t> storage(kRows * kLd * bytes);
    for (uint8_t& byte : storage) byte = static_cast<uint8_t>(rng());
    Operand op;
    op.data = storage.data();
    op.dtype = row.dtype;
    op.ld = kLd;
    std::vector<float> out(kCols * 2);
    if (!row.matmul_operand) {
      EXPECT_THROW(decode_span(op, 0, 0, kCols, out.data(), 1), Error);
      continue;
    }
    // Plain, then per-column scales (one apart), then a strided output.
    std::vector<float> col_scales(kLd * kRows);
    for (float& s : col_scales) s = 0.25f + static_cast<float>(rng() % 8);
    for (int variant = 0; variant < 3; ++variant) {
      SCOPED_TRACE(variant);
      Operand v = op;
      if (variant == 1) v.scale = {col_scales.data(), kLd, 1, 1, 1};
      const int64_t stride = variant == 2 ? 2 : 1;
      for (int64_t r = 0; r < kRows; ++r) {
        const int64_t c0 = 3;
        decode_span(v, r, c0, kCols - c0, out.data(), stride);
        std::vector<float> want(kCols);
        row.decode_span(storage.data(), r * kLd + c0, kCols - c0, want.data());
        for (int64_t j = 0; j < kCols - c0; ++j) {
          float expected = want[j];
          if (variant == 1) expected = expected * col_scales[r * kLd + c0 + j];
          ASSERT_EQ(core::bits_of(out[j * stride]), core::bits_of(expected))
              << "row " << r << " col " << c0 + j;
        }
      }
    }
  }
}

}  // namespace
}  // namespace raggemm::kernels
