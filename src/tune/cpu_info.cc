#include "tune/cpu_info.h"

#include "kernels/microkernel.h"

namespace raggemm::tune {

const CacheSizes& cache_sizes() {
  static const CacheSizes sizes = kernels::this_machine_model(1).caches;
  return sizes;
}

const std::string& cpu_model_name() {
  static const std::string name = kernels::this_machine_model(1).cpu_model;
  return name;
}

std::string isa_target_name() { return kernels::select_microkernel().target; }

}  // namespace raggemm::tune
