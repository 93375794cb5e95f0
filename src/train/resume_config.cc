// Which config changes a resume may make (include/raggemm/train.h,
// "Resuming under another config").
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "raggemm/error.h"
#include "raggemm/train.h"

namespace raggemm::train {
namespace {

// A flat YAML map as key -> text, aliases resolved to their key.
std::map<std::string, std::string> flat_map(const std::string& yaml, const std::string& what) {
  std::map<std::string, std::string> out;
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    fail("config", what, std::string("not valid YAML: ") + e.what());
  }
  if (root.IsNull()) return out;
  require(root.IsMap(), "config", what, "expected a map of key: value");
  for (const auto& entry : root) {
    const std::string key = canonical_config_key(entry.first.as<std::string>());
    out[key] = entry.second.IsScalar() ? entry.second.as<std::string>() : "";
  }
  return out;
}

// The spellings the config parser reads as one boolean.
std::string as_bool(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (text == "true" || text == "1" || text == "yes") return "true";
  if (text == "false" || text == "0" || text == "no") return "false";
  return "";
}

// Equal as written, both numbers of the same value, or both the same boolean.
bool same_value(const std::string& a, const std::string& b) {
  if (a == b) return true;
  if (!as_bool(a).empty() && as_bool(a) == as_bool(b)) return true;
  auto number = [](const std::string& text, double& value) {
    try {
      size_t used = 0;
      value = std::stod(text, &used);
      return used == text.size();
    } catch (const std::logic_error&) {
      return false;
    }
  };
  double x = 0, y = 0;
  return number(a, x) && number(b, y) && x == y;
}

}  // namespace

const std::vector<std::string>& resume_harmless_keys() {
  static const std::vector<std::string> keys = {
      // How long and where: the trajectory up to any step is the same.
      "steps", "run_name", "base_output_directory",
      // Checkpoints, logging, profiling, eval: observe the run, do not steer it.
      "enable_checkpointing", "checkpoint_period", "save_checkpoint_on_start", "profiler",
      "enable_goodput_recording", "eval_interval", "eval_steps",
      // Results do not depend on the thread count (DESIGN.md s.1).
      "threads",
      // Where SwiGLU runs, not what it computes: the same bits either way.
      "swiglu_in_gmm",
      // The switch itself.
      "allow_config_change_on_resume"};
  return keys;
}

bool changes_trajectory(const std::string& key) {
  const std::vector<std::string>& harmless = resume_harmless_keys();
  return std::find(harmless.begin(), harmless.end(), canonical_config_key(key)) == harmless.end();
}

std::vector<ConfigChange> trajectory_changes(const std::string& stored_yaml,
                                             const std::string& current_yaml,
                                             std::vector<std::string>* unknown) {
  const std::map<std::string, std::string> stored = flat_map(stored_yaml, "config.yml");
  const std::map<std::string, std::string> current = flat_map(current_yaml, "current config");
  std::vector<ConfigChange> changes;
  for (const ConfigKey& key : config_keys()) {
    if (!changes_trajectory(key.name)) continue;
    auto now = current.find(key.name);
    const std::string current_value = now != current.end() ? now->second : key.default_value;
    // A key the run's build did not have ran at its default.
    auto then = stored.find(key.name);
    const std::string stored_value = then != stored.end() ? then->second : key.default_value;
    if (!same_value(stored_value, current_value)) {
      changes.push_back({key.name, stored_value, current_value});
    }
  }
  if (unknown) {
    unknown->clear();
    for (const auto& [key, value] : stored) {
      const bool known = std::any_of(config_keys().begin(), config_keys().end(),
                                     [&](const ConfigKey& k) { return k.name == key; });
      if (!known) unknown->push_back(key);
    }
  }
  return changes;
}

}  // namespace raggemm::train
