// raggemm: entry point. Dispatches to the registered subcommands and turns
// every rejected input into one "error: ..." line and exit status 2.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <iostream>

#include "cli/command.h"
#include "raggemm/diagnostics.h"
#include "raggemm/error.h"

namespace raggemm::cli {

std::map<std::string, Command>& command_registry() {
  static std::map<std::string, Command> registry;
  return registry;
}

namespace {

// One line, whatever the message holds: scripts read the first line only.
int report_error(const std::string& message) {
  std::string line = message;
  for (char& c : line) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  std::cerr << "error: " << line << "\n";
  return 2;
}

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
  if (argc < 2) return report_error("command=: missing command (run 'raggemm --help')");
  if (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    print_usage();
    return 0;
  }
  std::string name = argv[1];
  auto it = command_registry().find(name);
  if (it == command_registry().end()) {
    return report_error("command=" + name + ": unknown command (run 'raggemm --help')");
  }
  std::vector<std::string> args(argv + 1, argv + argc);
  // The library's warnings (raggemm/diagnostics.h): one stderr line each.
  raggemm::set_diagnostic_sink([](const raggemm::Diagnostic& d) {
    std::string line = d.text;
    for (char& c : line) {
      if (c == '\n' || c == '\r') c = ' ';
    }
    std::cerr << ("warning: " + d.source + ": " + line + "\n");  // one write per line
  });
  try {
    return it->second.run(std::move(args));
  } catch (const CLI::Success&) {
    return 0;  // --help was printed
  } catch (const CLI::Error& e) {
    return report_error(e.what());
  } catch (const raggemm::Error& e) {
    return report_error(e.what());
  } catch (const std::exception& e) {
    return report_error(e.what());
  }
}
