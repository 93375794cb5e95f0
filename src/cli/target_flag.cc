#include "cli/target_flag.h"

#include <hwy/targets.h>

#include "kernels/microkernel_registry.h"
#include "raggemm/error.h"

namespace raggemm::cli {

void force_simd_target(const std::string& target, const std::string& argument) {
  if (target == "best") return;
  int64_t chosen = 0;
  for (int64_t bit = 1; bit > 0 && bit <= hwy::SupportedTargets(); bit <<= 1) {
    if ((hwy::SupportedTargets() & bit) && target == hwy::TargetName(bit)) chosen = bit;
  }
  require(chosen != 0, argument, target, "not a Highway target this CPU supports");
  hwy::SetSupportedTargetsForTest(chosen);
}

void force_int8_kernel(const std::string& name, const std::string& argument) {
  require(kernels::force_int8_microkernel(name), argument, name,
          "not an int8 microkernel this CPU runs (AVX512_VNNI, AVX_VNNI, AVX2, SCALAR, auto)");
}

void force_bf16_kernel(const std::string& name, const std::string& argument) {
  require(kernels::force_bf16_microkernel(name), argument, name,
          "not a bf16 kernel this CPU runs (AMX_BF16, AVX512_BF16, SCALAR, WIDEN, auto)");
}

}  // namespace raggemm::cli
