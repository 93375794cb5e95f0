#include "ops/run_spec.h"

#include <algorithm>
#include <string>

#include "backends/registry.h"
#include "kernels/machine_model.h"
#include "raggemm/error.h"

namespace raggemm::ops {
namespace {

// The setting behind a block constraint, for the error of a tile k that
// cannot work: "rhs_scales=block:128", "lhs_k_block=512" or both.
std::string block_setting(const backends::GmmSpec& spec) {
  std::string setting;
  if (spec.rhs.quant && spec.rhs.quant->granularity.block_axis == 1) {
    setting = "rhs_scales=block:" + std::to_string(spec.rhs.quant->granularity.block_size);
  }
  if (spec.lhs.quant && spec.lhs.quant->granularity.block_axis == 1) {
    setting += (setting.empty() ? "" : " and ") +
               ("lhs_k_block=" + std::to_string(spec.lhs.quant->granularity.block_size));
  }
  return setting.empty() ? "block-wise scales" : setting;
}

}  // namespace

const backends::Backend& backend_for(const backends::GmmSpec& spec, const CallSettings& settings) {
  return backends::select_backend(spec, settings.backend);
}

TuneCandidate resolve_config(const backends::Backend& backend, const backends::GmmSpec& spec,
                             const CallSettings& settings) {
  TuneCandidate config{settings.tiles, settings.kernel, settings.input_buffer_count};
  const Tiles& requested = settings.tiles;
  // Kernel terms: gmm tiles (rows, contracted, output columns); tgmm tiles
  // (K, tokens, N).
  const bool tgmm = spec.pass == Pass::kGradRhs;
  const int64_t dim_m = tgmm ? spec.k : spec.m;
  const int64_t dim_k = tgmm ? spec.m : spec.k;
  const int64_t dim_n = tgmm ? spec.n : spec.out_cols;
  if (requested.m <= 0 || requested.k <= 0 || requested.n <= 0) {
    const int threads = std::max(1, backends::resolved_threads(spec));
    const Tiles picked =
        backend.heuristic(spec.shape(), kernels::this_machine_model(threads), settings.kernel).tiles;
    Tiles& t = config.tiles;
    if (t.m == 0) t.m = picked.m;
    if (t.k == 0) t.k = picked.k;
    if (t.n == 0) t.n = picked.n;
    // Never larger than the dims (at least 1): no workspace for nothing.
    t.m = std::max<int64_t>(1, std::min(t.m, std::max<int64_t>(dim_m, 1)));
    t.k = std::max<int64_t>(1, std::min(t.k, std::max<int64_t>(dim_k, 1)));
    t.n = std::max<int64_t>(1, std::min(t.n, std::max<int64_t>(dim_n, 1)));
  }
  const int64_t block = spec.contracted_block;
  Tiles& t = config.tiles;
  if (block > 0 && t.k < spec.k && t.k % block != 0) {
    if (requested.k != 0) {
      fail("tiles",
           std::to_string(requested.m) + "," + std::to_string(requested.k) + "," +
               std::to_string(requested.n),
           block_setting(spec) + " needs a tile k that is a multiple of " + std::to_string(block) +
               " (tile k = " + std::to_string(requested.k) + ")");
    }
    t.k = std::min(spec.k, (t.k + block - 1) / block * block);
  }
  return config;
}

void run(const backends::GmmSpec& spec, const CallSettings& settings) {
  validate_out(spec, settings);
  const backends::Backend& backend = backend_for(spec, settings);
  // Without a lent workspace the CPU kernels keep each thread's buffers for
  // the next call, which is what a training loop wants.
  backend.run(spec, resolve_config(backend, spec, settings), settings.workspace);
}

}  // namespace raggemm::ops
