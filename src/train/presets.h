// Model presets (`model_name`): the published dimensions of a model as config
// key/value pairs, applied over the config file and under the command line.
// Sources are cited per preset in docs/moe_configuration.md ("Model presets").
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace raggemm::train {

using PresetKeys = std::vector<std::pair<std::string, std::string>>;

// The keys a preset fixes; Error naming model_name for an unknown name.
// "default" fixes none (configs/base.yml's small model).
const PresetKeys& model_preset(const std::string& model_name);

// Every preset name, "default" first.
std::vector<std::string> model_preset_names();

}  // namespace raggemm::train
