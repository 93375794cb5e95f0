// Names of the passes and the kernel extents of one op's shape (raggemm/problem.h).
#include <string>

#include "raggemm/error.h"
#include "raggemm/problem.h"

namespace raggemm {

const char* pass_name(Pass pass) {
  switch (pass) {
    case Pass::kForward:
      return "fwd";
    case Pass::kGradLhs:
      return "dlhs";
    case Pass::kGradRhs:
      return "drhs";
  }
  return "?";
}

const char* pass_op_name(Pass pass) { return pass == Pass::kGradRhs ? "tgmm" : "gmm"; }

Pass parse_pass(const std::string& name, const std::string& argument) {
  for (Pass pass : kAllPasses) {
    if (name == pass_name(pass)) return pass;
  }
  fail(argument, name, "expected fwd, dlhs or drhs");
}

Tiles kernel_extents(const GmmShape& shape) {
  if (shape.pass == Pass::kGradRhs) return Tiles{shape.k, shape.m, shape.n};
  return Tiles{shape.m, shape.k, shape.n};
}

}  // namespace raggemm
