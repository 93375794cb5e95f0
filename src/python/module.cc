// raggemm._raggemm: the compiled half of the Python package. The Python half
// (python/raggemm) maps numpy dtypes to raggemm's and presents the API.
#include <nanobind/nanobind.h>

#include <string>

#include "python/bindings.h"
#include "raggemm/diagnostics.h"
#include "raggemm/error.h"

namespace {

// The library's warnings (raggemm/diagnostics.h: a skipped tune-cache entry,
// temp files of killed writers removed) become Python warnings
// (UserWarning, "<source>: <text>"), so the user's warning filters decide.
// A report may come from a thread that holds no GIL: it takes it. Should a
// filter turn the warning into an error, there is no Python frame to raise
// it in; it is printed as unraisable rather than lost or leaked into the
// next call.
void forward_to_warnings(const raggemm::Diagnostic& diagnostic) {
  if (!Py_IsInitialized()) return;
  nanobind::gil_scoped_acquire gil;
  const std::string text = diagnostic.source + ": " + diagnostic.text;
  if (PyErr_WarnEx(PyExc_UserWarning, text.c_str(), 1) != 0) PyErr_WriteUnraisable(nullptr);
}

}  // namespace

NB_MODULE(_raggemm, module) {
  module.doc() = "raggemm grouped matmul kernels (internal; use the raggemm package)";
  // raggemm.Error is a ValueError: bad input from Python is a value error,
  // and the message names the argument and the offending value.
  nanobind::exception<raggemm::Error>(module, "Error", PyExc_ValueError);
  raggemm::python::bind_numpy_ops(module);
  raggemm::python::bind_quantization(module);
  raggemm::python::bind_plan(module);
  raggemm::python::bind_tune(module);
  raggemm::python::bind_trace(module);
  raggemm::python::bind_xla_ffi(module);
  raggemm::set_diagnostic_sink(forward_to_warnings);
  // No warnings into a finalizing interpreter: the sink goes when Python does.
  nanobind::module_::import_("atexit").attr("register")(
      nanobind::cpp_function([] { raggemm::set_diagnostic_sink({}); }));
}
