// Op timing and Chrome trace events (see raggemm/profiler.h).
#include "raggemm/profiler.h"

#include <nlohmann/json.hpp>

#include "kernels/worker_spans.h"
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
  if (!profiler_) return;
  if (tracing() && (kind == OpKind::kExpertGmm || kind == OpKind::kDenseGmm)) {
    workers_ = std::make_unique<kernels::WorkerSpanRecorder>();
  }
  start_ = std::chrono::steady_clock::now();
}

Profiler::Scope::~Scope() {
  if (profiler_) {
    const auto end = std::chrono::steady_clock::now();
    if (workers_) profiler_->record_workers(name_, *workers_);
    profiler_->record(name_, kind_, flops_, start_, end, std::move(args_));
  }
}

Profiler::Scope& Profiler::Scope::arg(const char* key, TraceArg value) {
  if (tracing()) args_.emplace_back(key, std::move(value));
  return *this;
}

int Profiler::thread_index() {
  // Tracks are numbered from 1 in the order threads first record.
  const auto [it, added] =
      threads_.emplace(std::this_thread::get_id(), static_cast<int>(threads_.size()) + 1);
  return it->second;
}

void Profiler::record(std::string_view name, OpKind kind, double flops,
                      std::chrono::steady_clock::time_point start,
                      std::chrono::steady_clock::time_point end, TraceArgs args) {
  const double seconds = std::chrono::duration<double>(end - start).count();
  const std::lock_guard<std::mutex> lock(mutex_);
  if (kind != OpKind::kSpan) totals_.seconds[static_cast<size_t>(kind)] += seconds;
  if (kind == OpKind::kExpertGmm) totals_.expert_gmm_flops += flops;
  if (kind == OpKind::kDenseGmm) totals_.dense_gmm_flops += flops;
  if (record_trace_) {
    events_.push_back(
        Event{std::string(name), kind, flops,
              std::chrono::duration_cast<std::chrono::nanoseconds>(start - origin_).count(),
              std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count(),
              thread_index(), std::move(args)});
  }
}

void Profiler::record_workers(std::string_view name, const kernels::WorkerSpanRecorder& workers) {
  const std::vector<kernels::WorkerSpan>& spans = workers.spans();
  const int64_t origin_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                origin_.time_since_epoch())
                                .count();
  const std::lock_guard<std::mutex> lock(mutex_);
  const int caller = thread_index();
  for (size_t w = 0; w < spans.size() && w < static_cast<size_t>(kWorkerTrackBase); ++w) {
    if (spans[w].items == 0) continue;
    const int tid = kWorkerTrackBase * caller + static_cast<int>(w);
    worker_tracks_.insert(tid);
    events_.push_back(Event{"worker",
                            OpKind::kSpan,
                            0,
                            spans[w].begin_ns - origin_ns,
                            spans[w].end_ns - spans[w].begin_ns,
                            tid,
                            {{"worker", static_cast<int64_t>(w)},
                             {"items", spans[w].items},
                             {"gmm", std::string(name)}},
                            "worker"});
  }
}

void Profiler::record_span(std::string name, std::chrono::steady_clock::time_point start,
                           TraceArgs args) {
  record(name, OpKind::kSpan, 0, start, std::chrono::steady_clock::now(), std::move(args));
}

Profiler::Totals Profiler::take_totals() {
  const std::lock_guard<std::mutex> lock(mutex_);
  Totals out = totals_;
  totals_ = Totals{};
  return out;
}

namespace {

nlohmann::json metadata(const char* what, int pid, int tid, const std::string& name) {
  return {{"name", what}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}};
}

}  // namespace

std::string Profiler::trace_json() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  nlohmann::json events = nlohmann::json::array();
  events.push_back(metadata("process_name", rank_, 0, "rank " + std::to_string(rank_)));
  for (const auto& [id, tid] : threads_) {
    events.push_back(metadata("thread_name", rank_, tid, "thread " + std::to_string(tid)));
  }
  for (int tid : worker_tracks_) {
    events.push_back(
        metadata("thread_name", rank_, tid,
                 "thread " + std::to_string(tid / kWorkerTrackBase) + " worker " +
                     std::to_string(tid % kWorkerTrackBase)));
  }
  for (const Event& event : events_) {
    nlohmann::json entry = {
        {"name", event.name},
        {"cat", event.category ? event.category : op_kind_name(event.kind)},
        {"ph", "X"},
        {"ts", static_cast<double>(event.start_ns) / 1e3},
        {"dur", static_cast<double>(event.duration_ns) / 1e3},
        {"pid", rank_},
        {"tid", event.tid},
    };
    nlohmann::json args = nlohmann::json::object();
    for (const auto& [key, value] : event.args) {
      std::visit([&args, &key](const auto& v) { args[key] = v; }, value);
    }
    if (event.flops > 0) {
      args["flops"] = event.flops;
      args["gflops_per_s"] = event.duration_ns > 0 ? event.flops / event.duration_ns : 0.0;
    }
    if (!args.empty()) entry["args"] = std::move(args);
    events.push_back(std::move(entry));
  }
  const nlohmann::json trace = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  return trace.dump();
}

void annotate_gmm(Profiler::Scope& scope, Pass pass, const std::string& weight,
                  const ResolvedPassConfig* config, int64_t m, int64_t k, int64_t n,
                  int64_t groups) {
  if (!scope.tracing()) return;
  scope.arg("pass", pass_name(pass)).arg("weight", weight);
  scope.arg("kernel", config ? kernel_name(config->kernel) : "naive");
  if (config) {
    scope.arg("tile_m", config->tiles.m).arg("tile_k", config->tiles.k);
    scope.arg("tile_n", config->tiles.n);
    scope.arg("tile_m_source", source_name(config->source.m))
        .arg("tile_k_source", source_name(config->source.k))
        .arg("tile_n_source", source_name(config->source.n))
        .arg("kernel_source", source_name(config->source.kernel));
  }
  scope.arg("M", m).arg("K", k).arg("N", n).arg("G", groups);
}

void Profiler::write_trace(const std::string& path) const {
  const std::string text = trace_json();
  write_file_atomic(path, text.data(), text.size());
}

}  // namespace raggemm
