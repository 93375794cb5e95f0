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

// A block of rows (k steps first..first+rows of a kc-deep panel set), from
// a source whose rows are `ld` bytes apart, lands where pack_b puts it: each
// row equal to the span decoder's, padding columns zero, nothing else
// written. Both formats, with and without column scales, three nr.
TEST(DecodeFp8, PanelsMatchTheSpanLaidOutAsPackB) {
  for (DType dtype : {DType::kF8E4M3, DType::kF8E5M2}) {
    for (bool per_column : {false, true}) {
      for (const int nr : {16, 32, 8}) {
        const int64_t cols = 37, ld = cols + 5, panels = (cols + nr - 1) / nr;  // ragged last panel
        const int64_t kc = 6, first = 2, rows = 3;
        std::vector<uint8_t> src(static_cast<size_t>(rows * ld));
        for (size_t e = 0; e < src.size(); ++e) src[e] = static_cast<uint8_t>(e * 29 + 3);
        std::vector<float> col_scales(cols);
        for (int64_t j = 0; j < cols; ++j) col_scales[j] = 0.5f + 0.125f * static_cast<float>(j % 5);
        const float* scales = per_column ? col_scales.data() : nullptr;
        std::vector<float> dst(panels * nr * kc, -1.0f);
        decode_fp8_panels(dtype, src.data(), ld, rows, cols, nr, nr * kc, 0.5f, scales,
                          dst.data() + first * nr);
        for (int64_t r = 0; r < rows; ++r) {
          std::vector<float> span(cols);
          decode_fp8_span(dtype, src.data() + r * ld, cols, 0.5f, scales, span.data());
          for (int64_t j = 0; j < panels * nr; ++j) {
            const float got = dst[(j / nr) * nr * kc + (first + r) * nr + j % nr];
            if (j < cols) {
              ASSERT_EQ(bits(got), bits(span[j])) << "row " << r << " column " << j;
            } else {
              ASSERT_EQ(got, 0.0f) << "padding column " << j;
            }
          }
        }
        // Nothing written outside these k steps' rows of the panels.
        for (int64_t e = 0; e < panels * nr * kc; ++e) {
          const int64_t step = (e % (nr * kc)) / nr;
          if (step < first || step >= first + rows) {
            ASSERT_EQ(dst[e], -1.0f) << "nr " << nr << " element " << e;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace raggemm::kernels
