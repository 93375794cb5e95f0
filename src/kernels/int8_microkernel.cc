// The portable int8 microkernel (contract in int8_microkernel.h). The
// run-time choice among the per-ISA ones is the registry's
// (microkernel_registry.cc).
#include "kernels/int8_microkernel.h"

namespace raggemm::kernels {
namespace {

constexpr int kScalarMR = 4;
constexpr int kScalarNR = 8;

void scalar_run(int64_t kq, const uint8_t* a, const int8_t* b, int32_t* c, int64_t ldc, int rows,
                int cols, bool accumulate) {
  int32_t acc[kScalarMR][kScalarNR] = {};
  for (int64_t p = 0; p < kq; ++p) {
    const int8_t* ap = reinterpret_cast<const int8_t*>(a) + p * kScalarMR * 4;
    const int8_t* bp = b + p * kScalarNR * 4;
    for (int i = 0; i < rows; ++i) {
      for (int j = 0; j < kScalarNR; ++j) {
        int32_t sum = 0;
        for (int t = 0; t < 4; ++t) sum += int32_t{ap[i * 4 + t]} * int32_t{bp[j * 4 + t]};
        acc[i][j] += sum;
      }
    }
  }
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < cols; ++j) {
      c[i * ldc + j] = accumulate ? c[i * ldc + j] + acc[i][j] : acc[i][j];
    }
  }
}

}  // namespace

Int8Microkernel int8_microkernel_scalar() {
  return Int8Microkernel{{kScalarMR, kScalarNR, "SCALAR", &scalar_run}};
}

}  // namespace raggemm::kernels
