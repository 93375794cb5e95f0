#include "kernels/gmm_kernel.h"

namespace raggemm::kernels {

std::vector<int64_t> group_starts(const int32_t* sizes32, const int64_t* sizes64, int64_t groups) {
  std::vector<int64_t> starts(static_cast<size_t>(groups) + 1, 0);
  for (int64_t g = 0; g < groups; ++g) {
    starts[g + 1] = starts[g] + (sizes32 ? sizes32[g] : sizes64[g]);
  }
  return starts;
}

}  // namespace raggemm::kernels
