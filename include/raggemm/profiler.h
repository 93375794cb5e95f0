// Per-op timing for the MoE layer and the trainer: every op runs inside a
// Profiler::Scope, which adds its time to a per-step total by kind (so the
// trainer can say what share of a step the GMMs took) and, when tracing, keeps
// a Chrome trace event (opens in Perfetto / chrome://tracing).
//
// The trace (Trace Event Format JSON): one process per rank (pid = rank,
// named "rank N"), one thread track per thread that recorded events (tid =
// 1, 2, ... in order of first event, named), complete ("X") events whose
// intervals nest per track (a step slice holds the layer slices, which hold
// the GMM events), each with the args its scope attached (GMM events: pass,
// weight, kernel, tiles and their sources, M, K, N, G, gflops_per_s).
// Each GMM event also gets one "worker" slice per OpenMP worker of the
// kernels' parallel loops that ran items (first item's start to last item's
// end, args worker, items and gmm = the event's name), on a thread track of
// that worker's own: tid = kWorkerTrackBase * T + W for worker W (0 is the
// calling thread's own share) of the calling thread's track T, named
// "thread T worker W", so concurrent callers' workers never share a track.
// Recording is thread-safe.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "raggemm/plan.h"

namespace raggemm {

namespace kernels {
class WorkerSpanRecorder;  // kernels/worker_spans.h: the loops' per-worker spans
}

// Worker tracks' tids: kWorkerTrackBase * calling track + worker number.
inline constexpr int kWorkerTrackBase = 1000;

enum class OpKind : uint8_t {
  kExpertGmm,  // grouped matmuls of the routed experts (gmm / tgmm)
  kDenseGmm,   // dense matmuls (router, shared experts, dense layers, output) run as G=1 gmm
  kGlue,       // everything elementwise: norms, routing, permute, activations, casts
  kOptimizer,
  kData,
  kSpan,       // an enclosing span (a layer, a pass): traced, never added to totals
  kAttention,  // everything inside attention: projections, RoPE, latent norms, the core
};
inline constexpr int kNumOpKinds = 7;
const char* op_kind_name(OpKind kind);

// One value of a trace event's "args".
using TraceArg = std::variant<int64_t, double, std::string>;
using TraceArgs = std::vector<std::pair<std::string, TraceArg>>;

class Profiler {
 public:
  explicit Profiler(bool record_trace = false);

  // The process this profiler's events belong to (the MPI rank; 0 alone).
  void set_rank(int rank) { rank_ = rank; }
  int rank() const { return rank_; }

  struct Totals {
    std::array<double, kNumOpKinds> seconds{};
    double expert_gmm_flops = 0;
    double dense_gmm_flops = 0;
    double seconds_of(OpKind kind) const { return seconds[static_cast<size_t>(kind)]; }
  };

  class Scope {
   public:
    Scope(Profiler* profiler, const char* name, OpKind kind, double flops);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

    // Attaches an arg to the event (kept only when tracing).
    Scope& arg(const char* key, TraceArg value);
    bool tracing() const { return profiler_ && profiler_->record_trace_; }

   private:
    Profiler* profiler_;
    const char* name_;
    OpKind kind_;
    double flops_;
    std::chrono::steady_clock::time_point start_;
    TraceArgs args_;
    std::unique_ptr<kernels::WorkerSpanRecorder> workers_;  // traced GMM scopes only
  };

  // Totals since the last call, then resets them.
  Totals take_totals();
  bool recording() const { return record_trace_; }
  size_t event_count() const { return events_.size(); }
  // A span recorded after the fact, from `start` to now (for callers that
  // cannot hold a Scope open, such as Python's `with raggemm.trace_span`).
  void record_span(std::string name, std::chrono::steady_clock::time_point start,
                   TraceArgs args);

  // Writes {"traceEvents": [...]} atomically.
  void write_trace(const std::string& path) const;
  // The trace as JSON text.
  std::string trace_json() const;

 private:
  friend class Scope;
  void record(std::string_view name, OpKind kind, double flops,
              std::chrono::steady_clock::time_point start,
              std::chrono::steady_clock::time_point end, TraceArgs args);
  int thread_index();  // under mutex_
  // One "worker" slice per worker that ran items during GMM event `name`.
  void record_workers(std::string_view name, const kernels::WorkerSpanRecorder& workers);

  struct Event {
    std::string name;
    OpKind kind;
    double flops;
    int64_t start_ns;
    int64_t duration_ns;
    int tid;
    TraceArgs args;
    const char* category = nullptr;  // overrides op_kind_name(kind) when set
  };
  bool record_trace_;
  int rank_ = 0;
  std::chrono::steady_clock::time_point origin_;
  mutable std::mutex mutex_;  // totals_, events_ and threads_ (threads may share a profiler)
  Totals totals_;
  std::vector<Event> events_;
  std::map<std::thread::id, int> threads_;
  std::set<int> worker_tracks_;  // tids of the worker tracks used
};

// A scope that does nothing when `profiler` is null. `name` must outlive the
// profiler (string literals).
inline Profiler::Scope profile(Profiler* profiler, const char* name, OpKind kind,
                               double flops = 0) {
  return Profiler::Scope(profiler, name, kind, flops);
}

// The args of a GMM event: pass, weight, kernel, tile_m/k/n with their
// sources (tile_m_source, ..., kernel_source), M, K, N, G. `config` null: the
// naive f64-accumulating loops ran (kernel "naive", no tiles). M, K, N are
// the weight's problem: x [M,K], w [G,K,N] (dlhs contracts N, drhs M).
void annotate_gmm(Profiler::Scope& scope, Pass pass, const std::string& weight,
                  const ResolvedPassConfig* config, int64_t m, int64_t k, int64_t n,
                  int64_t groups);

}  // namespace raggemm
