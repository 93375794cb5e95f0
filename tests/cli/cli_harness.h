// Runs the built raggemm binary (RAGGEMM_CLI_PATH) on files in a private
// temporary folder and captures its exit status, stdout and stderr.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "raggemm/npy.h"
#include "raggemm/tensor.h"

namespace raggemm::testing {

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

inline std::string shell_quote(const std::string& arg) {
  std::string quoted = "'";
  for (char c : arg) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

// A fresh folder under the system temp dir, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "raggemm_cli_XXXXXX").string();
    char* made = mkdtemp(pattern.data());
    EXPECT_NE(made, nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// Runs `raggemm <args...>` in `dir`, so bare file names resolve there.
// `shell_setup`, when given, runs in the same shell first (e.g. a ulimit that
// the binary inherits).
inline CliResult run_cli(const TempDir& dir, const std::vector<std::string>& args,
                         const std::string& shell_setup = "") {
  std::string command = "cd " + shell_quote(dir.path().string()) + " && " +
                        (shell_setup.empty() ? "" : shell_setup + " && ") +
                        shell_quote(RAGGEMM_CLI_PATH);
  for (const std::string& arg : args) command += " " + shell_quote(arg);
  const std::string out_file = dir.file(".stdout"), err_file = dir.file(".stderr");
  command += " >" + shell_quote(out_file) + " 2>" + shell_quote(err_file);
  const int status = std::system(command.c_str());
  CliResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.out = read_text(out_file);
  result.err = read_text(err_file);
  std::filesystem::remove(out_file);
  std::filesystem::remove(err_file);
  return result;
}

}  // namespace raggemm::testing
