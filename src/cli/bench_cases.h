// raggemm bench --cases [FILTER]: times the case table (bench/cases) that
// tests/cases_tests checks against the reference, at a larger size.
#pragma once

#include <string>

namespace raggemm::cli {

struct CaseBenchOptions {
  std::string filter;     // comma-separated words every id must contain; "" : all
  int scale = 8;          // the table's size (1: the test size)
  int threads = 0;        // 0: OpenMP's default
  int warmup = 1;
  int reps = 5;
  bool json = false;      // one JSON object on stdout instead of a table
  std::string json_file;  // also write that object to this file ("" : no)
  bool list = false;      // list the cases (and the refusals' errors), time nothing
  bool check = false;     // also compare each case with the f64 reference
};

// Returns the exit status: 1 when --check finds a case off its tolerance or
// a refused case is not refused.
int run_case_bench(const CaseBenchOptions& options);

}  // namespace raggemm::cli
