// The process-wide diagnostics sink (include/raggemm/diagnostics.h).
#include "raggemm/diagnostics.h"

#include <deque>
#include <memory>
#include <mutex>

namespace raggemm {
namespace {

struct State {
  std::mutex mutex;
  // Shared so that a report can call the sink outside the lock while another
  // thread swaps it.
  std::shared_ptr<const DiagnosticSink> sink;
  std::deque<Diagnostic> pending;
};

State& state() {
  static State* instance = new State();  // never destroyed: reports may come at exit
  return *instance;
}

}  // namespace

DiagnosticSink set_diagnostic_sink(DiagnosticSink sink) {
  State& s = state();
  std::shared_ptr<const DiagnosticSink> installed =
      sink ? std::make_shared<const DiagnosticSink>(std::move(sink)) : nullptr;
  std::shared_ptr<const DiagnosticSink> previous;
  std::deque<Diagnostic> backlog;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    previous = std::move(s.sink);
    s.sink = installed;
    if (installed) backlog.swap(s.pending);
  }
  for (const Diagnostic& d : backlog) (*installed)(d);
  return previous ? *previous : DiagnosticSink();
}

void report_warning(const std::string& source, const std::string& text) {
  State& s = state();
  std::shared_ptr<const DiagnosticSink> sink;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    sink = s.sink;
    if (!sink) {
      if (s.pending.size() == kMaxPendingDiagnostics) s.pending.pop_front();
      s.pending.push_back(Diagnostic{source, text});
      return;
    }
  }
  (*sink)(Diagnostic{source, text});
}

std::vector<Diagnostic> take_diagnostics() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  std::vector<Diagnostic> out(s.pending.begin(), s.pending.end());
  s.pending.clear();
  return out;
}

}  // namespace raggemm
