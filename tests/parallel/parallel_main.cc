// gtest main of the expert-parallelism tests: joins MPI, runs the tests on
// every rank, and reports a failure on any rank as the job's failure.
//
// --abort-on-rank=R instead makes rank R abort while the others wait in a
// barrier: CTest checks the job ends with R's message instead of hanging.
// --kill-rank=R --mesh=D,F,E builds that mesh, then rank R dies by SIGKILL
// (no message, no MPI_Abort) while the others sum over every axis and wait
// in a barrier: the launcher must end the job.
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include "parallel/mpi_communicator.h"
#include "parallel/mpi_test_env.h"
#include "raggemm/mesh.h"

namespace raggemm::testing {
namespace {
std::unique_ptr<Communicator> g_world;

// Ranks other than 0 print their failures only, tagged with the rank.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: failure\n%s\n", rank_,
                 result.file_name() ? result.file_name() : "?", result.line_number(),
                 result.summary());
  }

 private:
  int rank_;
};
}  // namespace

Communicator& world() { return *g_world; }

std::string shared_temp_dir(const std::string& name) {
  int64_t pid = world().rank() == 0 ? static_cast<int64_t>(getpid()) : 0;
  world().allreduce_sum(&pid, 1);
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("raggemm_ep_" + std::to_string(pid) + "_" + name);
  if (world().rank() == 0) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  world().barrier();
  return dir.string();
}

}  // namespace raggemm::testing

int main(int argc, char** argv) {
  using raggemm::testing::g_world;
  using raggemm::testing::RankFailurePrinter;
  g_world = raggemm::make_mpi_communicator();
  for (int i = 1; i < argc; ++i) {
    const char* flag = "--abort-on-rank=";
    if (std::strncmp(argv[i], flag, std::strlen(flag)) == 0) {
      const int rank = std::atoi(argv[i] + std::strlen(flag));
      if (g_world->rank() == rank) {
        // As the CLI presents a failing rank (cli/common.h abort_job): the
        // library prints nothing, the program prints, the communicator ends the job.
        const std::string line = "error: rank " + std::to_string(g_world->job_rank()) + " of " +
                                 std::to_string(g_world->job_size()) +
                                 ": deliberate failure on this rank\n";
        std::fputs(line.c_str(), stderr);
        std::fflush(stderr);
        g_world->abort("deliberate failure on this rank");
      }
      g_world->barrier();  // the others wait here until the abort ends them
      return 3;            // never reached when the abort works
    }
  }
  int kill_rank = -1;
  raggemm::MeshShape mesh_shape{1, 1, g_world->size()};
  for (int i = 1; i < argc; ++i) {
    long long d = 0, f = 0, e = 0;
    if (std::strncmp(argv[i], "--kill-rank=", 12) == 0) kill_rank = std::atoi(argv[i] + 12);
    if (std::sscanf(argv[i], "--mesh=%lld,%lld,%lld", &d, &f, &e) == 3) mesh_shape = {d, f, e};
  }
  if (kill_rank >= 0) {
    const raggemm::Mesh mesh(g_world.get(), mesh_shape);
    if (g_world->rank() == kill_rank) std::raise(SIGKILL);
    for (raggemm::MeshAxis axis : raggemm::kAllMeshAxes) {
      if (raggemm::Communicator* comm = mesh.axis(axis)) {
        double value = 1;
        comm->allreduce_sum(&value, 1);
      }
    }
    g_world->barrier();
    return 3;  // never reached when the launcher ends the job
  }
  ::testing::InitGoogleTest(&argc, argv);
  // Only rank 0 prints the gtest report; every rank's failures still count.
  if (g_world->rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(g_world->rank()));
  }
  int failed = RUN_ALL_TESTS();
  int64_t any = failed != 0 ? 1 : 0;
  g_world->allreduce_sum(&any, 1);
  g_world.reset();  // MPI_Finalize
  return any != 0 ? 1 : 0;
}
