// Names of the quantized types and recipes, and the SPEC grammar of
// granularities (include/raggemm/quant.h).
#include <algorithm>
#include <charconv>
#include <optional>
#include <string>

#include "core/dtype_traits.h"
#include "raggemm/error.h"
#include "raggemm/quant_types.h"

namespace raggemm {
namespace {

constexpr std::string_view kSpecHelp =
    "expected per_tensor, channel:AXES or channel:AXES+block:AXIS:SIZE "
    "(AXES comma-separated axis numbers, SIZE in 32..512)";

// A non-negative decimal integer filling the whole text, or nullopt.
std::optional<int64_t> parse_whole_number(std::string_view text) {
  if (text.empty() || text.size() > 18) return std::nullopt;
  int64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 0) return std::nullopt;
  return value;
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t at = text.find(separator, start);
    parts.push_back(
        text.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return parts;
    start = at + 1;
  }
}

constexpr int kMaxAxis = 63;

int parse_axis(std::string_view text, std::string_view spec, const std::string& argument) {
  std::optional<int64_t> axis = parse_whole_number(text);
  if (!axis || *axis > kMaxAxis) {
    fail(argument, std::string(spec),
         "axis '" + std::string(text) + "' is not an axis number (0.." + std::to_string(kMaxAxis) +
             "); " + std::string(kSpecHelp));
  }
  return static_cast<int>(*axis);
}

void check_block_size(int64_t size, const std::string& spec, const std::string& argument) {
  require(size >= kMinBlockSize && size <= kMaxBlockSize, argument, spec,
          "block size " + std::to_string(size) + " is outside 32..512");
}

// "fp8_e4m3, fp8_e5m2 or int8": the quantized rows' names in QuantType order.
std::string quant_type_names() {
  std::vector<const core::DTypeTraits*> rows;
  for (const core::DTypeTraits& row : core::all_dtype_traits()) {
    if (row.quant_type) rows.push_back(&row);
  }
  std::sort(rows.begin(), rows.end(), [](const core::DTypeTraits* a, const core::DTypeTraits* b) {
    return *a->quant_type < *b->quant_type;
  });
  std::vector<const char*> names;
  for (const core::DTypeTraits* row : rows) names.push_back(row->quant_name);
  return core::or_list(names);
}

}  // namespace

// The QuantType vocabulary reads the dtype table (core/dtype_traits.h): a
// quantized storage type's row names it and gives its range.
const char* quant_type_name(QuantType type) { return core::quant_traits(type).quant_name; }

QuantType parse_quant_type(std::string_view name, const std::string& argument) {
  for (const core::DTypeTraits& row : core::all_dtype_traits()) {
    if (row.quant_type && name == row.quant_name) return *row.quant_type;
  }
  fail(argument, std::string(name),
       "unknown quantized type (expected " + quant_type_names() + ")");
}

DType quant_storage_dtype(QuantType type) { return core::quant_traits(type).dtype; }

float quant_type_max(QuantType type) {
  return static_cast<float>(core::quant_traits(type).finite_max);
}

Granularity Granularity::channel(std::vector<int> axes, int block_axis, int64_t block_size) {
  Granularity granularity;
  std::sort(axes.begin(), axes.end());
  granularity.channel_axes = std::move(axes);
  granularity.block_axis = block_axis;
  granularity.block_size = block_axis >= 0 ? block_size : 0;
  return granularity;
}

bool Granularity::keeps(int axis) const {
  return std::find(channel_axes.begin(), channel_axes.end(), axis) != channel_axes.end();
}

std::string Granularity::to_string() const {
  if (channel_axes.empty() && !has_block()) return "per_tensor";
  std::string text = "channel:";
  for (size_t i = 0; i < channel_axes.size(); ++i) {
    if (i) text += ',';
    text += std::to_string(channel_axes[i]);
  }
  if (has_block()) {
    text += "+block:" + std::to_string(block_axis) + ":" + std::to_string(block_size);
  }
  return text;
}

Shape Granularity::scale_shape(const Shape& input, const std::string& argument) const {
  const int rank = static_cast<int>(input.size());
  for (int axis : channel_axes) {
    require(axis < rank, argument, to_string(),
            "channel axis " + std::to_string(axis) + " is out of range for a rank-" +
                std::to_string(rank) + " input " + shape_string(input));
  }
  if (has_block()) {
    require(block_axis < rank, argument, to_string(),
            "block axis " + std::to_string(block_axis) + " is out of range for a rank-" +
                std::to_string(rank) + " input " + shape_string(input));
  }
  Shape shape(input.size(), 1);
  for (int axis = 0; axis < rank; ++axis) {
    if (keeps(axis)) {
      shape[axis] = input[axis];
    } else if (axis == block_axis) {
      shape[axis] = (input[axis] + block_size - 1) / block_size;
    }
  }
  return shape;
}

