#include "backends/workspace.h"

namespace raggemm::backends {

Workspace::InUse::InUse(Workspace& workspace) : workspace_(workspace) {
  const bool was_in_use = workspace_.in_use_.exchange(true);
  if (was_in_use) {
    fail("workspace", "in use", "a workspace serves one call at a time; give each thread its own");
  }
}

Workspace::InUse::~InUse() { workspace_.in_use_.store(false); }

int64_t Workspace::bytes() const {
  int64_t total = 0;
  for (const auto& [name, part] : parts_) total += part->bytes();
  return total;
}

void Workspace::release() {
  const InUse held(*this);  // not while a call runs
  parts_.clear();
}

}  // namespace raggemm::backends
