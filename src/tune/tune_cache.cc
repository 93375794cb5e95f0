// The persistent tune cache: one versioned JSON file, updated under an
// exclusive flock() on a sidecar lock file by re-reading, merging and
// replacing it atomically, so concurrent tuners never lose each other's work.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "raggemm/diagnostics.h"
#include "raggemm/error.h"
#include "raggemm/npy.h"
#include "raggemm/plan.h"
#include "raggemm/temp_files.h"
#include "tune/cpu_info.h"

namespace raggemm {
namespace {

using nlohmann::json;

constexpr const char* kFormatName = "raggemm-tune-cache";

// One warning per (path, what) per process, however often the file is re-read.
void warn_once(const std::string& path, const std::string& what, const std::string& consequence) {
  static std::mutex mutex;
  static std::set<std::string> warned;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!warned.insert(path + "\n" + what).second) return;
  }
  report_warning("tune_cache", path + ": " + what + "; " + consequence);
}

void warn_unreadable(const std::string& path, const std::string& what) {
  warn_once(path, what, "ignoring it (it is kept aside on the next write)");
}

json candidate_to_json(const TuneCandidate& candidate) {
  return json{{"m", candidate.tiles.m},
              {"k", candidate.tiles.k},
              {"n", candidate.tiles.n},
              {"kernel", kernel_name(candidate.kernel)},
              {"buffers", candidate.input_buffer_count}};
}

TuneCandidate candidate_from_json(const json& in) {
  TuneCandidate candidate;
  candidate.tiles = Tiles{in.at("m").get<int64_t>(), in.at("k").get<int64_t>(), in.at("n").get<int64_t>()};
  candidate.kernel = parse_kernel(in.at("kernel").get<std::string>(), "kernel");
  candidate.input_buffer_count = in.at("buffers").get<int>();
  const Tiles& t = candidate.tiles;
  if (t.m <= 0 || t.k <= 0 || t.n <= 0 || candidate.input_buffer_count < 1 ||
      candidate.input_buffer_count > 4) {
    throw std::invalid_argument("candidate with a non-positive tile or a bad buffer count");
  }
  return candidate;
}

json entry_to_json(const TuneEntry& entry) {
  json timings = json::array();
  for (const CandidateTiming& timing : entry.timings) {
    json item = candidate_to_json(timing.candidate);
    item["seconds"] = timing.seconds;
    item["passed_check"] = timing.passed_check;
    timings.push_back(std::move(item));
  }
  return json{{"winner", candidate_to_json(entry.winner)},
              {"threads", entry.threads},
              {"heuristic_seconds", entry.heuristic_seconds},
              {"timings", std::move(timings)}};
}

TuneEntry entry_from_json(const json& in) {
  TuneEntry entry;
  entry.winner = candidate_from_json(in.at("winner"));
  entry.threads = in.value("threads", 0);
  entry.heuristic_seconds = in.value("heuristic_seconds", 0.0);
  for (const json& item : in.value("timings", json::array())) {
    CandidateTiming timing;
    timing.candidate = candidate_from_json(item);
    timing.seconds = item.at("seconds").get<double>();
    timing.passed_check = item.at("passed_check").get<bool>();
    entry.timings.push_back(timing);
  }
  // The winner is what a call would run: it must pass the ops' own checks,
  // or a hand-edited or foreign cache would fail every call of its shape.
  const Tiles& t = entry.winner.tiles;
  const std::string why = tile_limit_violation(t);
  if (!why.empty()) {
    throw std::invalid_argument("winner tiles=" + std::to_string(t.m) + "," + std::to_string(t.k) +
                                "," + std::to_string(t.n) + ": " + why);
  }
  return entry;
}

// What reading a cache file found: the usable entries, and the entries that
// failed validation (kept as written, with the reason).
struct FileEntries {
  std::map<std::string, TuneEntry> entries;
  std::map<std::string, RejectedTuneEntry> rejected;
};

enum class FileState { kMissing, kValid, kUnreadable };

// Reads the file into `out`; an unusable file is reported once. One bad
// entry does not spoil the others: it is rejected alone.
FileState read_cache_file(const std::string& path, FileEntries& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return FileState::kMissing;
  std::stringstream text;
  text << in.rdbuf();
  json root = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    warn_unreadable(path, "not valid JSON (corrupt or truncated)");
    return FileState::kUnreadable;
  }
  if (root.value("format", std::string()) != kFormatName || !root.contains("version") ||
      !root["version"].is_number_integer()) {
    warn_unreadable(path, "not a raggemm tune cache");
    return FileState::kUnreadable;
  }
  const int64_t version = root["version"].get<int64_t>();
  if (version != TuneCache::kFormatVersion) {
    warn_unreadable(path, "format version " + std::to_string(version) +
                              ", this build reads version " +
                              std::to_string(TuneCache::kFormatVersion));
    return FileState::kUnreadable;
  }
  if (!root.contains("entries") || !root["entries"].is_object()) {
    warn_unreadable(path, "no \"entries\" object");
    return FileState::kUnreadable;
  }
  FileEntries parsed;
  for (const auto& [key, value] : root["entries"].items()) {
    try {
      parsed.entries[key] = entry_from_json(value);
    } catch (const std::exception& e) {
      parsed.rejected[key] = RejectedTuneEntry{e.what(), value.dump()};
    }
  }
  out = std::move(parsed);
  return FileState::kValid;
}

