// Size checks before allocating from user numbers. A dim or a product of
// dims that a user typed (a config key, a CLI flag) can overflow int64 or ask
// for more bytes than the machine has; allocating anyway ends in
// std::bad_alloc, an OOM kill, or minutes of paging. Programs check each
// such allocation first and refuse it with an Error naming the keys.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace raggemm {

// Physical memory of this machine in bytes (sysconf), or 0 if unknown.
int64_t physical_memory_bytes();

// One factor of an allocation's element count: the key or flag it comes from
// and its value. A factor with an empty name is a constant (e.g. 2 for a
// fused gate|up) and is not named in errors.
struct SizeFactor {
  std::string name;
  int64_t value = 0;
};

// Checks one allocation of product(factors) elements of `element_bytes` each:
// no factor negative, the count and the bytes fit int64, and the bytes are
// at most `limit_bytes` (physical_memory_bytes() when -1; no byte bound when
// that is 0, unknown). Otherwise throws Error whose argument is the factors'
// names joined by ',' and whose value is their values, saying what `what` is
// and how many bytes it would take. Returns the bytes.
int64_t require_allocatable(const std::string& what, const std::vector<SizeFactor>& factors,
                            int64_t element_bytes, int64_t limit_bytes = -1);

// "1.5 GiB", "12 TiB", "512 B": for messages.
std::string format_bytes(double bytes);

}  // namespace raggemm
