// raggemm compare RUN_DIR RUN_DIR... [--plot out.png] [--every N]
// Per-step losses of several runs side by side (differences against the
// first run), their speed, and optionally a PNG of the loss curves (gnuplot).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/command.h"
#include "cli/common.h"
#include "raggemm/error.h"
#include "raggemm/npy.h"

namespace raggemm::cli {
namespace {

struct Run {
  std::string dir;
  std::string name;
  std::map<int64_t, nlohmann::json> steps;
};

Run load_run(const std::string& dir) {
  Run run;
  run.dir = dir;
  run.name = std::filesystem::path(dir).filename().string();
  if (run.name.empty()) run.name = std::filesystem::path(dir).parent_path().filename().string();
  const std::string path = (std::filesystem::path(dir) / "metrics.jsonl").string();
  std::ifstream in(path);
  require(in.good(), "RUN_DIR", dir, "no metrics.jsonl there (run 'raggemm train' first)");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    try {
      nlohmann::json entry = nlohmann::json::parse(line);
      // The step first: json's operator= takes its argument by value, and
      // C++17 evaluates the right side of '=' before the left.
      const int64_t step = entry.at("step").get<int64_t>();
      run.steps[step] = std::move(entry);
    } catch (const nlohmann::json::exception&) {
      // A line cut by a kill is skipped.
    }
  }
  require(!run.steps.empty(), "RUN_DIR", dir, "metrics.jsonl holds no steps");
  return run;
}

double mean_of(const Run& run, const char* field) {
  double sum = 0;
  int64_t n = 0;
  for (const auto& [step, entry] : run.steps) {
    if (step == run.steps.begin()->first && run.steps.size() > 1) continue;  // warm-up step
    sum += entry.value(field, 0.0);
    ++n;
  }
  return n ? sum / static_cast<double>(n) : 0;
}

void plot(const std::vector<Run>& runs, const std::string& png) {
  const std::filesystem::path data_dir =
      std::filesystem::temp_directory_path() / ("raggemm_compare_" + std::to_string(::getpid()));
  std::filesystem::create_directories(data_dir);
  std::ostringstream script;
  script << "set terminal png size 1000,600\n"
         << "set output '" << png << ".tmp.png'\n"
         << "set termoption noenhanced\n"
         << "set xlabel 'step'\nset ylabel 'loss (nats/token)'\nset grid\nset key top right\n"
         << "plot ";
  for (size_t i = 0; i < runs.size(); ++i) {
    const std::string data = (data_dir / ("run" + std::to_string(i) + ".dat")).string();
    std::ofstream out(data);
    for (const auto& [step, entry] : runs[i].steps)
      out << step << " " << entry.value("loss", 0.0) << "\n";
    script << (i ? ", " : "") << "'" << data << "' using 1:2 with lines lw 2 title '"
           << runs[i].name << "'";
    // Eval loss (eval_interval) beside the training loss, as points.
    const std::string eval_data = (data_dir / ("eval" + std::to_string(i) + ".dat")).string();
    std::ofstream eval_out(eval_data);
    bool any_eval = false;
    for (const auto& [step, entry] : runs[i].steps) {
      if (!entry.contains("eval_loss")) continue;
      eval_out << step << " " << entry.value("eval_loss", 0.0) << "\n";
      any_eval = true;
    }
    if (any_eval) {
      script << ", '" << eval_data << "' using 1:2 with linespoints lw 2 pt 7 title '"
             << runs[i].name << " eval'";
    }
  }
  script << "\n";
  const std::string script_path = (data_dir / "plot.gp").string();
  std::ofstream(script_path) << script.str();
  const std::string command = "gnuplot '" + script_path + "' 2>&1";
  const int status = std::system(command.c_str());
  std::filesystem::remove_all(data_dir);
  require(status == 0, "--plot", png,
          "gnuplot failed (is gnuplot installed? scripts/install_deps.sh installs gnuplot-nox)");
  // gnuplot wrote a temp file; move it into place in one rename.
  std::filesystem::rename(png + ".tmp.png", png);
}

int run_compare(std::vector<std::string> args) {
  CLI::App app{"Compare training runs: per-step loss differences and speed side by side"};
  std::vector<std::string> dirs;
  std::string png;
  std::string every_text = "1";
  app.add_option("RUN_DIR", dirs, "run directories (base_output_directory/run_name)")->required();
  app.add_option("--plot", png, "write a PNG of the loss curves (gnuplot)");
  app.add_option("--every", every_text, "print every N-th step (default 1)");
  std::string target_text;
  app.add_option("--target-loss", target_text,
                 "report the first step each run's loss (and eval loss) reaches this value");
  parse_command_line(app, args);
  const int64_t every = parse_int(every_text, "--every", 1, 1 << 30);

  std::vector<Run> runs;
  for (const std::string& dir : dirs) runs.push_back(load_run(dir));

  std::printf("%6s", "step");
  for (size_t i = 0; i < runs.size(); ++i) {
    std::printf("  %12.12s", runs[i].name.c_str());
    if (i) std::printf("  %10s", "diff");
  }
  std::printf("\n");
  std::vector<double> max_diffs(runs.size(), 0.0);
  for (const auto& [step, first] : runs[0].steps) {
    const double base = first.value("loss", 0.0);
    for (size_t i = 1; i < runs.size(); ++i) {
      auto it = runs[i].steps.find(step);
      if (it != runs[i].steps.end()) {
        max_diffs[i] = std::max(max_diffs[i], std::abs(it->second.value("loss", 0.0) - base));
      }
    }
    if ((step - 1) % every != 0 && step != runs[0].steps.rbegin()->first) continue;
    std::printf("%6lld", static_cast<long long>(step));
    for (size_t i = 0; i < runs.size(); ++i) {
      auto it = runs[i].steps.find(step);
      if (it == runs[i].steps.end()) {
        std::printf("  %12s", "-");
        if (i) std::printf("  %10s", "-");
        continue;
      }
      const double loss = it->second.value("loss", 0.0);
      std::printf("  %12.4f", loss);
      if (i) std::printf("  %+10.4f", loss - base);
    }
    std::printf("\n");
  }

  std::printf("\n%-24s %10s %10s %12s %11s %10s %12s %13s\n", "run", "steps", "final",
              "step_time_s", "tokens/s", "GFLOP/s", "gmm_share", "max|diff|");
  for (size_t i = 0; i < runs.size(); ++i) {
    const Run& run = runs[i];
    std::printf("%-24.24s %10zu %10.4f %12.4f %11.0f %10.1f %11.1f%% %13.4f\n", run.name.c_str(),
                run.steps.size(), run.steps.rbegin()->second.value("loss", 0.0),
                mean_of(run, "step_time_s"), mean_of(run, "tokens_per_s"),
                mean_of(run, "gmm_gflops"), 100 * mean_of(run, "gmm_time_share"), max_diffs[i]);
  }
  std::printf("(speed: mean over steps after the first; diff: loss minus %s at the same step)\n",
              runs[0].name.c_str());
  if (!target_text.empty()) {
    const double target = parse_real(target_text, "--target-loss", 0, 1e9);
    std::printf("\nfirst step at loss <= %.4f:\n", target);
    for (const Run& run : runs) {
      auto first_at = [&](const char* field) -> std::string {
        for (const auto& [step, entry] : run.steps) {
          if (entry.contains(field) && entry.value(field, 0.0) <= target) {
            return std::to_string(step);
          }
        }
        return "not reached";
      };
      std::printf("  %-24.24s loss: %-12s eval_loss: %s\n", run.name.c_str(),
                  first_at("loss").c_str(), first_at("eval_loss").c_str());
    }
  }
  if (!png.empty()) {
    plot(runs, png);
    std::printf("plot: %s\n", png.c_str());
  }
  return 0;
}

const CommandRegistrar kCompareRegistrar(
    "compare", "compare training runs: per-step losses, speed, loss plot",
    run_compare);

}  // namespace
}  // namespace raggemm::cli
