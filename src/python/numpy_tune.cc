// raggemm.tune: the CLI's block tuner (`raggemm tune`, tune::tune_block) from
// Python, writing the same tune cache the CLI, the numpy, torch and JAX
// entries and raggemm.plan read.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <optional>
#include <string>
#include <vector>

#include "python/bindings.h"
#include "python/ndarray_view.h"
#include "raggemm/error.h"
#include "moe/tune_block.h"

namespace raggemm::python {
namespace {

nb::list tune(int64_t batch_seq, int64_t embed_dim, int64_t mlp_dim, int64_t groups,
              const std::optional<InputArray>& group_sizes, const std::string& dtype_name,
              double budget_s, const std::optional<std::string>& cache_path, int threads) {
  require(batch_seq > 0, "batch_seq", batch_seq, "must be > 0");
  require(embed_dim > 0, "embed_dim", embed_dim, "must be > 0");
  require(mlp_dim > 0, "mlp_dim", mlp_dim, "must be > 0");
  require(groups > 0, "groups", groups, "must be > 0");
  require(budget_s >= 0, "budget_s", budget_s, "must be >= 0");
  require(threads >= 0, "threads", threads, "must be >= 0 (0: OpenMP's default)");
  const DType dtype = parse_dtype(dtype_name, "dtype");
  require(dtype == DType::kF32 || dtype == DType::kBF16, "dtype", dtype_name,
          "expected f32 or bf16");
  const std::vector<int32_t> sizes = group_size_values(group_sizes, groups);
  int64_t total = 0;
  for (int32_t size : sizes) {
    require(size >= 0, "group_sizes", size, "sizes must be >= 0");
    total += size;
  }
  require(total <= batch_seq, "group_sizes", total, "sum must be <= batch_seq");
  TuneCache cache(cache_path ? *cache_path : TuneCache::default_path());
  tune::BlockTuneOptions options;
  options.budget_s = budget_s;
  options.threads = threads;
  const ModelDims dims{batch_seq, embed_dim, mlp_dim};
  tune::BlockTuneReport report;
  {
    nb::gil_scoped_release release;
    report = tune::tune_block(dims, groups, sizes, dtype, cache, options);
  }
  nb::list rows;
  for (const tune::BlockTuneRow& row : report.rows) {
    const TuneCandidate& winner = row.result.entry.winner;
    nb::dict out = config_dict(winner.tiles, winner.kernel, winner.input_buffer_count);
    out["weight"] = weight_name(row.weight);
    out["pass"] = pass_name(row.pass);
    out["M"] = row.shape.m;
    out["K"] = row.shape.k;
    out["N"] = row.shape.n;
    out["G"] = row.shape.groups;
    out["tuned_ms"] = row.result.winner_seconds * 1e3;
    out["heuristic_ms"] = row.result.entry.heuristic_seconds * 1e3;
    out["candidates"] = row.result.candidates_timed;
    out["budget_cut"] = row.result.budget_cut;
    out["cache"] = cache.path();
    rows.append(out);
  }
  return rows;
}

}  // namespace

void bind_tune(nb::module_& module) {
  module.def("tune", &tune, nb::arg("batch_seq"), nb::arg("embed_dim"), nb::arg("mlp_dim"),
             nb::arg("groups"), nb::arg("group_sizes").none(), nb::arg("dtype"),
             nb::arg("budget_s"), nb::arg("cache_path").none(), nb::arg("threads"));
  module.def("default_tune_cache_path", [] { return TuneCache::default_path(); });
}

}  // namespace raggemm::python
