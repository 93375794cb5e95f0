// Temp files of atomic writes: names carry pid and host; a cleanup removes
// exactly the temp files of its targets whose writer no longer runs on this
// host, and reports it once.
#include "raggemm/temp_files.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "raggemm/diagnostics.h"

namespace raggemm {
namespace {

namespace fs = std::filesystem;

// The pid of a process that has exited (and been reaped).
long dead_pid() {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  return child;
}

// The temp name a writer with `pid` on this host would use for `target`.
std::string temp_name(const std::string& target, long pid) {
  const std::string mine = fs::path(atomic_temp_path(target)).filename().string();
  TempFileName parsed;
  EXPECT_TRUE(parse_temp_file_name(mine, parsed)) << mine;
  return target + ".tmp." + std::to_string(pid) + ".0123456789abcdef." + parsed.host;
}

void touch(const fs::path& path, size_t bytes = 10) {
  std::ofstream(path) << std::string(bytes, 'x');
}

TEST(TempFiles, NamesCarryPidAndHost) {
  const std::string path = atomic_temp_path("/some/dir/step_00000001.ckpt");
  TempFileName parsed;
  ASSERT_TRUE(parse_temp_file_name(fs::path(path).filename().string(), parsed)) << path;
  EXPECT_EQ(parsed.target, "step_00000001.ckpt");
  EXPECT_EQ(parsed.pid, ::getpid());
  EXPECT_FALSE(parsed.host.empty());
  // The names before the host field, and names that are not temp files.
  ASSERT_TRUE(parse_temp_file_name("a.json.tmp.123.0123456789abcdef", parsed));
  EXPECT_EQ(parsed.target, "a.json");
  EXPECT_EQ(parsed.pid, 123);
  EXPECT_EQ(parsed.host, "");
  for (const char* name : {"a.json", "a.json.tmp.", "a.json.tmp.12.short", "a.json.tmp.x.0123456789abcdef",
                           "a.json.tmp.12.0123456789abcdef.", "compare.png.tmp.png"}) {
    EXPECT_FALSE(parse_temp_file_name(name, parsed)) << name;
  }
}

TEST(TempFiles, RemovesOnlyDeadWritersOfItsOwnTargets) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("temp_files_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const long dead = dead_pid();
  pid_t live = fork();
  if (live == 0) {
    pause();
    _exit(0);
  }
  const std::string ours_dead = temp_name("step_00000003.ckpt", dead);
  const std::string legacy_dead = "step_00000004.ckpt.tmp." + std::to_string(dead) + ".0123456789abcdef";
  const std::string ours_live = temp_name("step_00000005.ckpt", live);
  const std::string mine = temp_name("step_00000006.ckpt", ::getpid());
  const std::string other_host =
      "step_00000007.ckpt.tmp." + std::to_string(dead) + ".0123456789abcdef.some-other-host";
  const std::string other_target = temp_name("config.yml", dead);
  for (const std::string& name :
       {ours_dead, legacy_dead, ours_live, mine, other_host, other_target,
        std::string("step_00000001.ckpt")}) {
    touch(dir / name, 1024);
  }

  set_diagnostic_sink(nullptr);
  take_diagnostics();
  const std::vector<std::string> removed = remove_stale_temp_files(
      dir.string(), [](const std::string& target) { return target.rfind("step_", 0) == 0; });
  kill(live, SIGKILL);
  waitpid(live, nullptr, 0);

  EXPECT_EQ(removed.size(), 2u);
  EXPECT_FALSE(fs::exists(dir / ours_dead));
  EXPECT_FALSE(fs::exists(dir / legacy_dead));
  for (const std::string& kept : {ours_live, mine, other_host, other_target,
                                  std::string("step_00000001.ckpt")}) {
    EXPECT_TRUE(fs::exists(dir / kept)) << kept;
  }
  const std::vector<Diagnostic> warnings = take_diagnostics();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].source, "cleanup");
  EXPECT_NE(warnings[0].text.find("removed 2 temp file(s)"), std::string::npos) << warnings[0].text;
  EXPECT_NE(warnings[0].text.find("2.0 KiB"), std::string::npos) << warnings[0].text;

  // Nothing left to remove: no second warning.
  EXPECT_TRUE(remove_stale_temp_files(dir.string(), [](const std::string&) { return false; }).empty());
  EXPECT_TRUE(take_diagnostics().empty());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace raggemm
