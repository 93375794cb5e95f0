// Per-op timing for the MoE layer and the trainer: every op runs inside a
// Profiler::Scope, which adds its time to a per-step total by kind (so the
// trainer can say what share of a step the GMMs took) and, when tracing, keeps
// a Chrome trace event (opens in Perfetto / chrome://tracing).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace raggemm {

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

class Profiler {
 public:
  explicit Profiler(bool record_trace = false);

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

   private:
    Profiler* profiler_;
    const char* name_;
    OpKind kind_;
    double flops_;
    std::chrono::steady_clock::time_point start_;
  };

  // Totals since the last call, then resets them.
  Totals take_totals();
  bool recording() const { return record_trace_; }
  size_t event_count() const { return events_.size(); }
  // Writes {"traceEvents": [...]} atomically.
  void write_trace(const std::string& path) const;

 private:
  friend class Scope;
  void record(const char* name, OpKind kind, double flops,
              std::chrono::steady_clock::time_point start,
              std::chrono::steady_clock::time_point end);

  struct Event {
    const char* name;
    OpKind kind;
    double flops;
    int64_t start_ns;
    int64_t duration_ns;
  };
  bool record_trace_;
  std::chrono::steady_clock::time_point origin_;
  Totals totals_;
  std::vector<Event> events_;
};

// A scope that does nothing when `profiler` is null. `name` must outlive the
// profiler (string literals).
inline Profiler::Scope profile(Profiler* profiler, const char* name, OpKind kind,
                               double flops = 0) {
  return Profiler::Scope(profiler, name, kind, flops);
}

}  // namespace raggemm
