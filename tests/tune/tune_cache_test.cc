// The persistent tune cache: round trip, keys, merging, concurrent writers in
// two processes, and unusable files (corrupt, truncated, other version) that
// warn once and never crash or cost other entries.
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "raggemm/diagnostics.h"
#include "raggemm/plan.h"
#include "raggemm/temp_files.h"

namespace raggemm {
namespace {

std::string fresh_dir() {
  static int counter = 0;
  const std::string dir = testing::TempDir() + "/raggemm_tune_cache_" + std::to_string(::getpid()) +
                          "_" + std::to_string(counter++);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

GmmShape shape(Pass pass, int64_t m, int64_t k, int64_t n, int64_t groups) {
  GmmShape s;
  s.pass = pass;
  s.m = m;
  s.k = k;
  s.n = n;
  s.groups = groups;
  return s;
}

TuneEntry entry(int64_t m, int64_t k, int64_t n, KernelVersion kernel, int buffers) {
  TuneEntry e;
  e.winner = TuneCandidate{Tiles{m, k, n}, kernel, buffers};
  e.threads = 2;
  e.heuristic_seconds = 0.25;
  e.timings.push_back(CandidateTiming{e.winner, 0.125, true});
  e.timings.push_back(CandidateTiming{TuneCandidate{Tiles{8, 8, 8}, KernelVersion::kV1, 1}, 0.5, false});
  return e;
}

void expect_same(const TuneEntry& a, const TuneEntry& b) {
  EXPECT_EQ(a.winner, b.winner);
  EXPECT_EQ(a.threads, b.threads);
  EXPECT_DOUBLE_EQ(a.heuristic_seconds, b.heuristic_seconds);
  ASSERT_EQ(a.timings.size(), b.timings.size());
  for (size_t i = 0; i < a.timings.size(); ++i) {
    EXPECT_EQ(a.timings[i].candidate, b.timings[i].candidate);
    EXPECT_DOUBLE_EQ(a.timings[i].seconds, b.timings[i].seconds);
    EXPECT_EQ(a.timings[i].passed_check, b.timings[i].passed_check);
  }
}

TEST(TuneCache, RoundTripThroughTheFile) {
  const std::string path = fresh_dir() + "/sub/dir/cache.json";  // directories are created
  const GmmShape fwd = shape(Pass::kForward, 4096, 1024, 768, 32);
  const GmmShape drhs = shape(Pass::kGradRhs, 4096, 1024, 768, 32);
  {
    TuneCache cache(path);
    EXPECT_EQ(cache.size(), 0u);
    cache.store(fwd, entry(96, 256, 512, KernelVersion::kV2, 3));
    cache.store(drhs, entry(48, 128, 256, KernelVersion::kV1, 1));
  }
  TuneCache reloaded(path);
  EXPECT_EQ(reloaded.size(), 2u);
  ASSERT_TRUE(reloaded.find(fwd).has_value());
  expect_same(*reloaded.find(fwd), entry(96, 256, 512, KernelVersion::kV2, 3));
  expect_same(*reloaded.find(drhs), entry(48, 128, 256, KernelVersion::kV1, 1));
  EXPECT_FALSE(reloaded.find(shape(Pass::kGradLhs, 4096, 1024, 768, 32)).has_value());
  EXPECT_NE(read_text(path).find("\"version\": 1"), std::string::npos);
}

TEST(TuneCache, KeyBucketsMAndSeparatesEverythingElse) {
  EXPECT_EQ(TuneCache::bucket_m(4096), 4096);
  EXPECT_EQ(TuneCache::bucket_m(3000), 4096);
  EXPECT_EQ(TuneCache::bucket_m(4097), 8192);
  EXPECT_EQ(TuneCache::bucket_m(1), 1);
  EXPECT_EQ(TuneCache::bucket_m(0), 0);
  const GmmShape base = shape(Pass::kForward, 4096, 1024, 768, 32);
  GmmShape near = base;
  near.m = 3100;
  near.group_sizes.assign(32, 3100 / 32);  // group sizes are not part of the key
  EXPECT_EQ(TuneCache::key(base), TuneCache::key(near));
  std::vector<GmmShape> different(7, base);
  different[0].pass = Pass::kGradLhs;
  different[1].m = 8192;
  different[2].k = 1023;
  different[3].n = 769;
  different[4].groups = 33;
  different[5].lhs_dtype = DType::kBF16;
  different[6].quantization = QuantRecipe::kFp8;
  for (const GmmShape& other : different) EXPECT_NE(TuneCache::key(base), TuneCache::key(other));
}

TEST(TuneCache, StoreMergesWhatOthersWroteMeanwhile) {
  const std::string path = fresh_dir() + "/cache.json";
  TuneCache first(path);
  TuneCache second(path);  // both loaded the empty file
  first.store(shape(Pass::kForward, 64, 64, 64, 2), entry(16, 16, 16, KernelVersion::kV1, 1));
  second.store(shape(Pass::kForward, 128, 64, 64, 2), entry(32, 16, 16, KernelVersion::kV2, 2));
  TuneCache reloaded(path);
  EXPECT_EQ(reloaded.size(), 2u);
}

TEST(TuneCache, ConcurrentWritersInTwoProcessesLoseNothing) {
  const std::string path = fresh_dir() + "/cache.json";
  constexpr int kPerProcess = 25;
  std::vector<pid_t> children;
  for (int process = 0; process < 2; ++process) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int status = 0;
      try {
        TuneCache cache(path);  // a stale view as soon as the other writes
        for (int i = 0; i < kPerProcess; ++i) {
          cache.store(shape(Pass::kForward, 64, 64 + i, 64 + process, 2),
                      entry(8 + i, 16, 16, KernelVersion::kV1, 1));
        }
      } catch (...) {
        status = 1;
      }
      ::_exit(status);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  TuneCache merged(path);
  EXPECT_EQ(merged.size(), 2u * kPerProcess);
  for (int process = 0; process < 2; ++process) {
    for (int i = 0; i < kPerProcess; ++i) {
      auto found = merged.find(shape(Pass::kForward, 64, 64 + i, 64 + process, 2));
      ASSERT_TRUE(found.has_value()) << process << " " << i;
      EXPECT_EQ(found->winner.tiles.m, 8 + i);
    }
  }
}

struct BadFile {
  const char* name;
  std::string text;  // "TRUNCATE" marks: a valid cache cut in half
};

class TuneCacheBadFile : public testing::TestWithParam<BadFile> {};

TEST_P(TuneCacheBadFile, WarnsOnceIsIgnoredAndKeptAside) {
  const std::string path = fresh_dir() + "/cache.json";
  std::string text = GetParam().text;
  if (text == "TRUNCATE") {
    TuneCache(path).store(shape(Pass::kForward, 64, 64, 64, 2), entry(16, 16, 16, KernelVersion::kV1, 1));
    const std::string whole = read_text(path);
    text = whole.substr(0, whole.size() / 2);
  }
  write_text(path, text);

  take_diagnostics();
  TuneCache cache(path);
  EXPECT_EQ(cache.size(), 0u);
  const GmmShape mine = shape(Pass::kGradLhs, 256, 128, 64, 4);
  cache.store(mine, entry(32, 32, 32, KernelVersion::kV2, 2));  // re-reads under the lock
  cache.reload();
  const std::vector<Diagnostic> warnings = take_diagnostics();

  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].source, "tune_cache");
  EXPECT_NE(warnings[0].text.find(path), std::string::npos) << warnings[0].text;
  // The write produced a good file with our entry; the bad one was kept aside.
  EXPECT_EQ(TuneCache(path).size(), 1u);
  EXPECT_TRUE(cache.find(mine).has_value());
  EXPECT_EQ(read_text(path + ".unreadable"), text);
}

INSTANTIATE_TEST_SUITE_P(
    Files, TuneCacheBadFile,
    testing::Values(BadFile{"garbage", "\x01\x02 not json at all {{{"}, BadFile{"truncated", "TRUNCATE"},
                    BadFile{"empty", ""},
                    BadFile{"other_version",
                            R"({"format": "raggemm-tune-cache", "version": 99, "entries": {}})"},
                    BadFile{"other_format", R"({"hello": "world"})"},
                    BadFile{"no_entries", R"({"format": "raggemm-tune-cache", "version": 1})"}),
    [](const testing::TestParamInfo<BadFile>& info) { return std::string(info.param.name); });

// Replaces the winner of every entry of a cache file by `winner` (JSON).
void set_every_winner(const std::string& path, const std::string& key, const nlohmann::json& winner) {
  nlohmann::json root = nlohmann::json::parse(read_text(path));
  for (auto& [name, value] : root["entries"].items()) {
    if (key.empty() || name == key) value["winner"] = winner;
  }
  write_text(path, root.dump(1));
}

// An entry that parses but cannot run (tiles past the ops' limit, a missing
// field) is rejected alone: one warning naming the cache and the entry, no
// lookup hit, the other entries still served, and the entry kept as written.
struct BadEntry {
  const char* name;
  nlohmann::json winner;
  const char* reason_part;
};

class TuneCacheBadEntry : public testing::TestWithParam<BadEntry> {};

TEST_P(TuneCacheBadEntry, IsRejectedAloneWithOneWarning) {
  const std::string path = fresh_dir() + "/cache.json";
  const GmmShape bad = shape(Pass::kForward, 64, 32, 48, 4);
  const GmmShape good = shape(Pass::kGradRhs, 64, 32, 48, 4);
  {
    TuneCache writer(path);
    writer.store(bad, entry(16, 16, 16, KernelVersion::kV1, 1));
    writer.store(good, entry(8, 8, 8, KernelVersion::kV2, 1));
  }
  set_every_winner(path, TuneCache::key(bad), GetParam().winner);

  take_diagnostics();
  TuneCache cache(path);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.rejected_count(), 1u);
  EXPECT_FALSE(cache.find(bad).has_value());
  EXPECT_FALSE(cache.find(bad).has_value());  // a second lookup does not warn again
  ASSERT_TRUE(cache.find(good).has_value());
  const std::vector<Diagnostic> warnings = take_diagnostics();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].text.find(path), std::string::npos) << warnings[0].text;
  EXPECT_NE(warnings[0].text.find(TuneCache::key(bad)), std::string::npos) << warnings[0].text;
  EXPECT_NE(warnings[0].text.find(GetParam().reason_part), std::string::npos) << warnings[0].text;
  ASSERT_TRUE(cache.rejected(bad).has_value());

  // The call goes on with the heuristic, and says why the cache was passed over.
  const ResolvedPassConfig resolved = resolve_problem(bad, KernelOverrides{}, &cache);
  EXPECT_EQ(resolved.source.m, PlanSource::kHeuristic);
  EXPECT_LE(resolved.tiles.m, kMaxTile);
  EXPECT_NE(resolved.cache_rejection.find(GetParam().reason_part), std::string::npos);

  // Another store keeps the rejected entry as written; retuning its shape replaces it.
  cache.store(shape(Pass::kGradLhs, 64, 32, 48, 4), entry(4, 4, 4, KernelVersion::kV1, 1));
  EXPECT_EQ(TuneCache(path).rejected_count(), 1u);
  EXPECT_FALSE(std::filesystem::exists(path + ".unreadable"));
  cache.store(bad, entry(16, 16, 16, KernelVersion::kV1, 1));
  const TuneCache reread(path);
  EXPECT_EQ(reread.rejected_count(), 0u);
  EXPECT_EQ(reread.size(), 3u);
}

