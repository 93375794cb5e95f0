// Op timing and Chrome trace events (see raggemm/profiler.h).
#include "raggemm/profiler.h"

#include <nlohmann/json.hpp>

#include "raggemm/npy.h"

namespace raggemm {

const char* op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::kExpertGmm:
      return "expert_gmm";
    case OpKind::kDenseGmm:
      return "dense_gmm";
    case OpKind::kGlue:
      return "glue";
    case OpKind::kOptimizer:
      return "optimizer";
    case OpKind::kData:
      return "data";
    case OpKind::kSpan:
      return "span";
    case OpKind::kAttention:
      return "attention";
  }
  return "?";
}

Profiler::Profiler(bool record_trace)
    : record_trace_(record_trace), origin_(std::chrono::steady_clock::now()) {}

Profiler::Scope::Scope(Profiler* profiler, const char* name, OpKind kind, double flops)
    : profiler_(profiler), name_(name), kind_(kind), flops_(flops) {
  if (profiler_) start_ = std::chrono::steady_clock::now();
}

Profiler::Scope::~Scope() {
  if (profiler_) profiler_->record(name_, kind_, flops_, start_, std::chrono::steady_clock::now());
}

void Profiler::record(const char* name, OpKind kind, double flops,
                      std::chrono::steady_clock::time_point start,
                      std::chrono::steady_clock::time_point end) {
  const double seconds = std::chrono::duration<double>(end - start).count();
  if (kind != OpKind::kSpan) totals_.seconds[static_cast<size_t>(kind)] += seconds;
  if (kind == OpKind::kExpertGmm) totals_.expert_gmm_flops += flops;
  if (kind == OpKind::kDenseGmm) totals_.dense_gmm_flops += flops;
  if (record_trace_) {
    events_.push_back(
        Event{name, kind, flops,
              std::chrono::duration_cast<std::chrono::nanoseconds>(start - origin_).count(),
              std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count()});
  }
}

Profiler::Totals Profiler::take_totals() {
  Totals out = totals_;
  totals_ = Totals{};
  return out;
}

void Profiler::write_trace(const std::string& path) const {
  nlohmann::json events = nlohmann::json::array();
  for (const Event& event : events_) {
    nlohmann::json entry = {
        {"name", event.name},
        {"cat", op_kind_name(event.kind)},
        {"ph", "X"},
        {"ts", static_cast<double>(event.start_ns) / 1e3},
        {"dur", static_cast<double>(event.duration_ns) / 1e3},
        {"pid", 1},
        {"tid", 1},
    };
    if (event.flops > 0) {
      entry["args"] = {
          {"flops", event.flops},
          {"gflops_per_s", event.duration_ns > 0 ? event.flops / event.duration_ns : 0.0}};
    }
    events.push_back(std::move(entry));
  }
  const nlohmann::json trace = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  const std::string text = trace.dump();
  write_file_atomic(path, text.data(), text.size());
}

}  // namespace raggemm
