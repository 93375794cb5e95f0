// Names of weights, passes and model dims, and the one table that maps
// model-dimension tiles to kernel tiles (DESIGN.md s.2).
#include <string>

#include "raggemm/error.h"
#include "raggemm/plan.h"

namespace raggemm {

const char* weight_name(Weight weight) { return weight == Weight::kWi ? "wi" : "wo"; }

const char* pass_name(Pass pass) {
  switch (pass) {
    case Pass::kForward:
      return "fwd";
    case Pass::kGradLhs:
      return "dlhs";
    case Pass::kGradRhs:
      return "drhs";
  }
  return "?";
}

const char* pass_op_name(Pass pass) { return pass == Pass::kGradRhs ? "tgmm" : "gmm"; }

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

Pass parse_pass(const std::string& name, const std::string& argument) {
  for (Pass pass : kAllPasses) {
    if (name == pass_name(pass)) return pass;
  }
  fail(argument, name, "expected fwd, dlhs or drhs");
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

Tiles kernel_extents(const GmmShape& shape) {
  if (shape.pass == Pass::kGradRhs) return Tiles{shape.k, shape.m, shape.n};
  return Tiles{shape.m, shape.k, shape.n};
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

}  // namespace raggemm
