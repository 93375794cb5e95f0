// The config keys of tile plans: parsing, validation and the nearest-key
// suggestion for a misspelled key.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "raggemm/error.h"
#include "raggemm/moe_plan.h"

namespace raggemm {
namespace {

constexpr int kMaxInputBufferCount = 4;

std::string tile_key(Weight weight, Pass pass, ModelDim dim) {
  return std::string(weight_name(weight)) + "_tile_" + pass_name(pass) + "_" + model_dim_name(dim);
}

std::string use_v2_key(Pass pass) { return std::string("use_gmm_v2_") + pass_name(pass); }

// input_buffer_count is the global key; these set one (weight, pass).
std::string buffer_count_key(Weight weight, Pass pass) {
  return std::string(weight_name(weight)) + "_input_buffer_count_" + pass_name(pass);
}

bool is_buffer_count_key(const std::string& key) {
  for (Weight weight : kAllWeights) {
    for (Pass pass : kAllPasses) {
      if (key == buffer_count_key(weight, pass)) return true;
    }
  }
  return false;
}

int parse_buffer_count(const std::string& key, const std::string& value) {
  int64_t count = 0;
  auto [stop, error] = std::from_chars(value.data(), value.data() + value.size(), count);
  require(!value.empty() && error == std::errc() && stop == value.data() + value.size() &&
              count >= 1 && count <= kMaxInputBufferCount,
          key, value.empty() ? "''" : value, key + " must be an integer in 1..4");
  return static_cast<int>(count);
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

bool parse_bool(const std::string& value, const std::string& key) {
  std::string lower = value;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "true" || lower == "1" || lower == "yes") return true;
  if (lower == "false" || lower == "0" || lower == "no") return false;
  fail(key, value, "expected true or false");
}

}  // namespace

std::vector<std::string> plan_setting_keys() {
  std::vector<std::string> keys;
  for (Weight weight : kAllWeights) {
    for (Pass pass : kAllPasses) {
      for (ModelDim dim : kAllModelDims) keys.push_back(tile_key(weight, pass, dim));
    }
  }
  keys.push_back("use_gmm_v2");
  for (Pass pass : kAllPasses) keys.push_back(use_v2_key(pass));
  keys.push_back("input_buffer_count");
  // After the global key: a caller that applies keys in this order lets the
  // per-pass ones win (parse_plan_settings does so whatever the order).
  for (Weight weight : kAllWeights) {
    for (Pass pass : kAllPasses) keys.push_back(buffer_count_key(weight, pass));
  }
  return keys;
}

bool is_plan_setting_key(const std::string& key) {
  const std::vector<std::string> keys = plan_setting_keys();
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

std::string nearest_plan_setting_key(const std::string& key) {
  std::string best;
  size_t best_distance = SIZE_MAX;
  for (const std::string& candidate : plan_setting_keys()) {
    size_t distance = edit_distance(key, candidate);
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  return best;
}

int64_t parse_tile_value(const std::string& value, const std::string& argument) {
  int64_t parsed = 0;
  const char* begin = value.data();
  const char* end = begin + value.size();
  auto [stop, error] = std::from_chars(begin, end, parsed);
  if (value.empty() || error == std::errc::result_out_of_range) {
    fail(argument, value.empty() ? "''" : value, "tile must be a positive integer");
  }
  if (error != std::errc() || stop != end) fail(argument, value, "tile must be a positive integer");
  require(parsed > 0, argument, value, "tile must be a positive integer (0 and negatives are invalid)");
  require(parsed <= kMaxTile, argument, value,
          "tile must be at most " + std::to_string(kMaxTile) + " (the ops' tile limit)");
  return parsed;
}

void apply_plan_setting(BlockPlan& plan, const std::string& key, const std::string& value) {
  for (Weight weight : kAllWeights) {
    for (Pass pass : kAllPasses) {
      for (ModelDim dim : kAllModelDims) {
        if (key == tile_key(weight, pass, dim)) {
          plan.weight(weight).pass(pass).tiles.at(dim) = parse_tile_value(value, key);
          return;
        }
      }
    }
  }
  if (key == "use_gmm_v2") {
    // auto: every pass takes the kernel its plan resolves (cache, else heuristic).
    std::optional<KernelVersion> kernel;
    if (value != "auto")
      kernel = parse_bool(value, key) ? KernelVersion::kV2 : KernelVersion::kV1;
    for (Weight weight : kAllWeights) {
      for (PassConfig& config : plan.weight(weight).passes) config.kernel = kernel;
    }
    return;
  }
  for (Pass pass : kAllPasses) {
    if (key == use_v2_key(pass)) {
      const KernelVersion kernel = parse_bool(value, key) ? KernelVersion::kV2 : KernelVersion::kV1;
      for (Weight weight : kAllWeights) plan.weight(weight).pass(pass).kernel = kernel;
      return;
    }
  }
  if (key == "input_buffer_count") {
    const int count = parse_buffer_count(key, value);
    for (Weight weight : kAllWeights) {
      for (PassConfig& config : plan.weight(weight).passes) config.input_buffer_count = count;
    }
    return;
  }
  for (Weight weight : kAllWeights) {
    for (Pass pass : kAllPasses) {
      if (key == buffer_count_key(weight, pass)) {
        plan.weight(weight).pass(pass).input_buffer_count = parse_buffer_count(key, value);
        return;
      }
    }
  }
  fail(key.empty() ? "key" : key, value,
       "unknown plan key; did you mean '" + nearest_plan_setting_key(key) + "'?");
}

void apply_plan_setting(BlockPlan& plan, const std::string& key_equals_value) {
  const size_t equals = key_equals_value.find('=');
  require(equals != std::string::npos, "setting", key_equals_value,
          "expected key=value (e.g. wi_tile_fwd_batch_seq=256)");
  apply_plan_setting(plan, key_equals_value.substr(0, equals), key_equals_value.substr(equals + 1));
}

BlockPlan parse_plan_settings(const std::vector<std::string>& key_equals_values) {
  BlockPlan plan;
  // The per-(weight, pass) buffer counts go last, so they beat the global
  // input_buffer_count in whatever order the settings come.
  std::vector<std::string> per_pass;
  for (const std::string& setting : key_equals_values) {
    if (is_buffer_count_key(setting.substr(0, setting.find('=')))) {
      per_pass.push_back(setting);
    } else {
      apply_plan_setting(plan, setting);
    }
  }
  for (const std::string& setting : per_pass) apply_plan_setting(plan, setting);
  return plan;
}

}  // namespace raggemm
