// Turning numpy arrays (as nanobind ndarrays) into raggemm TensorViews without
// copying, and raggemm Tensors into numpy arrays. Every
// check names the Python argument, so a wrong dtype, shape or layout becomes
// a ValueError the caller can act on.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "raggemm/tensor.h"

namespace raggemm::python {

namespace nb = nanobind;

// Any CPU array; layout and dtype are checked by `view_of`, not by nanobind,
// so that a mismatch is a ValueError naming the argument, not a TypeError
// about overloads (and never a silent copy).
using InputArray = nb::ndarray<nb::ro, nb::device::cpu>;

// A zero-copy view of `array` holding elements of `dtype`. Narrow float types
// arrive as their raw bit pattern (bf16/f16 as uint16, fp8 as uint8, which
// is how raggemm's Python layer passes ml_dtypes arrays); the array must be
// C-contiguous.
TensorView view_of(const InputArray& array, DType dtype, const char* argument);

// The values of an optional int32 [groups] array (empty when absent): the
// group sizes raggemm.plan and raggemm.tune reason about.
std::vector<int32_t> group_size_values(const std::optional<InputArray>& array, int64_t groups);

// A writable CPU array the ops write into.
using OutputArray = nb::ndarray<nb::device::cpu>;

// A view of `array` as `dtype` (f32, or bf16 held as uint16 bits), which it
// must hold, C-contiguous; the op checks its shape.
TensorView view_of_output(const OutputArray& array, DType dtype, const char* argument);

// A numpy array sharing `tensor`'s storage (no copy). fp8 codes come out as
// uint8 (their raw bits; the Python layer views them as ml_dtypes floats).
nb::ndarray<nb::numpy> to_numpy(Tensor tensor);

}  // namespace raggemm::python
