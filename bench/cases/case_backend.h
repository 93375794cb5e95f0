// The backend axis of the case table and how a case runs on it: every
// backend of the registry (src/backends/registry.cc) in each of its kernel
// generations, except the reference, which is the oracle each case is
// checked against (reference_output). A case runs through the public ops
// (gmm_into, tgmm_into, the quantized ops) with its backend and generation
// named in the options, as a caller selects them; the int8 integer-dot and
// bf16-dot paths engage inside the CPU kernels where storage and ISA allow.
// A backend added to the registry joins the table with no edit here.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cases/case_table.h"
#include "raggemm/quant.h"
#include "raggemm/tensor.h"

namespace raggemm::cases {

// The backends every case is crossed with, in the registry's order: today
// the CPU kernels' "v1" and "v2".
std::vector<CaseBackend> case_backends();

// The name of the registry's oracle backend, left out of the axis.
inline constexpr const char* kOracleBackend = "reference";

// A case's inputs in their storage type (f32 for quantized cases: the op
// quantizes them), plus the output-stage vectors.
struct CaseInputs {
  Tensor a, b;  // fwd: lhs [M,K], rhs [G_rhs,K,N]; dlhs: dout [M,N], rhs; drhs: lhs, dout [M,N]
  Tensor group_sizes;
  Tensor row_scale, col_scale, col_bias;  // row [M]; col [G_rhs, C]; bias [C] (C: rhs columns)
};
CaseInputs make_inputs(const Case& c, uint32_t seed = 1);

// The operands the kernels computed on, as f32 values (codes times the
// scales the kernel applies; scales folded elsewhere stay out): the
// reference of a quantized case is taken on these.
struct KernelOperands {
  Tensor a, b;
};

// One case made ready to run on its backend: the weight quantized once
// (as a caller holds it across steps), the output allocated. run() is the
// op as a caller calls it each step (activations quantized inside it), so
// the bench times run() alone. Throws raggemm::Error when the op refuses.
class BackendRun {
 public:
  BackendRun(const Case& c, const CaseInputs& in, int threads);
  void run();
  // f32 output: gmm [M, C or C/2], tgmm [G_local, K, N]. Filled with NaN
  // before the first run, so an element the op never writes shows.
  const Tensor& out() const { return out_; }
  // The operands the kernels computed on in the last run, as f32 values
  // (codes times the scales the kernel applies; scales folded elsewhere stay
  // out): the reference of a quantized case is taken on these.
  KernelOperands kernel_operands() const;

 private:
  const Case& case_;
  const CaseInputs& in_;
  int threads_;
  std::optional<QuantizedTensor> weight_;
  std::optional<QuantizedGmmOperands> gmm_operands_;
  std::optional<QuantizedTgmmOperands> tgmm_operands_;
  Tensor out_;
};

// Which kernel path the op takes for the case under its ISA scope, e.g.
// "f32:AVX3", "bf16-dot:AVX512_BF16", "int8-dot:AVX512_VNNI" (for reports).
std::string engaged_path(const Case& c);

// The f64 reference of the case on the given operands: the same public op
// on the registry's reference backend.
Tensor reference_output(const Case& c, const CaseInputs& in, const Tensor& a, const Tensor& b);

}  // namespace raggemm::cases
