#include "kernels/worker_spans.h"

#include <algorithm>
#include <chrono>

namespace raggemm::kernels {
namespace {
thread_local WorkerSpanRecorder* installed = nullptr;
}  // namespace

WorkerSpanRecorder::WorkerSpanRecorder() : previous_(installed) { installed = this; }

WorkerSpanRecorder::~WorkerSpanRecorder() { installed = previous_; }

WorkerSpanRecorder* WorkerSpanRecorder::active() { return installed; }

void WorkerSpanRecorder::prepare(int workers) {
  if (static_cast<int>(spans_.size()) < workers) spans_.resize(static_cast<size_t>(workers));
}

void WorkerSpanRecorder::note(int worker, int64_t begin_ns, int64_t end_ns) {
  WorkerSpan& span = spans_[static_cast<size_t>(worker)];
  span.begin_ns = span.items == 0 ? begin_ns : std::min(span.begin_ns, begin_ns);
  span.end_ns = std::max(span.end_ns, end_ns);
  ++span.items;
}

int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace raggemm::kernels
