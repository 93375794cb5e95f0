// Tile plans of the grouped matmuls of one MoE block (DESIGN.md s.2): the
// model terms over the op terms of raggemm/plan.h.
//
// An MoE block has two weights, wi ([E, embed, mlp]) and wo ([E, mlp, embed]),
// and each weight three passes (fwd, dlhs, drhs). Users set tiles in model
// dimensions (batch_seq, embed_dim, mlp_dim); kernel_axes() is the one table
// that maps them to kernel tiles (m, k, n). Every field of a pass config is
// resolved on its own: an explicit setting beats a tuned-cache entry, which
// beats the heuristic, and the source of each field is kept.
//
// Typical use (the MoE layer, a trainer, a CLI):
//   BlockPlan plans = parse_plan_settings({"wi_tile_fwd_batch_seq=256", "use_gmm_v2=true"});
//   ResolvedPassConfig fwd = resolve(plans.wi, Weight::kWi, Pass::kForward, shape,
//                                    &TuneCache::shared_default());
//   GmmOptions options = gmm_options(fwd);
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "raggemm/dtype.h"
#include "raggemm/gmm.h"
#include "raggemm/plan.h"
#include "raggemm/quant_types.h"

namespace raggemm {

// ---------------------------------------------------------------------------
// Names.

enum class Weight : uint8_t { kWi, kWo };
enum class ModelDim : uint8_t { kBatchSeq, kEmbedDim, kMlpDim };

inline constexpr std::array<Weight, 2> kAllWeights = {Weight::kWi, Weight::kWo};
inline constexpr std::array<ModelDim, 3> kAllModelDims = {ModelDim::kBatchSeq, ModelDim::kEmbedDim,
                                                          ModelDim::kMlpDim};

const char* weight_name(Weight weight);        // "wi", "wo"
const char* model_dim_name(ModelDim dim);      // "batch_seq", "embed_dim", "mlp_dim"
Weight parse_weight(const std::string& name, const std::string& argument);

// ---------------------------------------------------------------------------
// Model dimensions and the mapping to kernel tiles.

struct ModelDims {
  int64_t batch_seq = 0;  // tokens (rows of the activations)
  int64_t embed_dim = 0;
  int64_t mlp_dim = 0;
  int64_t at(ModelDim dim) const;
};

// Tiles in model-dimension names; an unset field is left to cache or heuristic.
struct ModelTiles {
  std::optional<int64_t> batch_seq;
  std::optional<int64_t> embed_dim;
  std::optional<int64_t> mlp_dim;
  std::optional<int64_t>& at(ModelDim dim);
  const std::optional<int64_t>& at(ModelDim dim) const;
  bool operator==(const ModelTiles&) const = default;
};

// Which model dimension each kernel axis runs over, for one (weight, pass).
struct KernelAxes {
  ModelDim m;
  ModelDim k;  // the contracted dimension
  ModelDim n;
  bool operator==(const KernelAxes&) const = default;
};

// THE table of DESIGN.md s.2, in one place:
//   wi fwd  (batch_seq, embed_dim, mlp_dim)   wo fwd  (batch_seq, mlp_dim, embed_dim)
//   wi dlhs (batch_seq, mlp_dim, embed_dim)   wo dlhs (batch_seq, embed_dim, mlp_dim)
//   wi drhs (embed_dim, batch_seq, mlp_dim)   wo drhs (mlp_dim, batch_seq, embed_dim)
KernelAxes kernel_axes(Weight weight, Pass pass);

// Model-dim tiles -> kernel tiles (m, k, n) through kernel_axes(); an unset
// model tile gives 0 ("not set", as in raggemm::Tiles).
Tiles to_kernel_tiles(Weight weight, Pass pass, const ModelTiles& tiles);
// The extents of the kernel axes of (weight, pass) for a block's dims.
Tiles kernel_extents(Weight weight, Pass pass, const ModelDims& dims);

// ---------------------------------------------------------------------------
// Plans: what the user set.

struct PassConfig {
  ModelTiles tiles;
  std::optional<KernelVersion> kernel;
  std::optional<int> input_buffer_count;  // 1..4
  // Quantization recipe of this pass; none when unset. (Tiles and kernels
  // are resolved per recipe: the tune cache keys it by its config name.)
  std::optional<QuantRecipe> quantization;
  bool operator==(const PassConfig&) const = default;
};

// The plan of one weight: a config per pass, indexed by Pass.
struct GmmPlan {
  std::array<PassConfig, 3> passes{};
  PassConfig& pass(Pass p) { return passes[static_cast<size_t>(p)]; }
  const PassConfig& pass(Pass p) const { return passes[static_cast<size_t>(p)]; }
  bool operator==(const GmmPlan&) const = default;
};

// The plans of one MoE block: one per weight.
struct BlockPlan {
  GmmPlan wi;
  GmmPlan wo;
  GmmPlan& weight(Weight w) { return w == Weight::kWi ? wi : wo; }
  const GmmPlan& weight(Weight w) const { return w == Weight::kWi ? wi : wo; }
  bool operator==(const BlockPlan&) const = default;
};

// ---------------------------------------------------------------------------
// Config keys:
//   {wi,wo}_tile_{fwd,dlhs,drhs}_{batch_seq,embed_dim,mlp_dim} = positive integer
//   use_gmm_v2 = auto|true|false        (all passes of both weights; auto: unset,
//                                        each pass resolves from cache or heuristic)
//   use_gmm_v2_{fwd,dlhs,drhs} = true|false  (that pass of both weights)
//   input_buffer_count = 1..4           (all passes of both weights)
//   {wi,wo}_input_buffer_count_{fwd,dlhs,drhs} = 1..4  (that weight and pass;
//                                        beats input_buffer_count: applied
//                                        after it by parse_plan_settings)
// A bad value or an unknown key throws Error naming the key; an unknown key's
// message suggests the nearest valid key.

std::vector<std::string> plan_setting_keys();
bool is_plan_setting_key(const std::string& key);
// The valid key nearest to `key` by edit distance.
std::string nearest_plan_setting_key(const std::string& key);
void apply_plan_setting(BlockPlan& plan, const std::string& key, const std::string& value);
// "key=value".
void apply_plan_setting(BlockPlan& plan, const std::string& key_equals_value);
BlockPlan parse_plan_settings(const std::vector<std::string>& key_equals_values);

// Parses a positive integer tile value; throws Error naming `argument`.
int64_t parse_tile_value(const std::string& value, const std::string& argument);

// ---------------------------------------------------------------------------
// From a block's plan to the op terms.

// The shape of one (weight, pass) of an MoE block with `groups` experts.
GmmShape block_pass_shape(Weight weight, Pass pass, const ModelDims& dims, int64_t groups,
                          std::vector<int32_t> group_sizes = {}, DType dtype = DType::kF32);

// Resolves one (weight, pass) of an MoE block from its plan.
ResolvedPassConfig resolve(const GmmPlan& plan, Weight weight, Pass pass, const ModelDims& dims,
                           int64_t groups, const std::vector<int32_t>& group_sizes,
                           const TuneCache* cache, DType dtype = DType::kF32);

}  // namespace raggemm
