// The one table of backends (DESIGN.md s.5).
#pragma once

#include <string_view>
#include <vector>

#include "backends/backend.h"

namespace raggemm::backends {

// In order of preference: a spec with no backend named runs on the first
// that supports it (the CPU kernels; the reference runs only when named).
const std::vector<const Backend*>& registered_backends();

// The backend called `name`, or null.
const Backend* find_backend(std::string_view name);

// The backend that runs `spec`: the one called `name` ("" : the first
// registered that supports it). Throws Error naming "backend" with the
// value and the reason when it does not exist or declines the spec.
const Backend& select_backend(const GmmSpec& spec, std::string_view name = "");
// The same choice among `table` instead of the registered backends (the
// tests' tables hold backends that decline).
const Backend& select_backend(const GmmSpec& spec, std::string_view name,
                              const std::vector<const Backend*>& table);

// The backend that plans problems known only by their shape (the tune
// cache's resolution, the MoE plans): the first registered.
const Backend& default_backend();

}  // namespace raggemm::backends
