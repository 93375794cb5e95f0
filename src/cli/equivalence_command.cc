// raggemm equivalence [config.yml] [key=value ...] [--shape NAME]
// raggemm equivalence --all | --ci [--shape NAME]
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "cli/common.h"
#include "raggemm/comm.h"
#include "raggemm/error.h"
#include "raggemm/train.h"
#include "train/equivalence.h"
#ifdef RAGGEMM_HAVE_MPI
#include "parallel/mpi_communicator.h"
#endif

namespace raggemm::cli {
namespace {

void print_help() {
  std::cout <<
      "usage: raggemm equivalence [config.yml] [key=value ...] [--shape NAME]\n"
      "       raggemm equivalence --all | --ci [--shape NAME]\n"
      "       mpirun -np 2 raggemm equivalence --all   (the P=2 cases)\n"
      "\n"
      "Runs MoE layer configurations against the dense f32 reference\n"
      "(sparse_matmul=false, unquantized, one process, nothing dropped) on the same\n"
      "weights and tokens and prints, per case, the relative Frobenius difference of\n"
      "the output, the input gradient and every parameter gradient, the bound, the\n"
      "quantized cases' distance from their unquantized run (must exceed its\n"
      "minimum) and whether what ran (kernel, storage types, scales of every pass of\n"
      "every expert weight) is what was asked. Exit status 1 if a case fails.\n"
      "\n"
      "With a config (trainer keys, as `raggemm train`): that configuration on its\n"
      "layer dims and global tokens (or on --shape small|mixtral_like|skewed).\n"
      "--all: the whole matrix {v111..v222} x {f32, bf16} x {none, fp8_channel,\n"
      "fp8_block128, int8} x {p1, p2_a2a, p2_ring} x the three shapes, for the\n"
      "process count of this launch. --ci: the pairwise subset CTest runs.\n"
      "docs/equivalence.md describes the bounds.\n";
}

std::unique_ptr<Communicator> launch_communicator() {
#ifdef RAGGEMM_HAVE_MPI
  if (launched_by_mpirun()) return make_mpi_communicator();
#endif
  return nullptr;
}

int run_equivalence_command(std::vector<std::string> args) {
  args.erase(args.begin());
  bool all = false, ci = false;
  std::string shape_name;
  std::vector<std::string> settings;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--help" || args[i] == "-h") {
      print_help();
      return 0;
    } else if (args[i] == "--all") {
      all = true;
    } else if (args[i] == "--ci") {
      ci = true;
    } else if (args[i] == "--shape") {
      require(i + 1 < args.size(), "--shape", "(missing)", "expects small, mixtral_like or skewed");
      shape_name = args[++i];
      train::equivalence_shape(shape_name);  // validates
    } else {
      settings.push_back(args[i]);
    }
  }
  require(!(all && ci), "--all,--ci", "both", "choose one");
  require(!((all || ci) && !settings.empty()), "--all", settings.empty() ? "" : settings[0],
          "runs the built-in matrix: drop the config settings, or drop --all/--ci");
  std::unique_ptr<Communicator> comm = launch_communicator();
  Communicator* c = comm_size(comm.get()) > 1 ? comm.get() : nullptr;
  const bool print = comm_rank(c) == 0;
  const auto begin = std::chrono::steady_clock::now();
  int cases = 0, failed = 0;
  auto report = [&](const train::EquivalenceResult& r) {
    ++cases;
    if (!r.passed()) ++failed;
    if (print) std::cout << train::equivalence_row(r) << std::endl;
  };
  if (print) std::cout << train::equivalence_header() << "\n";
  try {
    if (all || ci) {
      const auto matrix =
          all ? train::all_equivalence_cases() : train::pairwise_equivalence_cases();
      for (const train::EquivalenceCase& one : matrix) {
        if (one.ranks() != comm_size(c)) continue;
        if (!shape_name.empty() && one.shape != shape_name) continue;
        report(train::run_equivalence(one, c));
      }
    } else {
      const train::TrainConfig config = train::resolve(train::parse_train_arguments(settings));
      train::check_launch(config, c);
      moe::MoeConfig moe = config.moe;
      train::EquivalenceShape shape{"config",
                                    moe.embed_dim,
                                    moe.mlp_dim,
                                    moe.router.num_experts,
                                    moe.router.top_k,
                                    config.global_tokens_per_step(),
                                    false};
      if (!shape_name.empty()) {
        shape = train::equivalence_shape(shape_name);
        moe.embed_dim = shape.embed;
        moe.mlp_dim = shape.mlp;
        moe.router.num_experts = shape.experts;
        moe.router.top_k = shape.top_k;
      }
      const train::EquivalenceResult result = train::run_equivalence(
          std::string("config:") + (shape_name.empty() ? "own dims" : shape_name), moe, shape, c);
      report(result);
      if (print) std::cout << "ran: " << result.ran << "\n";
      if (print) std::cout << "kernels: " << config.kernel_selection << "\n";
    }
  } catch (const std::exception& e) {
    if (c) abort_job(*c, e.what());
    throw;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  if (print) {
    char text[160];
    std::snprintf(text, sizeof(text), "%d case(s), %d failed, %d process(es), %.1f s\n", cases,
                  failed, comm_size(c), seconds);
    std::cout << text;
    if ((all || ci) && comm_size(c) == 1)
      std::cout << "(the P=2 cases run under: mpirun -np 2 raggemm equivalence "
                << (all ? "--all" : "--ci") << ")\n";
  }
  return failed > 0 ? 1 : 0;
}

const CommandRegistrar kEquivalenceRegistrar(
    "equivalence",
    "hold MoE layer configurations against the dense reference, leaf by leaf, and check what ran",
    run_equivalence_command);

}  // namespace
}  // namespace raggemm::cli
