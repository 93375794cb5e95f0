// Where a driver's store stage writes: an f32 or a bf16 output, overwritten
// or accumulated into (out += acc). Every driver accumulates in f32 (in the
// output itself when it is f32 and overwritten, else in a per-item f32 tile)
// and passes each finished tile through here once, so a bf16 output is
// round_bf16 of exactly the f32 the same driver would have written, with no
// f32 copy of the whole output and no separate cast pass.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/float_bits.h"
#include "kernels/bf16_round_store.h"
#include "raggemm/dtype.h"

namespace raggemm::kernels {

struct OutputView {
  float* f32 = nullptr;       // one of f32 and bf16 is set
  uint16_t* bf16 = nullptr;   // bf16 bits
  int64_t ld = 0;             // elements between rows
  bool accumulate = false;    // out = out + acc (bf16: bf16(float(out) + acc))

  // The driver may let the microkernel write final f32 values in place.
  bool direct() const { return f32 != nullptr && !accumulate; }
  float* f32_at(int64_t row, int64_t col) const { return f32 + row * ld + col; }

  // Writes rows x cols of acc (row stride acc_ld) at (row, col), each value
  // times `scale` first when scale is not null. `stream`: the values are
  // final and the output larger than the caches, so an overwritten bf16
  // output is written with non-temporal stores where aligned (the caller
  // fences with hwy::FlushStream()).
  void store(int64_t row, int64_t col, const float* acc, int64_t acc_ld, int64_t rows,
             int64_t cols, const float* scale = nullptr, bool stream = false) const {
    for (int64_t i = 0; i < rows; ++i) {
      store_row(row + i, col, acc + i * acc_ld, cols, scale, stream);
    }
  }

  void store_row(int64_t row, int64_t col, const float* acc, int64_t cols,
                 const float* scale = nullptr, bool stream = false) const {
    const float s = scale ? *scale : 1.0f;
    if (f32) {
      float* dst = f32 + row * ld + col;
      if (accumulate) {
        if (scale) {
          for (int64_t j = 0; j < cols; ++j) dst[j] += acc[j] * s;
        } else {
          for (int64_t j = 0; j < cols; ++j) dst[j] += acc[j];
        }
      } else if (scale) {
        for (int64_t j = 0; j < cols; ++j) dst[j] = acc[j] * s;
      } else {
        std::memcpy(dst, acc, sizeof(float) * cols);
      }
      return;
    }
    uint16_t* dst = bf16 + row * ld + col;
    if (accumulate) {
      for (int64_t j = 0; j < cols; ++j) {
        const float v = scale ? acc[j] * s : acc[j];
        dst[j] = core::bf16_bits_of(bf16_to_f32(dst[j]) + v);
      }
    } else if (scale) {
      for (int64_t j = 0; j < cols; ++j) dst[j] = core::bf16_bits_of(acc[j] * s);
    } else {
      round_row_to_bf16(acc, cols, dst, stream);
    }
  }

  // One value (the epilogue's per-element output).
  void store_value(int64_t row, int64_t col, float v) const {
    if (f32) {
      float& dst = f32[row * ld + col];
      dst = accumulate ? dst + v : v;
    } else {
      uint16_t& dst = bf16[row * ld + col];
      dst = core::bf16_bits_of(accumulate ? bf16_to_f32(dst) + v : v);
    }
  }

  // Zeros rows x cols at (row, col); accumulating, adding zero leaves them
  // as they are, so nothing is written.
  void zero(int64_t row, int64_t col, int64_t rows, int64_t cols) const {
    if (accumulate || rows <= 0 || cols <= 0) return;
    for (int64_t i = 0; i < rows; ++i) {
      if (f32) {
        std::memset(f32 + (row + i) * ld + col, 0, sizeof(float) * cols);
      } else {
        std::memset(bf16 + (row + i) * ld + col, 0, sizeof(uint16_t) * cols);
      }
    }
  }
};

}  // namespace raggemm::kernels
