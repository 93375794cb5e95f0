#include "tune/cpu_info.h"

#include <unistd.h>

#include <cctype>
#include <fstream>
#include <sstream>
#include <string>

#include "kernels/microkernel.h"

namespace raggemm::tune {
namespace {

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = 1024 * kKiB;

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (in) std::getline(in, line);
  return line;
}

// Size of the level-`level` data or unified cache of cpu0 from sysfs, or 0.
int64_t sysfs_cache_size(int level) {
  for (int index = 0; index < 8; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    const std::string level_text = read_first_line(dir + "level");
    if (level_text.empty()) continue;
    if (std::atoi(level_text.c_str()) != level) continue;
    if (read_first_line(dir + "type") == "Instruction") continue;
    return parse_cache_size(read_first_line(dir + "size"));
  }
  return 0;
}

int64_t sysconf_size(int name) {
  long value = ::sysconf(name);
  return value > 0 ? value : 0;
}

int64_t sane_or(int64_t value, int64_t low, int64_t high, int64_t fallback) {
  return value >= low && value <= high ? value : fallback;
}

CacheSizes detect_cache_sizes() {
  CacheSizes sizes;
  sizes.l1d = sysfs_cache_size(1);
  sizes.l2 = sysfs_cache_size(2);
  sizes.l3 = sysfs_cache_size(3);
#ifdef _SC_LEVEL1_DCACHE_SIZE
  if (sizes.l1d == 0) sizes.l1d = sysconf_size(_SC_LEVEL1_DCACHE_SIZE);
  if (sizes.l2 == 0) sizes.l2 = sysconf_size(_SC_LEVEL2_CACHE_SIZE);
  if (sizes.l3 == 0) sizes.l3 = sysconf_size(_SC_LEVEL3_CACHE_SIZE);
#endif
  sizes.l1d = sane_or(sizes.l1d, 8 * kKiB, 4 * kMiB, 48 * kKiB);
  sizes.l2 = sane_or(sizes.l2, 64 * kKiB, 64 * kMiB, 1 * kMiB);
  sizes.l3 = sane_or(sizes.l3, 0, 1024 * kMiB, 16 * kMiB);
  if (sizes.l3 < sizes.l2) sizes.l3 = sizes.l2;  // no L3: the L2 is the last level
  return sizes;
}

}  // namespace

int64_t parse_cache_size(const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0 || digits > 12) return 0;
  int64_t value = std::stoll(text.substr(0, digits));
  std::string unit = text.substr(digits);
  if (unit.empty()) return value;
  switch (std::toupper(static_cast<unsigned char>(unit[0]))) {
    case 'K':
      return value * kKiB;
    case 'M':
      return value * kMiB;
    case 'G':
      return value * 1024 * kMiB;
    default:
      return 0;
  }
}

const CacheSizes& cache_sizes() {
  static const CacheSizes sizes = detect_cache_sizes();
  return sizes;
}

const std::string& cpu_model_name() {
  static const std::string name = [] {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("model name", 0) != 0) continue;
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::istringstream words(line.substr(colon + 1));
      std::string word, squeezed;
      while (words >> word) squeezed += (squeezed.empty() ? "" : " ") + word;
      if (!squeezed.empty()) return squeezed;
    }
    return std::string("unknown-cpu");
  }();
  return name;
}

std::string isa_target_name() { return kernels::select_microkernel().target; }

}  // namespace raggemm::tune
