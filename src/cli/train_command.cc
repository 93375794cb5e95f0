// raggemm train [config.yml] [key=value | key: value ...]
#include <iostream>

#include "cli/command.h"
#include "raggemm/train.h"

namespace raggemm::cli {
namespace {

void print_help() {
  std::cout << "usage: raggemm train [config.yml] [key=value ...] [key: value ...]\n\n"
               "Trains the MoE model of the config (configs/base.yml lists every key and its\n"
               "default; docs/moe_configuration.md explains them). Overrides come after the\n"
               "config file as key=value (one word) or 'key:' 'value' (two words), mixed.\n"
               "Output: base_output_directory/run_name/{config.yml, metrics.jsonl, checkpoints/,\n"
               "trace.json}.\n\nkeys:\n";
  for (const train::ConfigKey& key : train::config_keys()) {
    std::cout << "  " << key.name << " (default "
              << (key.default_value.empty() ? "\"\"" : key.default_value) << "): " << key.help
              << "\n";
  }
}

int run_train(std::vector<std::string> args) {
  args.erase(args.begin());
  for (const std::string& arg : args) {
    if (arg == "--help" || arg == "-h") {
      print_help();
      return 0;
    }
  }
  const train::TrainConfig config = train::resolve(train::parse_train_arguments(args));
  train::run_training(config, std::cout);
  return 0;
}

CommandRegistrar registrar("train", "train the MoE model of a config and log loss and GMM speed",
                           run_train);

}  // namespace
}  // namespace raggemm::cli
