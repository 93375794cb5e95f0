#include "kernels/pack.h"

#include <algorithm>
#include <cstring>

#include "kernels/decode.h"
#include "kernels/workspace.h"

namespace raggemm::kernels {

void pack_a(const Operand& src, int64_t r0, int64_t rows, int64_t k0, int64_t kc, int mr,
            float* dst) {
  const bool plain_f32 = src.dtype == DType::kF32 && !src.scale.data;
  for (int64_t panel = 0; panel * mr < rows; ++panel) {
    float* out = dst + panel * mr * kc;
    const int64_t height = std::min<int64_t>(mr, rows - panel * mr);
    for (int64_t i = 0; i < height; ++i) {
      const int64_t r = r0 + panel * mr + i;
      if (plain_f32) {
        const float* row = static_cast<const float*>(src.data) + r * src.ld + k0;
        for (int64_t p = 0; p < kc; ++p) out[p * mr + i] = row[p];
      } else {
        decode_span(src, r, k0, kc, out + i, mr);
      }
    }
    for (int64_t i = height; i < mr; ++i) {
      for (int64_t p = 0; p < kc; ++p) out[p * mr + i] = 0.0f;
    }
  }
}

void pack_a_transposed(const Operand& src, int64_t t0, int64_t kc, int64_t c0, int64_t rows,
                       int64_t valid_begin, int64_t valid_end, int mr, float* dst) {
  const int64_t panels = (rows + mr - 1) / mr;
  const int64_t padded = panels * mr;
  float* line = scratch_line(padded);
  for (int64_t p = 0; p < kc; ++p) {
    const int64_t t = t0 + p;
    if (t < valid_begin || t >= valid_end) {
      std::memset(line, 0, sizeof(float) * padded);
    } else {
      decode_span(src, t, c0, rows, line, 1);
      std::fill(line + rows, line + padded, 0.0f);
    }
    for (int64_t panel = 0; panel < panels; ++panel) {
      std::memcpy(dst + panel * mr * kc + p * mr, line + panel * mr, sizeof(float) * mr);
    }
  }
}

void pack_b(const Operand& src, bool transposed, int64_t k0, int64_t kc, int64_t n0,
            int64_t cols, int nr, float* dst) {
  const int64_t panels = (cols + nr - 1) / nr;
  const int64_t padded = panels * nr;
  if (!transposed) {
    const bool plain_f32 = src.dtype == DType::kF32 && !src.scale.data;
    float* line = plain_f32 ? nullptr : scratch_line(padded);
    for (int64_t p = 0; p < kc; ++p) {
      const float* row;
      if (plain_f32 && cols == padded) {
        row = static_cast<const float*>(src.data) + (k0 + p) * src.ld + n0;
      } else {
        if (!line) line = scratch_line(padded);
        decode_span(src, k0 + p, n0, cols, line, 1);
        std::fill(line + cols, line + padded, 0.0f);
        row = line;
      }
      for (int64_t panel = 0; panel < panels; ++panel) {
        std::memcpy(dst + panel * nr * kc + p * nr, row + panel * nr, sizeof(float) * nr);
      }
    }
    return;
  }
  // Transposed source: each source row is one packed column j.
  for (int64_t j = 0; j < padded; ++j) {
    float* out = dst + (j / nr) * nr * kc + (j % nr);
    if (j >= cols) {
      for (int64_t p = 0; p < kc; ++p) out[p * nr] = 0.0f;
      continue;
    }
    if (src.dtype == DType::kF32 && !src.scale.data) {
      const float* row = static_cast<const float*>(src.data) + (n0 + j) * src.ld + k0;
      for (int64_t p = 0; p < kc; ++p) out[p * nr] = row[p];
    } else {
      decode_span(src, n0 + j, k0, kc, out, nr);
    }
  }
}

}  // namespace raggemm::kernels
