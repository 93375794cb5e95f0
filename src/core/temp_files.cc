// Temp files of atomic writes (include/raggemm/temp_files.h).
#include "raggemm/temp_files.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <random>

#include "raggemm/allocation_limits.h"
#include "raggemm/diagnostics.h"

namespace raggemm {
namespace {

constexpr const char* kTempMarker = ".tmp.";
constexpr size_t kNoiseDigits = 16;

// This host's name, with characters a file name should not hold replaced.
const std::string& host_tag() {
  static const std::string tag = [] {
    char name[HOST_NAME_MAX + 1] = {};
    if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return std::string("host");
    std::string text = name;
    for (char& c : text) {
      if (c == '/' || std::isspace(static_cast<unsigned char>(c))) c = '_';
    }
    return text;
  }();
  return tag;
}

}  // namespace

std::string atomic_temp_path(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  uint64_t noise =
      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  try {
    std::random_device device;
    noise ^= (static_cast<uint64_t>(device()) << 32) | device();
  } catch (const std::exception&) {
    // No entropy source: the clock, the pid and the counter still make the
    // name unique in practice, and O_EXCL catches the rest.
  }
  noise += counter.fetch_add(1) * 0x9e3779b97f4a7c15ull;
  char suffix[kNoiseDigits + 1];
  std::snprintf(suffix, sizeof(suffix), "%016llx", static_cast<unsigned long long>(noise));
  return path + kTempMarker + std::to_string(::getpid()) + "." + suffix + "." + host_tag();
}

bool parse_temp_file_name(const std::string& name, TempFileName& out) {
  // The last marker: a target may itself contain ".tmp.".
  const size_t marker = name.rfind(kTempMarker, name.size());
  for (size_t at = marker; at != std::string::npos && at > 0;
       at = name.rfind(kTempMarker, at - 1)) {
    const size_t pid_begin = at + std::string(kTempMarker).size();
    size_t pid_end = pid_begin;
    while (pid_end < name.size() && std::isdigit(static_cast<unsigned char>(name[pid_end]))) {
      ++pid_end;
    }
    if (pid_end == pid_begin || pid_end - pid_begin > 9 || pid_end >= name.size() ||
        name[pid_end] != '.') {
      continue;
    }
    const size_t noise_end = pid_end + 1 + kNoiseDigits;
    if (noise_end > name.size()) continue;
    bool hex = true;
    for (size_t i = pid_end + 1; i < noise_end; ++i) {
      hex = hex && std::isxdigit(static_cast<unsigned char>(name[i]));
    }
    if (!hex) continue;
    if (noise_end != name.size() && (name[noise_end] != '.' || noise_end + 1 == name.size())) {
      continue;
    }
    out.target = name.substr(0, at);
    out.pid = std::stol(name.substr(pid_begin, pid_end - pid_begin));
    out.host = noise_end == name.size() ? "" : name.substr(noise_end + 1);
    return true;
  }
  return false;
}

bool process_is_running(long pid) {
  if (pid <= 0) return true;  // not a pid we can judge: keep the file
  if (::kill(static_cast<pid_t>(pid), 0) == 0) return true;
  return errno == EPERM;
}

std::vector<std::string> remove_stale_temp_files(
    const std::string& directory, const std::function<bool(const std::string&)>& is_target) {
  namespace fs = std::filesystem;
  std::vector<std::string> removed;
  uintmax_t bytes = 0;
  std::error_code error;
  fs::directory_iterator it(directory, error);
  if (error) return removed;
  for (const fs::directory_entry& entry : it) {
    TempFileName temp;
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file(error) || !parse_temp_file_name(name, temp)) continue;
    if (!is_target(temp.target)) continue;
    if (!temp.host.empty() && temp.host != host_tag()) continue;  // another host's writer
    if (process_is_running(temp.pid)) continue;
    const uintmax_t size = entry.file_size(error);
    if (fs::remove(entry.path(), error) && !error) {
      removed.push_back(entry.path().string());
      bytes += size;
    }
  }
  if (!removed.empty()) {
    report_warning("cleanup", "removed " + std::to_string(removed.size()) +
                                  " temp file(s) of writers that no longer run (" +
                                  format_bytes(static_cast<double>(bytes)) + ") in " + directory +
                                  ", e.g. " + fs::path(removed.front()).filename().string());
  }
  return removed;
}

}  // namespace raggemm
