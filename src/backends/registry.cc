#include "backends/registry.h"

#include <string>

#include "backends/cpu/cpu_backend.h"
#include "backends/reference/reference_backend.h"
#include "raggemm/error.h"

namespace raggemm::backends {

const std::vector<const Backend*>& registered_backends() {
  // One line per backend, in order of preference.
  static const std::vector<const Backend*> table = {
      &cpu::cpu_backend(),
      &reference::reference_backend(),
  };
  return table;
}

const Backend* find_backend(std::string_view name) {
  for (const Backend* backend : registered_backends()) {
    if (name == backend->name()) return backend;
  }
  return nullptr;
}

const Backend& select_backend(const GmmSpec& spec, std::string_view name) {
  return select_backend(spec, name, registered_backends());
}

const Backend& select_backend(const GmmSpec& spec, std::string_view name,
                              const std::vector<const Backend*>& table) {
  if (!name.empty()) {
    const Backend* backend = nullptr;
    for (const Backend* b : table) {
      if (name == b->name()) backend = b;
    }
    if (!backend) {
      std::string known;
      for (const Backend* b : table) known += (known.empty() ? "" : ", ") + std::string(b->name());
      fail("backend", std::string(name), "unknown backend (registered: " + known + ")");
    }
    const std::string why = backend->unsupported(spec);
    if (!why.empty()) fail("backend", std::string(name), why);
    return *backend;
  }
  std::string reasons;
  for (const Backend* backend : table) {
    const std::string why = backend->unsupported(spec);
    if (why.empty()) return *backend;
    reasons += std::string(reasons.empty() ? "" : "; ") + backend->name() + ": " + why;
  }
  fail("backend", "", "no backend runs this problem (" + reasons + ")");
}

const Backend& default_backend() { return *registered_backends().front(); }

}  // namespace raggemm::backends
