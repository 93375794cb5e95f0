// Names of the kernel generations (include/raggemm/tiles.h).
#include "raggemm/tiles.h"

#include "raggemm/error.h"

namespace raggemm {

const char* kernel_name(KernelVersion version) {
  return version == KernelVersion::kV1 ? "v1" : "v2";
}

KernelVersion parse_kernel(const std::string& name, const std::string& argument) {
  if (name == "v1") return KernelVersion::kV1;
  if (name == "v2") return KernelVersion::kV2;
  fail(argument, name, "unknown kernel version (expected v1 or v2)");
}

}  // namespace raggemm
