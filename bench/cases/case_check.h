// A case's output against the f64 reference, with a tolerance derived from
// the case (contraction length, storage type, output stage):
//  - no NaN (the output starts as NaN: every element must be written);
//  - structural zeros exact: gmm rows in no local group, tgmm empty groups;
//  - against the reference on the values the kernels computed on (for a
//    quantized case, its codes times the scales the kernel applies):
//      |out - ref| <= 4 (L + r) u sum_k |a_k b_k|   elementwise,
//    L the contraction, u = 2^-23, r the extra roundings of the storage
//    (4 for decoded codes times scales); with an output stage, sum |a b|
//    is replaced by 4 max(|ref|, T), T the typical output size from the
//    operands' RMS (sqrt(L) rms_a rms_b, squared through SwiGLU);
//  - quantized cases also against the reference on the unquantized f32
//    inputs: ||out - ref||_2 / ||ref||_2 <= q_a + q_b, q the relative step
//    of each operand's format (e4m3 2^-4, e5m2 2^-3, int8 0.03, int8 per
//    tensor 0.05), which catches scales applied wrong on both sides.
#pragma once

#include <string>

#include "cases/case_backend.h"
#include "cases/case_table.h"

namespace raggemm::cases {

struct CaseCheck {
  bool ok = true;
  std::string detail;     // what failed, or the errors measured
  double error = 0;       // worst error over its bound (<= 1 passes)
  double quant_error = 0; // relative error vs the unquantized reference
  double quant_bound = 0;
};

CaseCheck check_case(const Case& c, const CaseInputs& in, const BackendRun& run);

// The contraction length of a case (K, N or the tokens).
int64_t contraction_of(const Case& c);

}  // namespace raggemm::cases
