// raggemm train [config.yml] [key=value | key: value ...]
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "cli/common.h"
#include "raggemm/comm.h"
#include "raggemm/error.h"
#include "raggemm/train.h"
#ifdef RAGGEMM_HAVE_MPI
#include "parallel/mpi_communicator.h"
#endif

namespace raggemm::cli {
namespace {

void print_help() {
  std::cout << "usage: raggemm train [config.yml] [key=value ...] [key: value ...]\n"
               "       mpirun -np P raggemm train [config.yml] ici_expert_parallelism=P ...\n"
               "       mpirun -np P raggemm train [config.yml] ici_data_parallelism=D\n"
               "           ici_fsdp_parallelism=F ici_expert_parallelism=E ...  (D*F*E = P)\n\n"
               "Trains the MoE model of the config (configs/base.yml lists every key and its\n"
               "default; docs/moe_configuration.md explains them). Overrides come after the\n"
               "config file as key=value (one word) or 'key:' 'value' (two words), mixed.\n"
               "Output: base_output_directory/run_name/{config.yml, metrics.jsonl, checkpoints/,\n"
               "trace.json}. Data, FSDP and expert parallelism over P processes: docs/parallelism.md.\n\n"
               "keys:\n";
  for (const train::ConfigKey& key : train::config_keys()) {
    std::cout << "  " << key.name << " (default "
              << (key.default_value.empty() ? "\"\"" : key.default_value) << "): " << key.help
              << "\n";
  }
  std::cout << "\naliases (the same key; giving both is a duplicate):\n";
  for (const train::ConfigKeyAlias& alias : train::config_key_aliases()) {
    std::cout << "  " << alias.alias << " = " << alias.key << "\n";
  }
  std::cout << "\nA key given twice on the command line, or twice in the file, is an error; an\n"
               "override may change a key of the file.\n";
}

// The communicator of this launch: MPI when started by mpirun or asked for
// more than one process (MPI then reports a size of 1 and the launch check
// names the mismatch); none otherwise, so a plain run never touches MPI.
std::unique_ptr<Communicator> launch_communicator(const train::TrainConfig& config) {
#ifdef RAGGEMM_HAVE_MPI
  if (launched_by_mpirun() || config.processes() > 1) return make_mpi_communicator();
#endif
  require(config.processes() == 1,
          "ici_data_parallelism,ici_fsdp_parallelism,ici_expert_parallelism",
          std::to_string(config.ici_data_parallelism) + "," +
              std::to_string(config.ici_fsdp_parallelism) + "," +
              std::to_string(config.ici_expert_parallelism),
          "this raggemm was built without MPI (RAGGEMM_WITH_MPI)");
  return nullptr;
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
  std::unique_ptr<Communicator> comm = launch_communicator(config);
  if (comm_size(comm.get()) == 1) {
    train::run_training(config, std::cout, comm.get());
    return 0;
  }
  // Several processes: a rank that fails must end the job, not leave the
  // others waiting in a collective.
  try {
    train::run_training(config, std::cout, comm.get());
  } catch (const std::exception& e) {
    abort_job(*comm, e.what());
  }
  return 0;
}

const CommandRegistrar kTrainRegistrar(
    "train", "train the MoE model of a config and log loss and GMM speed",
    run_train);

}  // namespace
}  // namespace raggemm::cli
