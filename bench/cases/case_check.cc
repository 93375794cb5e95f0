#include "cases/case_check.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "support/gmm_case.h"

namespace raggemm::cases {
namespace {

double format_step(QuantType type, bool per_tensor) {
  switch (type) {
    case QuantType::kFp8E4M3:
      return 0.0625;
    case QuantType::kFp8E5M2:
      return 0.125;
    case QuantType::kInt8:
      return per_tensor ? 0.05 : 0.03;
  }
  return 1;
}

double relative_l2(const Tensor& out, const Tensor& ref) {
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double d = double(out.as<float>()[i]) - ref.as<float>()[i];
    diff += d * d;
    norm += double(ref.as<float>()[i]) * ref.as<float>()[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

// Rows of a gmm output that no local group covers, or tgmm groups with no
// rows: exact zeros. Returns the first offending element, or -1.
int64_t first_structural_nonzero(const Case& c, const Tensor& out) {
  const std::vector<int64_t> starts = testing::starts_of(c.groups.sizes);
  const int64_t first = c.groups.local_groups < 0 ? 0 : c.groups.group_offset;
  const int64_t last = c.groups.local_groups < 0 ? c.num_groups() : first + c.groups.local_groups;
  const float* x = out.as<float>();
  if (c.pass == CasePass::kDrhs) {
    for (int64_t g = first; g < last; ++g) {
      if (c.groups.sizes[static_cast<size_t>(g)] != 0) continue;
      const int64_t begin = (g - first) * c.k * c.n;
      for (int64_t i = begin; i < begin + c.k * c.n; ++i) {
        if (x[i] != 0.0f) return i;
      }
    }
    return -1;
  }
  const int64_t cols = out.dim(1);
  for (int64_t row = 0; row < c.m; ++row) {
    if (row >= starts[static_cast<size_t>(first)] && row < starts[static_cast<size_t>(last)]) {
      continue;
    }
    for (int64_t j = 0; j < cols; ++j) {
      if (x[row * cols + j] != 0.0f) return row * cols + j;
    }
  }
  return -1;
}

Tensor absolute(const Tensor& t) {
  Tensor a(t.dtype(), t.shape());
  if (t.dtype() == DType::kF32) {
    for (int64_t i = 0; i < t.numel(); ++i) a.as<float>()[i] = std::fabs(t.as<float>()[i]);
  } else {  // bf16 / f16 bits: clear the sign
    for (int64_t i = 0; i < t.numel(); ++i) {
      a.as<uint16_t>()[i] = static_cast<uint16_t>(t.as<uint16_t>()[i] & 0x7FFF);
    }
  }
  return a;
}

double rms(const Tensor& t) {
  double sum = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double v = t.dtype() == DType::kF32 ? double(t.as<float>()[i])
                                              : double(bf16_to_f32(t.as<uint16_t>()[i]));
    sum += v * v;
  }
  return t.numel() > 0 ? std::sqrt(sum / double(t.numel())) : 0.0;
}

bool uses_swiglu(const Case& c) {
  return c.epilogue == Epilogue::kSwiglu || c.epilogue == Epilogue::kAll;
}

}  // namespace

int64_t contraction_of(const Case& c) {
  switch (c.pass) {
    case CasePass::kFwd:
      return c.k;
    case CasePass::kDlhs:
      return c.n;
    case CasePass::kDrhs:
      return c.m;
  }
  return 1;
}

CaseCheck check_case(const Case& c, const CaseInputs& in, const BackendRun& run) {
  CaseCheck check;
  std::ostringstream detail;
  const Tensor& out = run.out();
  for (int64_t i = 0; i < out.numel(); ++i) {
    if (std::isnan(out.as<float>()[i])) {
      check.ok = false;
      detail << "element " << i << " is NaN (never written, or computed NaN); ";
      break;
    }
  }
  const int64_t zero = first_structural_nonzero(c, out);
  if (zero >= 0) {
    check.ok = false;
    detail << "element " << zero << " = " << out.as<float>()[zero]
           << " must be an exact zero (no local group covers it); ";
  }
  const KernelOperands ops = run.kernel_operands();
  const Tensor ref = reference_output(c, in, ops.a, ops.b);
  const int64_t length = std::max<int64_t>(contraction_of(c), 1);
  const int64_t roundings = c.storage.recipe ? 4 : 0;
  const double step = double(length + roundings) * std::ldexp(1.0, -23);
  // Magnitudes: without an output stage, sum_k |a b| per element (the
  // reference on |a|, |b|), the classic bound of a summation. With one, the
  // typical size of the stage's output, from the operands' RMS.
  Tensor magnitude;
  double typical = 0;
  if (c.epilogue == Epilogue::kNone) {
    magnitude = reference_output(c, in, absolute(ops.a), absolute(ops.b));
  } else {
    typical = std::sqrt(double(length)) * rms(ops.a) * rms(ops.b);
    if (uses_swiglu(c)) typical *= std::max(1.0, typical);
    typical += 1.0;  // the bias
  }
  const float* x = out.as<float>();
  const float* y = ref.as<float>();
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double scale = c.epilogue == Epilogue::kNone
                             ? double(magnitude.as<float>()[i])
                             : 4.0 * std::max(std::fabs(double(y[i])), typical);
    const double bound = 4.0 * step * scale + 1e-30;
    const double e = std::fabs(double(x[i]) - double(y[i])) / bound;
    if (!(e <= check.error)) check.error = std::isnan(e) ? INFINITY : e;
  }
  if (!(check.error <= 1.0)) {
    check.ok = false;
    detail << "scaled error " << check.error << " > 1 against the f64 reference; ";
  }
  if (c.storage.recipe) {
    const QuantRecipe recipe = *c.storage.recipe;
    const bool tensor = c.storage.rhs_scales == Storage::RhsScales::kTensor;
    const QuantType operand = recipe_operand_type(recipe), gradient = recipe_gradient_type(recipe);
    switch (c.pass) {
      case CasePass::kFwd:
        check.quant_bound = format_step(operand, false) + format_step(operand, tensor);
        break;
      case CasePass::kDlhs:
        check.quant_bound = format_step(gradient, false) + format_step(operand, tensor);
        break;
      case CasePass::kDrhs:
        check.quant_bound = format_step(operand, false) + format_step(gradient, false);
        break;
    }
    const Tensor exact = reference_output(c, in, in.a, in.b);
    check.quant_error = relative_l2(out, exact);
    if (!(check.quant_error <= check.quant_bound)) {
      check.ok = false;
      detail << "relative error " << check.quant_error << " > " << check.quant_bound
             << " against the unquantized f64 reference; ";
    }
  }
  detail << "scaled error " << check.error;
  if (c.storage.recipe) detail << ", quantization error " << check.quant_error;
  check.detail = detail.str();
  return check;
}

}  // namespace raggemm::cases
