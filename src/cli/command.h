// Subcommand registry of the raggemm tool. Each subcommand lives in its own
// <name>_command.cc and registers itself with a static CommandRegistrar, so
// adding one touches no other file.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace raggemm::cli {

// Runs a subcommand on its own arguments (argv[0] is the subcommand name).
// Returns the process exit status. Throwing raggemm::Error or CLI::Error is the
// normal way to reject input: main prints "error: ..." and exits with 2.
using CommandFn = std::function<int(std::vector<std::string> args)>;

struct Command {
  std::string summary;
  CommandFn run;
};

std::map<std::string, Command>& command_registry();

struct CommandRegistrar {
  CommandRegistrar(const std::string& name, const std::string& summary, CommandFn run) {
    command_registry()[name] = Command{summary, std::move(run)};
  }
};

}  // namespace raggemm::cli
