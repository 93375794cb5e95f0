// The parts of the raggemm._raggemm extension module, each bound by one
// function so module.cc only lists them.
#pragma once

#include <nanobind/nanobind.h>

#include "raggemm/gmm.h"

namespace raggemm::python {

// gmm and tgmm on numpy arrays.
void bind_numpy_ops(nanobind::module_& module);

// quantize / dequantize (include/raggemm/quant.h).
void bind_quantization(nanobind::module_& module);

// resolve_plan: the resolved per-pass configs of one weight (raggemm/plan.h).
void bind_plan(nanobind::module_& module);

// {"tiles": (m, k, n), "kernel": "v1"|"v2", "buffers": n}: a config as the
// Python layer builds a raggemm.PassConfig from it (numpy_plan.cc).
nanobind::dict config_dict(const Tiles& tiles, KernelVersion kernel, int buffers);

// tune: the CLI's block tuner into the tune cache (moe/tune_block.h).
void bind_tune(nanobind::module_& module);

// raggemm.trace: trace_start / trace_stop / trace_span (python/python_trace.h).
void bind_trace(nanobind::module_& module);

// `xla_ffi_targets()`: {target name: PyCapsule of the XLA FFI handler} for
// jax.ffi.register_ffi_target; empty when built without the XLA headers.
void bind_xla_ffi(nanobind::module_& module);

}  // namespace raggemm::python
