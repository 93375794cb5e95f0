// The hand-vectorized fp8 decoder (kernels/decode_fp8.h): every one of the
// 256 codes of both formats, on every implementation this CPU runs, gives
// the scalar decoder's bits (times the scales, in the same order), NaN
// payloads and signed zeros included; and the panel form lays columns out
// as pack_b's panels, the last one zero-padded.
#include "kernels/decode_fp8.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "raggemm/fp8.h"

namespace raggemm::kernels {
namespace {

uint32_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof(b));
  return b;
}

float scalar_decode(DType dtype, uint8_t code) {
  return dtype == DType::kF8E4M3 ? fp8_e4m3_to_f32(code) : fp8_e5m2_to_f32(code);
}

TEST(DecodeFp8, AllCodesBothFormatsEveryImplementation) {
  // Codes 0..255 three times over, so vector bodies and tails both see each.
  std::vector<uint8_t> codes;
  for (int round = 0; round < 3; ++round) {
    for (int c = 0; c < 256; ++c) codes.push_back(static_cast<uint8_t>(c + round * 7));
  }
  std::vector<float> col_scales(codes.size());
  for (size_t j = 0; j < codes.size(); ++j) col_scales[j] = 0.25f + 0.01f * static_cast<float>(j % 13);
  for (DType dtype : {DType::kF8E4M3, DType::kF8E5M2}) {
    for (float scale : {1.0f, 0.7f}) {
      for (bool per_column : {false, true}) {
        for (int64_t count : {int64_t{256}, static_cast<int64_t>(codes.size()), int64_t{13}}) {
          for (const char* isa : {"AVX512", "AVX2", "SCALAR"}) {
            std::vector<float> out(codes.size(), -7.0f);
            if (!decode_fp8_span_on(isa, dtype, codes.data(), count, scale,
                                    per_column ? col_scales.data() : nullptr, out.data())) {
              continue;
            }
            for (int64_t j = 0; j < count; ++j) {
              float want = scalar_decode(dtype, codes[j]) * scale;
              if (per_column) want = want * col_scales[j];
              ASSERT_EQ(bits(out[j]), bits(want))
                  << isa << " " << dtype_name(dtype) << " code 0x" << std::hex << int(codes[j])
                  << std::dec << " scale " << scale << " per_column " << per_column;
            }
            for (size_t j = count; j < out.size(); ++j) ASSERT_EQ(out[j], -7.0f) << isa << " wrote past count";
          }
        }
      }
    }
  }
}

TEST(DecodeFp8, PanelsMatchTheSpanLaidOutAsPackB) {
  for (const int nr : {16, 32, 8}) {
  const int64_t cols = 37, panels = (cols + nr - 1) / nr, kc = 5;  // ragged last panel
  std::vector<uint8_t> row(cols);
  for (int64_t j = 0; j < cols; ++j) row[j] = static_cast<uint8_t>(j * 29 + 3);
  std::vector<float> span(cols);
  decode_fp8_span(DType::kF8E4M3, row.data(), cols, 0.5f, nullptr, span.data());
  std::vector<float> dst(panels * nr * kc, -1.0f);
  const int64_t p = 2;  // the k step this row is
  decode_fp8_panels(DType::kF8E4M3, row.data(), cols, nr, nr * kc, 0.5f, nullptr, dst.data() + p * nr);
  for (int64_t j = 0; j < panels * nr; ++j) {
    const float got = dst[(j / nr) * nr * kc + p * nr + j % nr];
    if (j < cols) {
      EXPECT_EQ(bits(got), bits(span[j])) << j;
    } else {
      EXPECT_EQ(got, 0.0f) << "padding column " << j;
    }
  }
  // Nothing written outside this k step's rows of the panels.
  for (int64_t e = 0; e < panels * nr * kc; ++e) {
    if ((e % (nr * kc)) / nr != p) {
      ASSERT_EQ(dst[e], -1.0f) << "nr " << nr << " element " << e;
    }
  }
  }
}

}  // namespace
}  // namespace raggemm::kernels
