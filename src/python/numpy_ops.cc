// The numpy API's compiled entry points. The Python layer has already mapped
// each array's dtype to a raggemm dtype name and handed narrow floats over as
// raw bit views, and allocated the output; here the arrays become zero-copy
// TensorViews and the op runs with the GIL released.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <algorithm>
#include <optional>
#include <string>
#include <tuple>

#include "python/bindings.h"
#include "python/call_resolution.h"
#include "python/ndarray_view.h"
#include "python/python_trace.h"
#include "raggemm/error.h"
#include "raggemm/gmm.h"
#include "raggemm/quant.h"

namespace raggemm::python {
namespace {

using TileTuple = std::tuple<int64_t, int64_t, int64_t>;

// The quantized passes (raggemm/quant.h): recipe "fp8" or "int8", the
// weight's scaling ("channel" or "block:SIZE") and the lhs K-block (0: per row).
struct QuantArgs {
  std::optional<std::string> recipe;
  std::string rhs_scales;
  int64_t lhs_k_block;

  QuantGmmOptions options() const {
    QuantGmmOptions quant;
    quant.recipe = parse_quant_recipe(*recipe, "quant");
    quant.rhs_scaling = parse_rhs_scaling(rhs_scales, "rhs_scales");
    quant.lhs_k_block = lhs_k_block;
    return quant;
  }
  Quantization quantization() const {
    if (!recipe) return std::nullopt;
    return parse_quant_recipe(*recipe, "quant");
  }
};

Tiles tiles_of(const std::optional<TileTuple>& tiles) {
  if (!tiles) return {};
  const auto [m, k, n] = *tiles;
  return Tiles{m, k, n};
}

// Block-scaled weights need forward k-tiles that are whole blocks (as the
// CLI rounds them): a resolved k is rounded up to the block size.
void round_k_to_weight_blocks(const QuantGmmOptions& quant, bool transpose_rhs, int64_t k,
                              Tiles& tiles) {
  if (transpose_rhs || !quant.rhs_scaling.block()) return;
  const int64_t block = quant.rhs_scaling.block_size;
  tiles.k = std::min(k, (tiles.k + block - 1) / block * block);
}

std::optional<TensorView> optional_view(const std::optional<InputArray>& array,
                                        const char* argument) {
  if (!array) return std::nullopt;
  return view_of(*array, DType::kF32, argument);
}

// Runs a quantized op with the GIL released, then hands its result to numpy
// (which needs the GIL).
template <class Op>
nb::object quantized_to_numpy(Op&& op) {
  Tensor result = [&] {
    nb::gil_scoped_release release;
    return op();
  }();
  return nb::cast(to_numpy(std::move(result)));
}

// Without quant: writes `out` (allocated by the Python layer with np.empty,
// which costs a tenth of exporting a new array from here) and returns None.
// With quant: returns a new array holding the quantized op's result.
nb::object gmm(const InputArray& lhs, const std::string& lhs_dtype, const InputArray& rhs,
               const std::string& rhs_dtype, const InputArray& group_sizes,
               const std::string& sizes_dtype, const std::optional<OutputArray>& out,
               bool transpose_rhs, const std::optional<TileTuple>& tiles,
                                  const std::string& kernel, int buffers, int threads,
                                  int64_t group_offset, int64_t local_groups, bool swiglu,
                                  const std::optional<InputArray>& col_scale,
                                  const std::optional<InputArray>& col_bias,
                                  const std::optional<InputArray>& row_scale,
                                  const std::optional<std::string>& quant,
                                  const std::string& rhs_scales, int64_t lhs_k_block,
                                  const std::string& weight, const std::string& out_dtype,
                                  bool accumulate) {
  const TensorView lhs_view = view_of(lhs, parse_dtype(lhs_dtype, "lhs"), "lhs");
  const TensorView rhs_view = view_of(rhs, parse_dtype(rhs_dtype, "rhs"), "rhs");
  const TensorView sizes_view =
      view_of(group_sizes, parse_dtype(sizes_dtype, "group_sizes"), "group_sizes");
  GmmOptions options;
  options.transpose_rhs = transpose_rhs;
  CallSettings settings{tiles_of(tiles), kernel, buffers, threads,
                        QuantArgs{quant, rhs_scales, lhs_k_block}.quantization()};
  // The fused output stage is v2's: an unset kernel resolves to it.
  const bool fused = swiglu || col_scale || col_bias || row_scale;
  if (fused && settings.kernel == "auto") settings.kernel = kernel_name(KernelVersion::kV2);
  const Pass pass = transpose_rhs ? Pass::kGradLhs : Pass::kForward;
  const ResolvedPassConfig config =
      resolve_call(pass, lhs_view, rhs_view, sizes_view, settings, group_offset, local_groups);
  apply(config, threads, options);
  options.group_offset = group_offset;
  options.local_groups = local_groups;
  options.fuse_swiglu = swiglu;
  options.col_scale = optional_view(col_scale, "col_scale");
  options.col_bias = optional_view(col_bias, "col_bias");
  options.row_scale = optional_view(row_scale, "row_scale");
  options.out_dtype = parse_dtype(out_dtype, "out_dtype");
  options.accumulate = accumulate;

  if (quant) {  // one op: the recipe's quantized pass
    options.quantize = QuantArgs{quant, rhs_scales, lhs_k_block}.options();
    round_k_to_weight_blocks(*options.quantize, transpose_rhs, lhs_view.dim(1), options.tiles);
  }
  if (!out) {  // plain calls always bring one (python/raggemm/_ops.py)
    if (!quant) fail("out", "None", "an output array is required");
    return quantized_to_numpy([&] {
      Tensor result;
      traced_gmm(pass, weight, config, lhs_view, rhs_view, sizes_view, local_groups,
                 [&] { result = gmm(lhs_view, rhs_view, sizes_view, options); });
      return result;
    });
  }
  const TensorView out_view = view_of_output(*out, options.out_dtype, "out");
  {
    nb::gil_scoped_release release;
    traced_gmm(pass, weight, config, lhs_view, rhs_view, sizes_view, local_groups,
               [&] { gmm_into(lhs_view, rhs_view, sizes_view, out_view, options); });
  }
  return nb::none();
}

nb::object tgmm(const InputArray& lhs, const std::string& lhs_dtype, const InputArray& dout,
                const std::string& dout_dtype, const InputArray& group_sizes,
                const std::string& sizes_dtype, const std::optional<OutputArray>& out,
                const std::optional<TileTuple>& tiles, const std::string& kernel,
                                   int buffers, int threads, int64_t group_offset,
                                   int64_t local_groups, const std::optional<std::string>& quant,
                                   const std::string& rhs_scales, const std::string& weight,
                                   const std::string& out_dtype, bool accumulate) {
  const TensorView lhs_view = view_of(lhs, parse_dtype(lhs_dtype, "lhs"), "lhs");
  const TensorView dout_view = view_of(dout, parse_dtype(dout_dtype, "dout"), "dout");
  const TensorView sizes_view =
      view_of(group_sizes, parse_dtype(sizes_dtype, "group_sizes"), "group_sizes");
  TgmmOptions options;
  const CallSettings settings{tiles_of(tiles), kernel, buffers, threads,
                              QuantArgs{quant, rhs_scales, 0}.quantization()};
  const ResolvedPassConfig config = resolve_call(Pass::kGradRhs, lhs_view, dout_view, sizes_view,
                                                 settings, group_offset, local_groups);
  apply(config, threads, options);
  options.group_offset = group_offset;
  options.local_groups = local_groups;
  options.out_dtype = parse_dtype(out_dtype, "out_dtype");
  options.accumulate = accumulate;

  if (quant) options.quantize = QuantArgs{quant, rhs_scales, 0}.options();  // one op
  if (!out) {  // plain calls always bring one (python/raggemm/_ops.py)
    if (!quant) fail("out", "None", "an output array is required");
    return quantized_to_numpy([&] {
      Tensor result;
      traced_gmm(Pass::kGradRhs, weight, config, lhs_view, dout_view, sizes_view, local_groups,
                 [&] { result = tgmm(lhs_view, dout_view, sizes_view, options); });
      return result;
    });
  }
  const TensorView out_view = view_of_output(*out, options.out_dtype, "out");
  {
    nb::gil_scoped_release release;
    traced_gmm(Pass::kGradRhs, weight, config, lhs_view, dout_view, sizes_view, local_groups,
               [&] { tgmm_into(lhs_view, dout_view, sizes_view, out_view, options); });
  }
  return nb::none();
}

}  // namespace

void bind_numpy_ops(nb::module_& module) {
  module.def("gmm", &gmm, nb::arg("lhs"), nb::arg("lhs_dtype"), nb::arg("rhs"),
             nb::arg("rhs_dtype"), nb::arg("group_sizes"), nb::arg("group_sizes_dtype"),
             nb::arg("out").none(), nb::arg("transpose_rhs"), nb::arg("tiles").none(), nb::arg("kernel"),
             nb::arg("buffers"), nb::arg("threads"), nb::arg("group_offset"), nb::arg("local_groups"),
             nb::arg("swiglu"),
             nb::arg("col_scale").none(), nb::arg("col_bias").none(),
             nb::arg("row_scale").none(), nb::arg("quant").none(), nb::arg("rhs_scales"),
             nb::arg("lhs_k_block"), nb::arg("weight"), nb::arg("out_dtype") = "f32",
             nb::arg("accumulate") = false);
  module.def("tgmm", &tgmm, nb::arg("lhs"), nb::arg("lhs_dtype"), nb::arg("dout"),
             nb::arg("dout_dtype"), nb::arg("group_sizes"), nb::arg("group_sizes_dtype"),
             nb::arg("out").none(), nb::arg("tiles").none(), nb::arg("kernel"), nb::arg("buffers"), nb::arg("threads"),
             nb::arg("group_offset"), nb::arg("local_groups"), nb::arg("quant").none(),
             nb::arg("rhs_scales"), nb::arg("weight"), nb::arg("out_dtype") = "f32",
             nb::arg("accumulate") = false);
}

}  // namespace raggemm::python