INSTANTIATE_TEST_SUITE_P(
    Entries, TuneCacheBadEntry,
    testing::Values(
        BadEntry{"tiles_2_pow_40",
                 {{"m", int64_t{1} << 40}, {"k", int64_t{1} << 40}, {"n", int64_t{1} << 40},
                  {"kernel", "v1"}, {"buffers", 1}},
                 "65536"},
        BadEntry{"block_over_cap",
                 {{"m", 65536}, {"k", 65536}, {"n", 8}, {"kernel", "v1"}, {"buffers", 1}},
                 "67108864"},
        BadEntry{"zero_tile", {{"m", 0}, {"k", 8}, {"n", 8}, {"kernel", "v1"}, {"buffers", 1}},
                 "non-positive"},
        BadEntry{"missing_field", {{"m", 8}}, "not found"},
        BadEntry{"unknown_kernel", {{"m", 8}, {"k", 8}, {"n", 8}, {"kernel", "v9"}, {"buffers", 1}},
                 "v9"}),
    [](const testing::TestParamInfo<BadEntry>& info) { return std::string(info.param.name); });

// A store removes the temp files killed tuners left beside the cache (and
// not a live writer's, nor another file's).
TEST(TuneCache, StoreRemovesTempFilesOfKilledWriters) {
  const std::string dir = fresh_dir();
  const std::string path = dir + "/cache.json";
  const pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  const std::string stale = path + ".tmp." + std::to_string(child) + ".0123456789abcdef";
  const std::string other = dir + "/other.json.tmp." + std::to_string(child) + ".0123456789abcdef";
  const std::string live = atomic_temp_path(path);  // this process: alive
  for (const std::string& file : {stale, other, live}) write_text(file, "{");
  take_diagnostics();
  TuneCache(path).store(shape(Pass::kForward, 64, 64, 64, 2), entry(8, 8, 8, KernelVersion::kV1, 1));
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_TRUE(std::filesystem::exists(other));
  EXPECT_TRUE(std::filesystem::exists(live));
  const std::vector<Diagnostic> warnings = take_diagnostics();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].text.find("removed 1 temp file(s)"), std::string::npos) << warnings[0].text;
}

