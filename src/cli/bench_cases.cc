#include "cli/bench_cases.h"

#include <omp.h>

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cases/case_backend.h"
#include "cases/case_check.h"
#include "cases/case_table.h"
#include "cli/bench_runners.h"
#include "raggemm/error.h"
#include "raggemm/npy.h"

namespace raggemm::cli {
namespace {

using cases::Case;
using cases::Expect;

const char* status_name(Expect expect) {
  switch (expect) {
    case Expect::kRuns:
      return "ran";
    case Expect::kRefused:
      return "refused";
    case Expect::kNotExpressible:
      return "not_expressible";
  }
  return "?";
}

}  // namespace

int run_case_bench(const CaseBenchOptions& o) {
  cases::TableOptions table_options;
  table_options.scale = o.scale;
  const std::vector<Case> table = cases::filter_cases(cases::case_table(table_options), o.filter);
  require(!table.empty(), "--cases", o.filter, "no case id contains every word of the filter");
  const int threads = o.threads > 0 ? o.threads : omp_get_max_threads();
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  int failures = 0;
  if (!o.json) {
    std::printf("case table: %zu cases, scale %d, threads %d, reps %d%s\n", table.size(), o.scale,
                threads, o.reps, o.list ? " (listed, not timed)" : "");
    std::printf("  %-62s %-24s %10s %9s\n", "case", "path", "median ms", "GFLOP/s");
  }
  for (const Case& c : table) {
    nlohmann::ordered_json entry = {
        {"id", c.id()},          {"section", c.section},
        {"pass", cases::pass_name(c.pass)}, {"storage", c.storage.name},
        {"backend", c.backend},  {"isa", c.isa.name},
        {"epilogue", cases::epilogue_name(c.epilogue)}, {"groups", c.groups.name},
        {"m", c.m},              {"k", c.k},
        {"n", c.n},              {"num_groups", c.num_groups()},
        {"status", status_name(c.expect)}};
    std::string line;
    if (c.expect == Expect::kNotExpressible) {
      entry["reason"] = c.refusal;
      line = "n/a: " + c.refusal;
    } else {
      cases::IsaScope scope(c.isa);
      const cases::CaseInputs in = cases::make_inputs(c);
      cases::BackendRun run(c, in, threads);
      if (c.expect == Expect::kRefused) {
        std::string error = "(not refused)";
        try {
          run.run();
          ++failures;
        } catch (const Error& e) {
          error = e.what();
          if (error.find(c.refusal) == std::string::npos) ++failures;
        }
        entry["error"] = error;
        line = "refused: " + error;
      } else {
        const std::string path = cases::engaged_path(c);
        entry["path"] = path;
        if (o.list) {
          line = path;
        } else {
          const double seconds = bench::median_seconds([&] { run.run(); }, o.warmup, o.reps);
          const double gflops = c.flops() / seconds * 1e-9;
          entry["median_ms"] = seconds * 1e3;
          entry["gflops"] = gflops;
          char text[96];
          std::snprintf(text, sizeof(text), "%-24s %10.3f %9.1f", path.c_str(), seconds * 1e3,
                        gflops);
          line = text;
        }
        if (o.check) {
          if (o.list) run.run();
          const cases::CaseCheck check = cases::check_case(c, in, run);
          entry["check_ok"] = check.ok;
          entry["check_error"] = check.error;
          if (!check.ok) {
            ++failures;
            line += "  CHECK FAILED: " + check.detail;
          }
        }
      }
    }
    if (!o.json) {
      std::printf("  %-62s %s\n", c.id().c_str(), line.c_str());
      std::fflush(stdout);
    }
    list.push_back(entry);
  }
  nlohmann::ordered_json result = {{"scale", o.scale},   {"threads", threads},
                                   {"reps", o.reps},     {"warmup", o.warmup},
                                   {"filter", o.filter}, {"count", table.size()},
                                   {"cases", list}};
  if (o.check) result["check_failures"] = failures;
  if (o.json) std::cout << result.dump() << "\n";
  if (!o.json_file.empty()) {
    const std::string text = result.dump(1) + "\n";
    write_file_atomic(o.json_file, text.data(), text.size(), "--json-file");
  }
  if (failures > 0) {
    std::cerr << "error: --cases=" << o.filter << ": " << failures
              << " case(s) off their tolerance or not refused as listed\n";
    return 1;
  }
  return 0;
}

}  // namespace raggemm::cli
