// raggemm.plan: resolves the three pass configs of one weight of an MoE block
// (include/raggemm/plan.h): explicit settings > tuned cache > heuristic, per
// field, with the source of each field. The Python layer turns the result
// into a raggemm.Plan for the numpy API and raggemm.jax.ragged_dot.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "python/bindings.h"
#include "python/call_resolution.h"
#include "python/ndarray_view.h"
#include "raggemm/error.h"
#include "raggemm/moe_plan.h"

namespace raggemm::python {
namespace {

nb::dict pass_dict(const ResolvedPassConfig& config) {
  nb::dict out = config_dict(config.tiles, config.kernel, config.input_buffer_count);
  nb::dict source;
  source["m"] = source_name(config.source.m);
  source["k"] = source_name(config.source.k);
  source["n"] = source_name(config.source.n);
  source["kernel"] = source_name(config.source.kernel);
  source["buffers"] = source_name(config.source.buffers);
  out["source"] = source;
  return out;
}

// cache_path: None with use_cache for the default cache file, a path for
// another one; use_cache false resolves without any cache.
nb::dict resolve_plan(const std::string& weight_name, int64_t batch_seq, int64_t embed_dim,
                      int64_t mlp_dim, int64_t groups, const std::vector<std::string>& settings,
                      const std::optional<InputArray>& group_sizes,
                      const std::optional<std::string>& cache_path, bool use_cache,
                      const std::string& dtype_name) {
  const Weight weight = parse_weight(weight_name, "weight");
  const DType dtype = parse_dtype(dtype_name, "dtype");
  require(batch_seq >= 0, "batch_seq", batch_seq, "must be >= 0");
  require(embed_dim > 0, "embed_dim", embed_dim, "must be > 0");
  require(mlp_dim > 0, "mlp_dim", mlp_dim, "must be > 0");
  require(groups > 0, "groups", groups, "must be > 0");
  const BlockPlan block = parse_plan_settings(settings);
  const std::vector<int32_t> sizes = group_size_values(group_sizes, groups);
  std::unique_ptr<TuneCache> own_cache;
  const TuneCache* cache = nullptr;
  if (use_cache) {
    if (cache_path) {
      own_cache = std::make_unique<TuneCache>(*cache_path);
      cache = own_cache.get();
    } else {
      cache = &TuneCache::shared_default();
    }
  }
  const ModelDims dims{batch_seq, embed_dim, mlp_dim};
  nb::dict out;
  for (Pass pass : kAllPasses) {
    out[pass_name(pass)] =
        pass_dict(resolve(block.weight(weight), weight, pass, dims, groups, sizes, cache, dtype));
  }
  return out;
}

// What one numpy/torch/JAX call with these operands and settings runs:
// the fields it leaves unset resolved as the call resolves them.
nb::dict resolve_call_config(const std::string& pass_text, const InputArray& a,
                             const std::string& a_dtype, const InputArray& b,
                             const std::string& b_dtype, const InputArray& group_sizes,
                             const std::string& sizes_dtype,
                             const std::optional<std::tuple<int64_t, int64_t, int64_t>>& tiles,
                             const std::string& kernel, int buffers, int threads) {
  const Pass pass = parse_pass(pass_text, "pass");
  CallSettings settings;
  if (tiles) settings.tiles = Tiles{std::get<0>(*tiles), std::get<1>(*tiles), std::get<2>(*tiles)};
  settings.kernel = kernel;
  settings.buffers = buffers;
  settings.threads = threads;
  return pass_dict(resolve_call(pass, view_of(a, parse_dtype(a_dtype, "a"), "a"),
                                view_of(b, parse_dtype(b_dtype, "b"), "b"),
                                view_of(group_sizes, parse_dtype(sizes_dtype, "group_sizes"),
                                        "group_sizes"),
                                settings));
}

}  // namespace

nb::dict config_dict(const Tiles& tiles, KernelVersion kernel, int buffers) {
  nb::dict out;
  out["tiles"] = nb::make_tuple(tiles.m, tiles.k, tiles.n);
  out["kernel"] = kernel_name(kernel);
  out["buffers"] = buffers;
  return out;
}

void bind_plan(nb::module_& module) {
  module.def("resolve_plan", &resolve_plan, nb::arg("weight"), nb::arg("batch_seq"),
             nb::arg("embed_dim"), nb::arg("mlp_dim"), nb::arg("groups"), nb::arg("settings"),
             nb::arg("group_sizes").none(), nb::arg("cache_path").none(), nb::arg("use_cache"),
             nb::arg("dtype"));
  module.def("plan_setting_keys", &plan_setting_keys);
  module.def("resolve_call", &resolve_call_config, nb::arg("pass"), nb::arg("a"),
             nb::arg("a_dtype"), nb::arg("b"), nb::arg("b_dtype"), nb::arg("group_sizes"),
             nb::arg("group_sizes_dtype"), nb::arg("tiles").none(), nb::arg("kernel"),
             nb::arg("buffers"), nb::arg("threads"));
}

}  // namespace raggemm::python
