#include "kernels/machine_model.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "kernels/microkernel.h"

namespace raggemm::kernels {
namespace {

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = 1024 * kKiB;

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (in) std::getline(in, line);
  return line;
}

// What sysfs says of cpu0's data or unified cache at `level`.
struct SysfsCache {
  int64_t bytes = 0;
  int sharing_cpus = 0;
  int line_bytes = 0;
};

SysfsCache sysfs_cache(int level) {
  for (int index = 0; index < 8; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    const std::string level_text = read_first_line(dir + "level");
    if (level_text.empty()) continue;
    if (std::atoi(level_text.c_str()) != level) continue;
    if (read_first_line(dir + "type") == "Instruction") continue;
    return {parse_cache_size(read_first_line(dir + "size")),
            count_cpu_list(read_first_line(dir + "shared_cpu_list")),
            std::atoi(read_first_line(dir + "coherency_line_size").c_str())};
  }
  return {};
}

int64_t sysconf_size(int name) {
  long value = ::sysconf(name);
  return value > 0 ? value : 0;
}

int64_t sane_or(int64_t value, int64_t low, int64_t high, int64_t fallback) {
  return value >= low && value <= high ? value : fallback;
}

std::string read_cpu_model() {
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
  return "unknown-cpu";
}

// The parts of the model that do not change while the process runs.
MachineModel detect_static() {
  MachineModel model;
  model.cpu_model = read_cpu_model();
  const SysfsCache l1 = sysfs_cache(1), l2 = sysfs_cache(2), l3 = sysfs_cache(3);
  CacheSizes& sizes = model.caches;
  sizes.l1d = l1.bytes;
  sizes.l2 = l2.bytes;
  sizes.l3 = l3.bytes;
#ifdef _SC_LEVEL1_DCACHE_SIZE
  // sysfs first: sysconf reports the host's figures under some hypervisors.
  if (sizes.l1d == 0) sizes.l1d = sysconf_size(_SC_LEVEL1_DCACHE_SIZE);
  if (sizes.l2 == 0) sizes.l2 = sysconf_size(_SC_LEVEL2_CACHE_SIZE);
  if (sizes.l3 == 0) sizes.l3 = sysconf_size(_SC_LEVEL3_CACHE_SIZE);
#endif
  // Typical values of this project's machines where nothing says better.
  sizes.l1d = sane_or(sizes.l1d, 8 * kKiB, 4 * kMiB, 48 * kKiB);
  sizes.l2 = sane_or(sizes.l2, 64 * kKiB, 64 * kMiB, 1 * kMiB);
  sizes.l3 = sane_or(sizes.l3, 0, 1024 * kMiB, 16 * kMiB);
  if (sizes.l3 < sizes.l2) sizes.l3 = sizes.l2;  // no L3: the L2 is the last level
  model.cores = static_cast<int>(std::max<long>(1, ::sysconf(_SC_NPROCESSORS_ONLN)));
  model.l3_sharing_cpus = l3.sharing_cpus > 0 ? l3.sharing_cpus : model.cores;
  model.line_bytes = l1.line_bytes >= 16 && l1.line_bytes <= 512 ? l1.line_bytes : 64;
  return model;
}

}  // namespace

int64_t MachineModel::l3_per_thread() const {
  const int sharers =
      std::max(1, l3_sharing_cpus > 0 ? std::min(threads, l3_sharing_cpus) : threads);
  return caches.l3 / sharers;
}

MachineModel this_machine_model(int threads) {
  static const MachineModel fixed = detect_static();
  MachineModel model = fixed;
  const Microkernel uk = select_microkernel();
  model.isa = uk.target;
  model.mr = uk.mr;
  model.nr = uk.nr;
  model.vector_bytes = uk.nr / 2 * static_cast<int>(sizeof(float));  // NR is two vectors
  model.threads = threads > 0 ? threads : std::max(1, omp_get_max_threads());
  return model;
}

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

int count_cpu_list(const std::string& text) {
  int count = 0;
  std::istringstream ranges(text);
  std::string range;
  while (std::getline(ranges, range, ',')) {
    if (range.empty()) continue;
    const size_t dash = range.find('-');
    char* end = nullptr;
    const long first = std::strtol(range.c_str(), &end, 10);
    if (end == range.c_str()) return 0;
    long last = first;
    if (dash != std::string::npos) last = std::strtol(range.c_str() + dash + 1, &end, 10);
    if (last < first) return 0;
    count += static_cast<int>(last - first + 1);
  }
  return count;
}

}  // namespace raggemm::kernels