// Exclusive lock on "<path>.lock" for the lifetime of the object.
class FileLock {
 public:
  explicit FileLock(const std::string& path) : lock_path_(path + ".lock") {
    fd_ = ::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd_ < 0) fail("tune_cache", lock_path_, std::string("cannot open lock file: ") + std::strerror(errno));
    while (::flock(fd_, LOCK_EX) != 0) {
      if (errno != EINTR) {
        const int error = errno;
        ::close(fd_);
        fail("tune_cache", lock_path_, std::string("cannot lock: ") + std::strerror(error));
      }
    }
  }
  ~FileLock() {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  std::string lock_path_;
  int fd_ = -1;
};

std::string getenv_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value ? std::string(value) : std::string();
}

}  // namespace

TuneCache::TuneCache(std::string path) : path_(std::move(path)) { reload(); }

void TuneCache::reload() {
  FileEntries read;
  if (read_cache_file(path_, read) == FileState::kValid) {
    entries_ = std::move(read.entries);
    rejected_ = std::move(read.rejected);
  } else {
    entries_.clear();
    rejected_.clear();
  }
}

std::string TuneCache::default_path() {
  std::string explicit_path = getenv_or_empty("RAGGEMM_TUNE_CACHE");
  if (!explicit_path.empty()) return explicit_path;
  std::string base = getenv_or_empty("XDG_CACHE_HOME");
  if (base.empty()) {
    const std::string home = getenv_or_empty("HOME");
    base = (home.empty() ? std::string(".") : home) + "/.cache";
  }
  return base + "/raggemm/tune_cache.json";
}

const TuneCache& TuneCache::shared_default() {
  static const TuneCache cache(default_path());
  return cache;
}

int64_t TuneCache::bucket_m(int64_t m) {
  if (m <= 1) return m < 0 ? 0 : m;
  int64_t bucket = 1;
  while (bucket < m && bucket < (int64_t{1} << 62)) bucket <<= 1;
  return bucket;
}

std::string TuneCache::key(const GmmShape& shape) {
  std::ostringstream key;
  key << "cpu=" << tune::cpu_model_name() << ";isa=" << tune::isa_target_name()
      << ";op=" << pass_op_name(shape.pass) << ";pass=" << pass_name(shape.pass)
      << ";dtypes=" << dtype_name(shape.lhs_dtype) << "," << dtype_name(shape.rhs_dtype)
      << ";quant=" << (shape.quantization ? quantization_name(shape.quantization) : "none")
      << ";m=" << bucket_m(shape.m) << ";k=" << shape.k << ";n=" << shape.n
      << ";g=" << shape.groups;
  return key.str();
}

std::optional<TuneEntry> TuneCache::find(const GmmShape& shape) const {
  const std::string entry_key = key(shape);
  auto it = entries_.find(entry_key);
  if (it != entries_.end()) return it->second;
  auto bad = rejected_.find(entry_key);
  if (bad != rejected_.end()) {
    warn_once(path_, "entry \"" + entry_key + "\" rejected (" + bad->second.reason + ")",
              "using the heuristic for it");
  }
  return std::nullopt;
}

std::optional<RejectedTuneEntry> TuneCache::rejected(const GmmShape& shape) const {
  auto it = rejected_.find(key(shape));
  if (it == rejected_.end()) return std::nullopt;
  return it->second;
}

void TuneCache::store(const GmmShape& shape, const TuneEntry& entry) {
  const std::string entry_key = key(shape);
  const std::filesystem::path parent = std::filesystem::path(path_).parent_path();
  if (!parent.empty()) {
    std::error_code error;
    std::filesystem::create_directories(parent, error);
    if (error) fail("tune_cache", path_, "cannot create directory: " + error.message());
  }
  FileLock lock(path_);
  // Temp files of writers killed mid-write (every writer takes the lock, so
  // none of this cache's is being written now; liveness is checked anyway).
  const std::string file_name = std::filesystem::path(path_).filename().string();
  remove_stale_temp_files(parent.empty() ? "." : parent.string(),
                          [&](const std::string& target) { return target == file_name; });
  FileEntries disk;
  const FileState state = read_cache_file(path_, disk);
  std::map<std::string, TuneEntry>& on_disk = disk.entries;
  if (state == FileState::kUnreadable) {
    // Keep the unusable file for whoever can read it (another version) or
    // wants to look at it, instead of silently destroying it.
    std::error_code error;
    std::filesystem::rename(path_, path_ + ".unreadable", error);
  }
  // What others wrote wins over our older copies; our new entry wins over all.
  for (auto& [key, value] : entries_) on_disk.try_emplace(key, value);
  on_disk[entry_key] = entry;
  entries_ = std::move(on_disk);
  // Rejected entries are written back as they were (a newer build may read
  // them), except the one this store replaces.
  disk.rejected.erase(entry_key);
  for (auto& [key, value] : rejected_) {
    if (key != entry_key && !entries_.count(key)) disk.rejected.try_emplace(key, value);
  }
  std::erase_if(disk.rejected, [&](const auto& item) { return entries_.count(item.first) > 0; });
  rejected_ = std::move(disk.rejected);

  json entries = json::object();
  for (const auto& [key, value] : entries_) entries[key] = entry_to_json(value);
  for (const auto& [key, value] : rejected_) entries[key] = json::parse(value.text);
  json root = {{"format", kFormatName}, {"version", kFormatVersion}, {"entries", std::move(entries)}};
  const std::string text = root.dump(1) + "\n";
  write_file_atomic(path_, text.data(), text.size());
}

}  // namespace raggemm
