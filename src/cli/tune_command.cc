// raggemm tune: autotunes the six (weight, pass) grouped matmuls of one MoE
// block and records the winners in the tune cache.
//
//   raggemm tune --m M --embed E --mlp F --groups G [--dist D] [--budget-s S]
//       [--cache PATH] [--dtype f32|bf16] [--threads T] [--quiet]
//
// The work is tune::tune_block (shared with raggemm.tune in Python): pairs
// that are the same op problem are tuned once, the budget is shared out.
#include <cstdio>
#include <iostream>

#include "cli/bench_problem.h"
#include "cli/command.h"
#include "cli/common.h"
#include "raggemm/error.h"
#include "raggemm/moe_plan.h"
#include "moe/tune_block.h"

namespace raggemm::cli {
namespace {

constexpr int64_t kMaxDim = int64_t{1} << 31;

std::string describe(const TuneCandidate& c) {
  return "m=" + std::to_string(c.tiles.m) + " k=" + std::to_string(c.tiles.k) + " n=" +
         std::to_string(c.tiles.n) + " " + kernel_name(c.kernel) + " buffers=" +
         std::to_string(c.input_buffer_count);
}

int run_tune(const std::vector<std::string>& args) {
  CLI::App app{"Autotunes the six grouped matmuls (wi, wo x fwd, dlhs, drhs) of one MoE block and "
               "writes the winners to the tune cache.",
               "raggemm tune"};
  std::string m_text, embed_text, mlp_text, groups_text, dist_text = "uniform", budget_text = "60",
                                                       cache_path, dtype_text = "f32", threads_text;
  bool quiet = false;
  app.add_option("--m", m_text, "tokens (batch_seq)")->required();
  app.add_option("--embed", embed_text, "embed_dim")->required();
  app.add_option("--mlp", mlp_text, "mlp_dim")->required();
  app.add_option("--groups", groups_text, "experts (groups)")->required();
  app.add_option("--dist", dist_text,
                 "group sizes to tune on besides balanced M/G: uniform, zipf:S, empty:F")
      ->capture_default_str();
  app.add_option("--budget-s", budget_text, "time budget in seconds for the whole block")
      ->capture_default_str();
  app.add_option("--cache", cache_path, "tune cache file (default: $RAGGEMM_TUNE_CACHE or "
                                        "$XDG_CACHE_HOME/raggemm/tune_cache.json)");
  app.add_option("--dtype", dtype_text, "storage of the inputs: f32 or bf16")->capture_default_str();
  app.add_option("--threads", threads_text, "threads (default: OpenMP's default)");
  app.add_flag("--quiet", quiet, "print only the summary");
  parse_command_line(app, args);

  const ModelDims dims{parse_int(m_text, "--m", 1, kMaxDim), parse_int(embed_text, "--embed", 1, kMaxDim),
                       parse_int(mlp_text, "--mlp", 1, kMaxDim)};
  const int64_t groups = parse_int(groups_text, "--groups", 1, kMaxDim);
  // Every pass's operands are products of these (embed and mlp trade places).
  check_problem_allocations({"--m", dims.batch_seq}, {"--embed", dims.embed_dim},
                            {"--mlp", dims.mlp_dim}, {"--groups", groups});
  const double budget_s = parse_real(budget_text, "--budget-s", 0.0, 1e6);
  const DType dtype = parse_input_dtype(dtype_text, "--dtype");
  const int threads = app.count("--threads") ? static_cast<int>(parse_int(threads_text, "--threads", 1, 1024)) : 0;
  const std::vector<int32_t> group_sizes =
      bench::draw_group_sizes(dims.batch_seq, groups, bench::parse_group_dist(dist_text, "--dist"));
  TuneCache cache(app.count("--cache") ? cache_path : TuneCache::default_path());

  tune::BlockTuneOptions options;
  options.budget_s = budget_s;
  options.threads = threads;
  options.log = quiet ? nullptr : &std::cout;
  if (!quiet) {
    options.on_start = [](Weight weight, Pass pass, const GmmShape& s, double share_s) {
      std::printf("%s %s: %s M=%lld K=%lld N=%lld G=%lld, budget %.1f s\n", weight_name(weight),
                  pass_name(pass), pass_op_name(pass), static_cast<long long>(s.m),
                  static_cast<long long>(s.k), static_cast<long long>(s.n),
                  static_cast<long long>(s.groups), share_s);
      std::fflush(stdout);
    };
  }
  const tune::BlockTuneReport report =
      tune::tune_block(dims, groups, group_sizes, dtype, cache, options);
  for (const tune::BlockTuneRow& row : report.rows) {
    const tune::TuneResult& result = row.result;
    const double tuned_s = result.winner_seconds;
    const bool shared = row.tuned_as_weight != row.weight || row.tuned_as_pass != row.pass;
    std::printf("%-2s %-4s tuned %-40s %8.3f ms  heuristic %8.3f ms  speedup %.2fx  (%d candidates%s%s)\n",
                weight_name(row.weight), pass_name(row.pass), describe(result.entry.winner).c_str(),
                tuned_s * 1e3, result.entry.heuristic_seconds * 1e3,
                tuned_s > 0 ? result.entry.heuristic_seconds / tuned_s : 1.0, result.candidates_timed,
                result.budget_cut ? ", budget cut" : "",
                shared ? (std::string(", same problem as ") + weight_name(row.tuned_as_weight) + " " +
                          pass_name(row.tuned_as_pass)).c_str()
                       : "");
  }
  std::printf("tuned %zu distinct problems in %.1f s (budget %.1f s); cache: %s\n", report.distinct,
              report.seconds, budget_s, cache.path().c_str());
  return 0;
}

const CommandRegistrar kTuneRegistrar(
    "tune", "autotune the six grouped matmuls of an MoE block into the tune cache",
    run_tune);

}  // namespace
}  // namespace raggemm::cli