Granularity parse_granularity(std::string_view spec, const std::string& argument) {
  const std::string text(spec);
  if (spec == "per_tensor") return Granularity::per_tensor();
  constexpr std::string_view kChannel = "channel:";
  if (spec.substr(0, kChannel.size()) != kChannel) fail(argument, text, std::string(kSpecHelp));
  std::string_view rest = spec.substr(kChannel.size());
  std::string_view block_part;
  if (size_t plus = rest.find('+'); plus != std::string_view::npos) {
    block_part = rest.substr(plus + 1);
    rest = rest.substr(0, plus);
    if (block_part.empty()) fail(argument, text, "nothing after '+'; " + std::string(kSpecHelp));
  }
  if (rest.empty()) fail(argument, text, "no channel axes; " + std::string(kSpecHelp));
  std::vector<int> axes;
  for (std::string_view part : split(rest, ',')) {
    int axis = parse_axis(part, spec, argument);
    require(std::find(axes.begin(), axes.end(), axis) == axes.end(), argument, text,
            "axis " + std::to_string(axis) + " is repeated");
    axes.push_back(axis);
  }
  int block_axis = -1;
  int64_t block_size = 0;
  if (!block_part.empty()) {
    std::vector<std::string_view> fields = split(block_part, ':');
    if (fields.size() != 3 || fields[0] != "block") {
      fail(argument, text, "the part after '+' must be block:AXIS:SIZE; " + std::string(kSpecHelp));
    }
    block_axis = parse_axis(fields[1], spec, argument);
    require(std::find(axes.begin(), axes.end(), block_axis) == axes.end(), argument, text,
            "block axis " + std::to_string(block_axis) + " is also a channel axis");
    std::optional<int64_t> size = parse_whole_number(fields[2]);
    if (!size) fail(argument, text, "block size '" + std::string(fields[2]) + "' is not a number");
    check_block_size(*size, text, argument);
    block_size = *size;
  }
  return Granularity::channel(std::move(axes), block_axis, block_size);
}

Granularity infer_granularity(const Shape& values, const Shape& scales,
                              const std::string& argument) {
  const std::string shapes = shape_string(values) + " with scales " + shape_string(scales);
  require(values.size() == scales.size(), argument, shape_string(scales),
          "scales must have the rank of the values " + shape_string(values));
  std::vector<int> kept;
  int block_axis = -1;
  int64_t block_size = 0;
  for (int axis = 0; axis < static_cast<int>(values.size()); ++axis) {
    const int64_t dim = values[axis];
    const int64_t cells = scales[axis];
    if (cells == dim) {
      if (dim != 1) kept.push_back(axis);
      continue;
    }
    if (cells == 1) continue;
    require(block_axis < 0, argument, shapes,
            "more than one axis is neither kept, reduced to 1, nor tiled");
    // Candidate block sizes give exactly `cells` blocks of `dim`.
    int64_t power_of_two = 0, candidates = 0, only = 0;
    for (int64_t size = kMinBlockSize; size <= kMaxBlockSize; ++size) {
      if (cells <= 0 || (dim + size - 1) / size != cells) continue;
      ++candidates;
      only = size;
      if ((size & (size - 1)) == 0) power_of_two = size;
    }
    require(candidates > 0, argument, shapes,
            "scale axis " + std::to_string(axis) + " of size " + std::to_string(cells) +
                " is not ceil(" + std::to_string(dim) + " / SIZE) for any block size 32..512");
    require(power_of_two > 0 || candidates == 1, argument, shapes,
            "the block size of axis " + std::to_string(axis) +
                " is ambiguous; pass the granularity explicitly");
    block_axis = axis;
    block_size = power_of_two > 0 ? power_of_two : only;
  }
  return Granularity::channel(std::move(kept), block_axis, block_size);
}

const char* quant_recipe_name(QuantRecipe recipe) {
  return recipe == QuantRecipe::kFp8 ? "fp8" : "int8";
}

QuantRecipe parse_quant_recipe(std::string_view name, const std::string& argument) {
  if (name == "fp8") return QuantRecipe::kFp8;
  if (name == "int8") return QuantRecipe::kInt8;
  fail(argument, std::string(name), "unknown quantization recipe (expected fp8 or int8)");
}

std::optional<QuantRecipe> parse_training_quantization(std::string_view value,
                                                       const std::string& argument) {
  if (value.empty()) return std::nullopt;
  if (value == "fp8_full") return QuantRecipe::kFp8;
  if (value == "int8") return QuantRecipe::kInt8;
  fail(argument, std::string(value), "expected one of: \"\", fp8_full, int8");
}

const char* training_quantization_name(std::optional<QuantRecipe> recipe) {
  if (!recipe) return "";
  return *recipe == QuantRecipe::kInt8 ? "int8" : "fp8_full";
}

QuantType recipe_operand_type(QuantRecipe recipe) {
  return recipe == QuantRecipe::kFp8 ? QuantType::kFp8E4M3 : QuantType::kInt8;
}

QuantType recipe_gradient_type(QuantRecipe recipe) {
  return recipe == QuantRecipe::kFp8 ? QuantType::kFp8E5M2 : QuantType::kInt8;
}

std::string RhsScaling::to_string() const {
  return block() ? "block:" + std::to_string(block_size) : "channel";
}

RhsScaling parse_rhs_scaling(std::string_view text, const std::string& argument) {
  const std::string value(text);
  if (text == "channel") return RhsScaling{};
  constexpr std::string_view kBlock = "block:";
  if (text.substr(0, kBlock.size()) == kBlock) {
    std::optional<int64_t> size = parse_whole_number(text.substr(kBlock.size()));
    if (size) {
      check_block_size(*size, value, argument);
      return RhsScaling{*size};
    }
  }
  fail(argument, value, "expected channel or block:SIZE with SIZE in 32..512");
}

Granularity weight_granularity(const RhsScaling& scaling) {
  return scaling.block() ? Granularity::channel({0, 2}, 1, scaling.block_size)
                         : Granularity::channel({0, 2});
}

}  // namespace raggemm
