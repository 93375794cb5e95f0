// The portable bf16 microkernel, the scalar twin of the AVX512_BF16 one (same
// bits, for tests; contract in bf16_microkernel.h). The run-time choice is
// the registry's (microkernel_registry.cc).
#include "kernels/bf16_microkernel.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace raggemm::kernels {
namespace {

constexpr int kScalarMR = 4;
constexpr int kScalarNR = 8;

float bf16_value(uint16_t bits) {
  const uint32_t wide = uint32_t{bits} << 16;
  float value;
  std::memcpy(&value, &wide, sizeof(value));
  return value;
}

// A subnormal f32 becomes a zero of its sign (vdpbf16ps's DAZ and FTZ).
float flush(float x) {
  return std::fabs(x) < std::numeric_limits<float>::min() ? std::copysign(0.0f, x) : x;
}

// One vdpbf16ps lane: the odd product first, each a single rounding.
float dot_pair(float acc, const uint16_t* a, const uint16_t* b) {
  float t = flush(acc);
  t = flush(std::fma(flush(bf16_value(a[1])), flush(bf16_value(b[1])), t));
  return flush(std::fma(flush(bf16_value(a[0])), flush(bf16_value(b[0])), t));
}

void scalar_run(int64_t kp, const uint16_t* a, const uint16_t* b, float* c, int64_t ldc, int rows,
                int cols, Store store) {
  const bool accumulate = store == Store::kAccumulate;
  float acc[kScalarMR][kScalarNR] = {};
  for (int64_t p = 0; p < kp; ++p) {
    const uint16_t* ap = a + p * kScalarMR * 2;
    const uint16_t* bp = b + p * kScalarNR * 2;
    for (int i = 0; i < rows; ++i) {
      for (int j = 0; j < kScalarNR; ++j) acc[i][j] = dot_pair(acc[i][j], ap + 2 * i, bp + 2 * j);
    }
  }
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < cols; ++j) {
      c[i * ldc + j] = accumulate ? c[i * ldc + j] + acc[i][j] : acc[i][j];
    }
  }
}

}  // namespace

Bf16Microkernel bf16_microkernel_scalar() {
  return Bf16Microkernel{{kScalarMR, kScalarNR, "SCALAR", &scalar_run}};
}

}  // namespace raggemm::kernels
