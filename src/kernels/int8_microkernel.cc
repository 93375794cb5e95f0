// The portable int8 microkernel and the run-time choice among the per-ISA
// ones (contract in int8_microkernel.h).
#include "kernels/int8_microkernel.h"

#include <hwy/targets.h>

#include <atomic>
#include <cstring>

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

std::vector<Int8Microkernel> detect() {
  std::vector<Int8Microkernel> kernels;
  Int8Microkernel kernel;
  if (int8_microkernel_avx512_vnni(&kernel)) kernels.push_back(kernel);
  if (int8_microkernel_avx_vnni(&kernel)) kernels.push_back(kernel);
  if (int8_microkernel_avx2(&kernel)) kernels.push_back(kernel);
  kernels.push_back(int8_microkernel_scalar());
  return kernels;
}

}  // namespace

Int8Microkernel int8_microkernel_scalar() {
  return Int8Microkernel{kScalarMR, kScalarNR, /*biased_a=*/false, "SCALAR", &scalar_run};
}

const std::vector<Int8Microkernel>& int8_microkernels() {
  static const std::vector<Int8Microkernel> kernels = detect();
  return kernels;
}

namespace {
std::atomic<int> forced_index{-1};

// Whether the f32 dispatch may now use the vector family of `target`.
bool family_allowed(const char* target) {
  const int64_t supported = hwy::SupportedTargets();
  if (std::strcmp(target, "AVX512_VNNI") == 0) {
    return (supported & (HWY_AVX3 | HWY_AVX3_DL)) != 0;
  }
  if (std::strcmp(target, "AVX_VNNI") == 0 || std::strcmp(target, "AVX2") == 0) {
    return (supported & (HWY_AVX2 | HWY_AVX3 | HWY_AVX3_DL)) != 0;
  }
  return true;
}
}  // namespace

const Int8Microkernel& select_int8_microkernel() {
  const std::vector<Int8Microkernel>& kernels = int8_microkernels();
  const int forced = forced_index.load(std::memory_order_relaxed);
  if (forced >= 0) return kernels[static_cast<size_t>(forced)];
  for (const Int8Microkernel& kernel : kernels) {
    if (family_allowed(kernel.target)) return kernel;
  }
  return kernels.back();
}

bool force_int8_microkernel(const std::string& target) {
  if (target.empty() || target == "auto") {
    forced_index.store(-1);
    return true;
  }
  const std::vector<Int8Microkernel>& kernels = int8_microkernels();
  for (size_t i = 0; i < kernels.size(); ++i) {
    if (target == kernels[i].target) {
      forced_index.store(static_cast<int>(i));
      return true;
    }
  }
  return false;
}

}  // namespace raggemm::kernels
