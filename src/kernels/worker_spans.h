// Per-worker time spans of the kernels' parallel loops, for the trace's
// worker tracks (raggemm/profiler.h). A recorder installed on the calling
// thread (by a traced GMM scope) is handed to every OpenMP worker of the
// parallel loops the call runs; each worker widens only its own slot to
// cover the items it ran, so recording takes no lock. Without a recorder the
// loops pay one null test.
#pragma once

#include <cstdint>
#include <vector>

namespace raggemm::kernels {

struct WorkerSpan {
  int64_t begin_ns = 0, end_ns = 0;  // steady_clock, since its epoch
  int64_t items = 0;                 // 0: this worker ran nothing
};

class WorkerSpanRecorder {
 public:
  // Installs itself on the calling thread (restoring the previous one when
  // destroyed), so nested recorders belong to the innermost scope.
  WorkerSpanRecorder();
  ~WorkerSpanRecorder();
  WorkerSpanRecorder(const WorkerSpanRecorder&) = delete;
  WorkerSpanRecorder& operator=(const WorkerSpanRecorder&) = delete;

  // The recorder installed on this thread, or null.
  static WorkerSpanRecorder* active();

  // Called by the calling thread before a parallel region of `workers`.
  void prepare(int workers);
  // Called by worker `worker` (< workers of the last prepare) for one item.
  void note(int worker, int64_t begin_ns, int64_t end_ns);

  // Slot w: worker w (omp_get_thread_num()) over all the loops recorded.
  const std::vector<WorkerSpan>& spans() const { return spans_; }

 private:
  std::vector<WorkerSpan> spans_;
  WorkerSpanRecorder* previous_;
};

int64_t steady_now_ns();

}  // namespace raggemm::kernels
