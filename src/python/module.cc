// raggemm._raggemm: the compiled half of the Python package. The Python half
// (python/raggemm) maps numpy dtypes to raggemm's and presents the API.
#include <nanobind/nanobind.h>

#include "python/bindings.h"
#include "raggemm/error.h"

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
}
