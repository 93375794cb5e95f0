#include "python/python_trace.h"

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <algorithm>
#include <chrono>
#include <mutex>

#include "python/bindings.h"
#include "raggemm/error.h"

namespace raggemm::python {
namespace {

namespace nb = nanobind;

std::mutex trace_mutex;
std::shared_ptr<Profiler> open_trace;  // guarded by trace_mutex

void trace_start(int rank) {
  require(rank >= 0, "rank", rank, "must be >= 0");
  const std::lock_guard<std::mutex> lock(trace_mutex);
  require(!open_trace, "raggemm.trace", "open", "a trace is already open in this process");
  open_trace = std::make_shared<Profiler>(/*record_trace=*/true);
  open_trace->set_rank(rank);
}

// Closes the trace and writes it (atomically) to `path`; returns the events.
size_t trace_stop(const std::string& path) {
  std::shared_ptr<Profiler> trace;
  {
    const std::lock_guard<std::mutex> lock(trace_mutex);
    trace = std::move(open_trace);
  }
  require(trace != nullptr, "raggemm.trace", "closed", "no trace is open");
  nb::gil_scoped_release release;
  trace->write_trace(path);
  return trace->event_count();
}

int64_t clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A span of Python code, from start_ns (trace_clock_ns()) to now; args: a dict
// of str -> int, float or str. Nothing happens when no trace is open.
void trace_span(const std::string& name, int64_t start_ns, const nb::dict& args) {
  const std::shared_ptr<Profiler> trace = active_trace();
  if (!trace) return;
  TraceArgs converted;
  for (auto [key, value] : args) {
    const std::string k = nb::cast<std::string>(nb::str(key));
    if (nb::isinstance<nb::bool_>(value)) {
      converted.emplace_back(k, std::string(nb::cast<bool>(value) ? "true" : "false"));
    } else if (nb::isinstance<nb::int_>(value)) {
      converted.emplace_back(k, nb::cast<int64_t>(value));
    } else if (nb::isinstance<nb::float_>(value)) {
      converted.emplace_back(k, nb::cast<double>(value));
    } else {
      converted.emplace_back(k, nb::cast<std::string>(nb::str(value)));
    }
  }
  const std::chrono::steady_clock::time_point start{std::chrono::nanoseconds(start_ns)};
  trace->record_span(name, start, std::move(converted));
}

}  // namespace

std::shared_ptr<Profiler> active_trace() {
  const std::lock_guard<std::mutex> lock(trace_mutex);
  return open_trace;
}

GmmEventDims gmm_event_dims(Pass pass, const TensorView& a, const TensorView& b,
                            const TensorView& group_sizes, int64_t local_groups) {
  GmmEventDims dims;
  if (a.rank() != 2 || group_sizes.rank() != 1) return dims;
  // The weight's problem: x [M,K], w [G,K,N].
  dims.m = a.dim(0);
  if (pass == Pass::kGradRhs && b.rank() == 2) {
    dims.k = a.dim(1), dims.n = b.dim(1);
  } else if (b.rank() == 3) {
    dims.k = b.dim(1), dims.n = b.dim(2);
  }
  dims.groups = local_groups >= 0 ? local_groups : group_sizes.dim(0);
  int64_t rows = 0;
  for (int64_t g = 0; g < group_sizes.dim(0); ++g) {
    rows += group_sizes.dtype == DType::kI64 ? static_cast<const int64_t*>(group_sizes.data)[g]
                                             : static_cast<const int32_t*>(group_sizes.data)[g];
  }
  dims.flops = 2.0 * static_cast<double>(std::clamp<int64_t>(rows, 0, dims.m)) *
               static_cast<double>(dims.k) * static_cast<double>(dims.n);
  return dims;
}

void bind_trace(nb::module_& module) {
  module.def("trace_start", &trace_start, nb::arg("rank"));
  module.def("trace_stop", &trace_stop, nb::arg("path"));
  module.def("trace_clock_ns", &clock_ns);
  module.def("trace_span", &trace_span, nb::arg("name"), nb::arg("start_ns"), nb::arg("args"));
  module.def("trace_is_open", [] { return active_trace() != nullptr; });
}

}  // namespace raggemm::python
