// Quantization helpers of the numpy API: quantize (values + scales) and
// dequantize, bound to include/raggemm/quant.h. Results share the storage of
// the Tensors the ops return (no copy).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>

#include <optional>
#include <string>
#include <utility>

#include "python/bindings.h"
#include "python/ndarray_view.h"
#include "raggemm/error.h"
#include "raggemm/quant.h"

namespace raggemm::python {
namespace {

std::pair<nb::ndarray<nb::numpy>, nb::ndarray<nb::numpy>> quantize_array(
    const InputArray& input, const std::string& input_dtype, const std::string& type,
    const std::string& granularity, std::optional<float> static_range) {
  const TensorView view = view_of(input, parse_dtype(input_dtype, "x"), "x");
  const QuantType quant_type = parse_quant_type(type, "type");
  const Granularity spec = parse_granularity(granularity, "granularity");
  QuantizedTensor quantized = [&] {
    nb::gil_scoped_release release;
    return quantize(view, quant_type, spec, static_range);
  }();
  return {to_numpy(std::move(quantized.values)), to_numpy(std::move(quantized.scales))};
}

nb::ndarray<nb::numpy> dequantize_array(const InputArray& values, const std::string& values_dtype,
                                        const InputArray& scales, const std::string& type,
                                        const std::optional<std::string>& granularity) {
  const TensorView values_view = view_of(values, parse_dtype(values_dtype, "values"), "values");
  const TensorView scales_view = view_of(scales, DType::kF32, "scales");
  const QuantType quant_type = parse_quant_type(type, "type");
  const Granularity spec =
      granularity ? parse_granularity(*granularity, "granularity")
                  : infer_granularity(values_view.shape, scales_view.shape, "scales");
  Tensor out = [&] {
    nb::gil_scoped_release release;
    return dequantize(values_view, scales_view, quant_type, spec);
  }();
  return to_numpy(std::move(out));
}

}  // namespace

void bind_quantization(nb::module_& module) {
  module.def("quantize", &quantize_array, nb::arg("x"), nb::arg("x_dtype"), nb::arg("type"),
             nb::arg("granularity"), nb::arg("static_range").none());
  module.def("dequantize", &dequantize_array, nb::arg("values"), nb::arg("values_dtype"),
             nb::arg("scales"), nb::arg("type"), nb::arg("granularity").none());
  module.def("parse_granularity", [](const std::string& spec) {
    return parse_granularity(spec, "granularity").to_string();
  });
}

}  // namespace raggemm::python
