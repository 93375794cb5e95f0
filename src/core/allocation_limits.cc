// Size checks before allocating from user numbers (raggemm/allocation_limits.h).
#include "raggemm/allocation_limits.h"

#include <unistd.h>

#include <cstdio>
#include <limits>

#include "raggemm/error.h"

namespace raggemm {

int64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  if (pages > std::numeric_limits<int64_t>::max() / page_size) {
    return std::numeric_limits<int64_t>::max();
  }
  return static_cast<int64_t>(pages) * page_size;
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  size_t unit = 0;
  while (bytes >= 1024 && unit + 1 < sizeof(units) / sizeof(units[0])) {
    bytes /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof(text), unit == 0 ? "%.0f %s" : "%.1f %s", bytes, units[unit]);
  return text;
}

int64_t require_allocatable(const std::string& what, const std::vector<SizeFactor>& factors,
                            int64_t element_bytes, int64_t limit_bytes) {
  std::string names, values, product;
  for (const SizeFactor& factor : factors) {
    product += (product.empty() ? "" : " * ") +
               (factor.name.empty() ? std::to_string(factor.value) : factor.name);
    if (factor.name.empty()) continue;
    names += (names.empty() ? "" : ",") + factor.name;
    values += (values.empty() ? "" : ",") + std::to_string(factor.value);
  }
  const std::string subject = what + " (" + product + " elements of " +
                              std::to_string(element_bytes) + " bytes)";
  // The product in long double first: exact enough to say how far over it
  // is, and it cannot overflow where int64 does.
  long double exact = static_cast<long double>(element_bytes);
  for (const SizeFactor& factor : factors) {
    require(factor.value >= 0, names, values, subject + ": sizes must be >= 0");
    exact *= static_cast<long double>(factor.value);
  }
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  if (exact > static_cast<long double>(kMax)) {
    fail(names, values, subject + " overflows int64 bytes; lower them");
  }
  int64_t bytes = element_bytes;
  for (const SizeFactor& factor : factors) bytes *= factor.value;
  const int64_t limit = limit_bytes < 0 ? physical_memory_bytes() : limit_bytes;
  if (limit > 0 && bytes > limit) {
    fail(names, values,
         subject + " needs " + format_bytes(static_cast<double>(bytes)) + ", more than the " +
             format_bytes(static_cast<double>(limit)) + " of physical memory; lower them");
  }
  return bytes;
}

}  // namespace raggemm
