// interleave_rows and interleave_rows_bf16 against their definition, on
// every runnable Highway target:
// every row count from 0 to the panel width (the 8x8, 4x4 and element paths
// and the zero padding), every depth from 0 to past two whole 64-byte lines
// of bf16 (the runs of a whole source line, then of single blocks, then
// element by element), a row stride wider than the depth, and the panel
// widths the microkernels use.
#include "kernels/interleave.h"

#include <gtest/gtest.h>

#include <vector>

#include "raggemm/dtype.h"
#include "support/every_target.h"

namespace raggemm::kernels {
namespace {

void check_all_shapes() {
  for (int width : {6, 8, 12, 16, 32}) {
    for (int rows = 0; rows <= width; ++rows) {
      for (int64_t depth = 0; depth <= 72; ++depth) {
        const int64_t ld = depth + 5;
        // Distinct bf16 bit patterns (1.0 and up), and the same values in f32.
        std::vector<float> src(static_cast<size_t>(rows * ld + 1));
        std::vector<uint16_t> src_bf16(src.size());
        for (size_t i = 0; i < src.size(); ++i) {
          src_bf16[i] = static_cast<uint16_t>(0x3F80 + i);
          src[i] = bf16_to_f32(src_bf16[i]);
        }
        std::vector<float> dst(static_cast<size_t>(depth * width), -1.0f);
        std::vector<float> dst_bf16(dst.size(), -1.0f);
        interleave_rows(src.data(), ld, rows, depth, width, dst.data());
        interleave_rows_bf16(src_bf16.data(), ld, rows, depth, width, dst_bf16.data());
        for (int64_t p = 0; p < depth; ++p) {
          for (int i = 0; i < width; ++i) {
            const float want = i < rows ? src[static_cast<size_t>(i * ld + p)] : 0.0f;
            const size_t at = static_cast<size_t>(p * width + i);
            ASSERT_EQ(dst[at], want) << "width " << width << " rows " << rows << " depth "
                                     << depth << " at p " << p << " i " << i;
            ASSERT_EQ(dst_bf16[at], want) << "bf16: width " << width << " rows " << rows
                                          << " depth " << depth << " at p " << p << " i " << i;
          }
        }
      }
    }
  }
}

TEST(InterleaveRows, MatchesDefinitionOnEveryTarget) { testing::on_every_target(check_all_shapes); }

}  // namespace
}  // namespace raggemm::kernels
