// Warnings from the library to whoever presents them. Nothing below cli/ and
// train/ prints (DESIGN.md s.5), yet some events deserve a word to the user
// without failing the call: a tune-cache entry skipped, temp files of killed
// writers removed. Lower layers report them here; the program installs a
// sink that prints them (the CLI: "warning: <source>: <text>" on stderr;
// Python may forward them to `warnings`).
//
// Thread-safe: any thread may report, and the sink may be swapped at any
// time. The sink is called outside the internal lock, so it may itself
// report. With no sink installed, warnings are kept (the newest
// kMaxPendingDiagnostics) until a caller takes them.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace raggemm {

struct Diagnostic {
  std::string source;  // what reports: "tune_cache", "checkpoint", a path's owner...
  std::string text;    // one line, no trailing newline
};

using DiagnosticSink = std::function<void(const Diagnostic&)>;

inline constexpr size_t kMaxPendingDiagnostics = 256;

// Installs `sink` (an empty function: none) and returns the previous one.
// Installing a sink first delivers the warnings kept while there was none.
DiagnosticSink set_diagnostic_sink(DiagnosticSink sink);

// Reports a warning: to the sink if there is one, else kept for
// take_diagnostics().
void report_warning(const std::string& source, const std::string& text);

// The warnings kept while no sink was installed, oldest first; clears them.
std::vector<Diagnostic> take_diagnostics();

}  // namespace raggemm
