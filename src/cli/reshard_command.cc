// raggemm reshard: a run's checkpoint rewritten for another mesh
// (docs/parallelism.md, "Resharding").
//
//   raggemm reshard --from RUN_DIR --to NEW_RUN_DIR
//       ici_data_parallelism=D ici_fsdp_parallelism=F ici_expert_parallelism=E [--step N]
//
// The new run folder gets the checkpoint (one file per target rank),
// config.yml with the target's mesh and per_device_batch_size (the same
// global batch), and metrics.jsonl up to the step; `raggemm train` on that
// run with those keys resumes it.
#include <iostream>

#include "cli/command.h"
#include "cli/common.h"
#include "raggemm/error.h"
#include "train/reshard.h"

namespace raggemm::cli {
namespace {

int64_t axis_value(const std::string& key, const std::string& text) {
  try {
    size_t used = 0;
    const long long value = std::stoll(text, &used);
    if (used == text.size() && value >= 1) return value;
  } catch (const std::logic_error&) {
  }
  fail(key, text, "must be a positive mesh axis size");
}

int run_reshard(const std::vector<std::string>& args) {
  CLI::App app{"Rewrite a run's checkpoint for another mesh (dp x fsdp x ep).", "raggemm reshard"};
  std::string from, to;
  int64_t step = -1;
  std::vector<std::string> axes;
  app.add_option("--from", from, "the run folder whose checkpoint is read")->required();
  app.add_option("--to", to, "a new run folder for the resharded checkpoint")->required();
  app.add_option("--step", step, "the step to reshard (default: the newest every rank has)");
  app.add_option("axes", axes,
                 "ici_data_parallelism=D ici_fsdp_parallelism=F ici_expert_parallelism=E "
                 "(each 1 when not given)");
  parse_command_line(app, args);
  MeshShape target;
  for (const std::string& axis : axes) {
    const size_t equals = axis.find('=');
    const std::string key = axis.substr(0, equals);
    const std::string value = equals == std::string::npos ? "" : axis.substr(equals + 1);
    if (key == "ici_data_parallelism") {
      target.data = axis_value(key, value);
    } else if (key == "ici_fsdp_parallelism") {
      target.fsdp = axis_value(key, value);
    } else if (key == "ici_expert_parallelism") {
      target.expert = axis_value(key, value);
    } else {
      fail("axis", axis,
           "expected ici_data_parallelism=D, ici_fsdp_parallelism=F or ici_expert_parallelism=E");
    }
  }
  const train::ReshardResult result = train::reshard_run(from, to, target, step);
  std::cout << "resharded step " << result.step << " of " << from << " from mesh "
            << result.from.describe() << " to " << result.to.describe() << ": " << result.files
            << " file(s) in " << to << ", per_device_batch_size=" << result.per_device_batch_size
            << "\nresume with: "
            << (result.to.size() > 1 ? "mpirun -np " + std::to_string(result.to.size()) + " "
                                     : std::string())
            << "raggemm train " << to << "/config.yml\n";
  return 0;
}

const CommandRegistrar kReshardRegistrar(
    "reshard", "rewrite a run's checkpoint for another mesh (dp x fsdp x ep)", run_reshard);

}  // namespace
}  // namespace raggemm::cli