TEST(TuneCache, DefaultPathHonoursTheEnvironment) {
  const char* saved_explicit = std::getenv("RAGGEMM_TUNE_CACHE");
  const char* saved_xdg = std::getenv("XDG_CACHE_HOME");
  const std::string keep_explicit = saved_explicit ? saved_explicit : "";
  const std::string keep_xdg = saved_xdg ? saved_xdg : "";
  ::unsetenv("RAGGEMM_TUNE_CACHE");
  ::setenv("XDG_CACHE_HOME", "/tmp/xdg", 1);
  EXPECT_EQ(TuneCache::default_path(), "/tmp/xdg/raggemm/tune_cache.json");
  ::unsetenv("XDG_CACHE_HOME");
  EXPECT_NE(TuneCache::default_path().find("/.cache/raggemm/tune_cache.json"), std::string::npos);
  ::setenv("RAGGEMM_TUNE_CACHE", "/tmp/elsewhere.json", 1);
  EXPECT_EQ(TuneCache::default_path(), "/tmp/elsewhere.json");
  if (saved_explicit) ::setenv("RAGGEMM_TUNE_CACHE", keep_explicit.c_str(), 1); else ::unsetenv("RAGGEMM_TUNE_CACHE");
  if (saved_xdg) ::setenv("XDG_CACHE_HOME", keep_xdg.c_str(), 1); else ::unsetenv("XDG_CACHE_HOME");
}

}  // namespace
}  // namespace raggemm
