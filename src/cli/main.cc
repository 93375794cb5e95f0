// raggemm: entry point. Dispatches to the registered subcommands and turns
// every rejected input into one "error: ..." line and exit status 2.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <iostream>

#include "cli/command.h"
#include "raggemm/error.h"

namespace raggemm::cli {

std::map<std::string, Command>& command_registry() {
  static std::map<std::string, Command> registry;
  return registry;
}

namespace {

void print_usage() {
  std::cout << "usage: raggemm <command> [options]\n\ncommands:\n";
  for (const auto& [name, command] : command_registry()) {
    std::printf("  %-12s %s\n", name.c_str(), command.summary.c_str());
  }
  std::cout << "\nrun 'raggemm <command> --help' for a command's options\n";
}

}  // namespace
}  // namespace raggemm::cli

int main(int argc, char** argv) {
  using namespace raggemm::cli;
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    print_usage();
    return argc < 2 ? 2 : 0;
  }
  std::string name = argv[1];
  auto it = command_registry().find(name);
  if (it == command_registry().end()) {
    std::cerr << "error: command=" << name << ": unknown command (run 'raggemm --help')\n";
    return 2;
  }
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    return it->second.run(std::move(args));
  } catch (const CLI::Success&) {
    return 0;  // --help was printed
  } catch (const CLI::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const raggemm::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
}
