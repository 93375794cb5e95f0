// Runs this same executable again as a child process with one environment
// variable changed, and returns what it printed. OpenBLAS reads
// OPENBLAS_CORETYPE once, when it loads, so a peer freed from a restricting
// environment has to run in a process of its own.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace raggemm::cli {

struct ChildResult {
  int exit_code = -1;  // -1: killed by a signal or could not start
  std::string out;     // its stdout (stderr passes through to ours)
};

// /proc/self/exe with `args` (args[0] is the subcommand), the environment
// of this process with `variable` set to `value`, or removed when `value`
// is empty.
ChildResult run_self(const std::vector<std::string>& args, const std::string& variable,
                     const std::string& value);

}  // namespace raggemm::cli
