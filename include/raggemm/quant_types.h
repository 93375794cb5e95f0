// The vocabulary of quantization (include/raggemm/quant.h has the format):
// storage types, scale granularities, recipes and weight scalings. It is
// data that every layer passes along (a grouped matmul's operands carry it
// down to the backends and the kernels' decoders), so it lives in core; the
// encoders and the quantized passes stay in ops/.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "raggemm/dtype.h"
#include "raggemm/tensor.h"

namespace raggemm {

enum class QuantType : uint8_t { kFp8E4M3, kFp8E5M2, kInt8 };

const char* quant_type_name(QuantType type);  // "fp8_e4m3", "fp8_e5m2", "int8"
QuantType parse_quant_type(std::string_view name, const std::string& argument);
// DType::kF8E4M3, kF8E5M2 or kI8.
DType quant_storage_dtype(QuantType type);
// Largest code magnitude as a value: 448, 57344, 127.
float quant_type_max(QuantType type);

inline constexpr int64_t kMinBlockSize = 32;
inline constexpr int64_t kMaxBlockSize = 512;

struct Granularity {
  std::vector<int> channel_axes;  // ascending, distinct; empty: per tensor
  int block_axis = -1;            // -1: no blocks
  int64_t block_size = 0;

  static Granularity per_tensor() { return {}; }
  static Granularity channel(std::vector<int> axes, int block_axis = -1, int64_t block_size = 0);

  bool has_block() const { return block_axis >= 0; }
  bool keeps(int axis) const;
  // The canonical SPEC ("per_tensor", "channel:0,2+block:1:128").
  std::string to_string() const;
  // Shape of the scales for an input shape; throws Error naming `argument`
  // when an axis is out of range for the input's rank.
  Shape scale_shape(const Shape& input, const std::string& argument) const;
  bool operator==(const Granularity&) const = default;
};

// Parses a SPEC; anything else (unknown words, empty or repeated axes, a
// block axis among the channel axes, a block size outside 32..512) throws
// Error naming `argument` and the text.
Granularity parse_granularity(std::string_view spec, const std::string& argument);

// The granularity that produced `scales` for `values`: an axis of size 1 is
// reduced, of the input's size kept, otherwise it is the block axis. The
// block size is the power of two in 32..512 that gives that many blocks, or
// else the only size in 32..512 that does; when neither exists the shapes
// are refused (Error naming `argument`).
Granularity infer_granularity(const Shape& values, const Shape& scales,
                              const std::string& argument);

enum class QuantRecipe : uint8_t { kFp8, kInt8 };
const char* quant_recipe_name(QuantRecipe recipe);  // "fp8", "int8"
QuantRecipe parse_quant_recipe(std::string_view name, const std::string& argument);
// The training config's `quantization` value (and the MoE layer's, the
// trainer's logs, the tune cache's key): "" (none), "fp8_full" or "int8".
// Parsed once where a config is read; below it the recipe is an enum, and
// nothing compares these strings. A bad value throws Error naming
// `argument` and the value ("expected one of: \"\", fp8_full, int8").
std::optional<QuantRecipe> parse_training_quantization(std::string_view value,
                                                       const std::string& argument);
const char* training_quantization_name(std::optional<QuantRecipe> recipe);
// Storage of weights/activations (e4m3 or int8) and of gradients (e5m2 or int8).
QuantType recipe_operand_type(QuantRecipe recipe);
QuantType recipe_gradient_type(QuantRecipe recipe);

// How the weight's scales tile it: per expert and output column
// ("channel"), or additionally in blocks of `block_size` along K
// ("block:SIZE", SIZE in 32..512).
struct RhsScaling {
  int64_t block_size = 0;  // 0: channel
  bool block() const { return block_size > 0; }
  std::string to_string() const;  // "channel" or "block:SIZE"
  bool operator==(const RhsScaling&) const = default;
};
RhsScaling parse_rhs_scaling(std::string_view text, const std::string& argument);

// The granularity of a weight [G,K,N] for a scaling: channel:0,2 or
// channel:0,2+block:1:SIZE.
Granularity weight_granularity(const RhsScaling& scaling);

}  // namespace raggemm
