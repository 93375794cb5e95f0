// Names of weights and model dims, the one table that maps model-dimension
// tiles to kernel tiles (DESIGN.md s.2), and a block's (weight, pass) as an
// op problem.
#include <string>

#include "raggemm/error.h"
#include "raggemm/moe_plan.h"

namespace raggemm {

const char* weight_name(Weight weight) { return weight == Weight::kWi ? "wi" : "wo"; }

const char* model_dim_name(ModelDim dim) {
  switch (dim) {
    case ModelDim::kBatchSeq:
      return "batch_seq";
    case ModelDim::kEmbedDim:
      return "embed_dim";
    case ModelDim::kMlpDim:
      return "mlp_dim";
  }
  return "?";
}

Weight parse_weight(const std::string& name, const std::string& argument) {
  for (Weight weight : kAllWeights) {
    if (name == weight_name(weight)) return weight;
  }
  fail(argument, name, "expected wi or wo");
}

int64_t ModelDims::at(ModelDim dim) const {
  switch (dim) {
    case ModelDim::kBatchSeq:
      return batch_seq;
    case ModelDim::kEmbedDim:
      return embed_dim;
    case ModelDim::kMlpDim:
      return mlp_dim;
  }
  return 0;
}

std::optional<int64_t>& ModelTiles::at(ModelDim dim) {
  switch (dim) {
    case ModelDim::kBatchSeq:
      return batch_seq;
    case ModelDim::kEmbedDim:
      return embed_dim;
    case ModelDim::kMlpDim:
      break;
  }
  return mlp_dim;
}

const std::optional<int64_t>& ModelTiles::at(ModelDim dim) const {
  return const_cast<ModelTiles*>(this)->at(dim);
}

KernelAxes kernel_axes(Weight weight, Pass pass) {
  using enum ModelDim;
  // wi is [E, embed, mlp]: fwd contracts embed into mlp, dlhs contracts mlp
  // back into embed, drhs contracts the tokens into an [embed, mlp] gradient.
  // wo is [E, mlp, embed]: the same with embed and mlp exchanged.
  const ModelDim in = weight == Weight::kWi ? kEmbedDim : kMlpDim;
  const ModelDim out = weight == Weight::kWi ? kMlpDim : kEmbedDim;
  switch (pass) {
    case Pass::kForward:
      return {kBatchSeq, in, out};
    case Pass::kGradLhs:
      return {kBatchSeq, out, in};
    case Pass::kGradRhs:
      return {in, kBatchSeq, out};
  }
  fail("pass", std::to_string(static_cast<int>(pass)), "unknown pass");
}

Tiles to_kernel_tiles(Weight weight, Pass pass, const ModelTiles& tiles) {
  const KernelAxes axes = kernel_axes(weight, pass);
  return Tiles{tiles.at(axes.m).value_or(0), tiles.at(axes.k).value_or(0),
               tiles.at(axes.n).value_or(0)};
}

Tiles kernel_extents(Weight weight, Pass pass, const ModelDims& dims) {
  const KernelAxes axes = kernel_axes(weight, pass);
  return Tiles{dims.at(axes.m), dims.at(axes.k), dims.at(axes.n)};
}

GmmShape block_pass_shape(Weight weight, Pass pass, const ModelDims& dims, int64_t groups,
                          std::vector<int32_t> group_sizes, DType dtype) {
  const Tiles extents = kernel_extents(weight, pass, dims);
  GmmShape shape;
  shape.pass = pass;
  shape.m = dims.batch_seq;
  // gmm passes: kernel (m, k, n) is the op's (M, K, N); tgmm: kernel m is the
  // op's K (rows of each [K, N] gradient) and kernel k is the tokens.
  shape.k = pass == Pass::kGradRhs ? extents.m : extents.k;
  shape.n = extents.n;
  shape.groups = groups;
  shape.lhs_dtype = dtype;
  shape.rhs_dtype = dtype;
  shape.group_sizes = std::move(group_sizes);
  return shape;
}

ResolvedPassConfig resolve(const GmmPlan& plan, Weight weight, Pass pass, const ModelDims& dims,
                           int64_t groups, const std::vector<int32_t>& group_sizes,
                           const TuneCache* cache, DType dtype) {
  const PassConfig& config = plan.pass(pass);
  // Tiles set through the API (not the key parser) are checked here, named
  // by their config key.
  for (ModelDim dim : kAllModelDims) {
    const std::optional<int64_t>& tile = config.tiles.at(dim);
    require(!tile || *tile > 0,
            std::string(weight_name(weight)) + "_tile_" + pass_name(pass) + "_" + model_dim_name(dim),
            tile.value_or(0), "tile must be a positive integer");
  }
  GmmShape shape = block_pass_shape(weight, pass, dims, groups, group_sizes, dtype);
  shape.quantization = config.quantization;
  KernelOverrides overrides;
  overrides.tiles = to_kernel_tiles(weight, pass, config.tiles);
  overrides.kernel = config.kernel;
  overrides.input_buffer_count = config.input_buffer_count;
  return resolve_problem(shape, overrides, cache);
}

}  // namespace raggemm
