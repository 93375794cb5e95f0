#include "cases/case_backend.h"

#include <algorithm>
#include <limits>
#include <random>

#include "backends/registry.h"
#include "kernels/bf16_microkernel.h"
#include "kernels/int8_gmm.h"
#include "kernels/int8_microkernel.h"
#include "kernels/microkernel.h"
#include "kernels/microkernel_registry.h"
#include "raggemm/error.h"
#include "raggemm/gmm.h"
#include "support/gmm_case.h"

namespace raggemm::cases {
namespace {

int64_t rhs_groups(const Case& c) {
  return c.groups.local_groups < 0 ? c.num_groups() : c.groups.local_groups;
}

// Columns of the rhs as the output stage sees them (before SwiGLU halves them).
int64_t rhs_columns(const Case& c) { return c.pass == CasePass::kDlhs ? c.k : c.n; }

bool uses(Epilogue have, Epilogue part) { return have == part || have == Epilogue::kAll; }

GmmOptions gmm_options(const Case& c, const CaseInputs& in, int threads) {
  GmmOptions o;
  o.transpose_rhs = c.pass == CasePass::kDlhs;
  o.tiles = c.tiles;
  if (c.runs_on.kernel) o.kernel = *c.runs_on.kernel;
  o.backend = c.runs_on.name;
  o.threads = threads;
  o.group_offset = c.groups.group_offset;
  o.local_groups = c.groups.local_groups;
  o.fuse_swiglu = uses(c.epilogue, Epilogue::kSwiglu);
  if (uses(c.epilogue, Epilogue::kColScale)) o.col_scale = in.col_scale.view();
  if (uses(c.epilogue, Epilogue::kBias)) o.col_bias = in.col_bias.view();
  if (uses(c.epilogue, Epilogue::kRowScale)) o.row_scale = in.row_scale.view();
  return o;
}

TgmmOptions tgmm_options(const Case& c, int threads) {
  TgmmOptions o;
  o.tiles = c.tiles;
  if (c.runs_on.kernel) o.kernel = *c.runs_on.kernel;
  o.backend = c.runs_on.name;
  o.threads = threads;
  o.group_offset = c.groups.group_offset;
  o.local_groups = c.groups.local_groups;
  return o;
}

QuantGmmOptions quant_options(const Case& c) {
  QuantGmmOptions q;
  q.recipe = *c.storage.recipe;
  q.rhs_scaling.block_size = c.storage.rhs_scales == Storage::RhsScales::kBlock ? c.storage.block : 0;
  q.lhs_k_block = c.storage.lhs_k_block;
  return q;
}

Tensor uniform_tensor(Shape shape, float lo, float hi, uint32_t seed) {
  Tensor t(DType::kF32, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] = u(rng);
  return t;
}

Tensor nan_tensor(Shape shape) {
  Tensor t(DType::kF32, shape);
  std::fill_n(t.as<float>(), t.numel(), std::numeric_limits<float>::quiet_NaN());
  return t;
}

// Codes times scales; with_scales false: the codes' values alone (the
// scales were folded into the other operand before it was quantized).
Tensor values_of(const QuantizedTensor& q, bool with_scales) {
  if (with_scales) return dequantize(q);
  Tensor ones(DType::kF32, q.scales.shape());
  std::fill_n(ones.as<float>(), ones.numel(), 1.0f);
  return dequantize(q.values, ones, q.type, q.granularity);
}

}  // namespace

std::vector<CaseBackend> case_backends() {
  std::vector<CaseBackend> axis;
  const backends::Backend* first = backends::registered_backends().front();
  for (const backends::Backend* backend : backends::registered_backends()) {
    const std::string name = backend->name();
    if (name == kOracleBackend) continue;
    const std::string prefix = backend == first ? "" : name;
    const std::vector<KernelVersion> kernels = backend->kernel_versions();
    if (kernels.empty()) axis.push_back({name, name, std::nullopt});
    for (KernelVersion kernel : kernels) {
      const std::string generation = kernel_name(kernel);
      axis.push_back({prefix.empty() ? generation : prefix + "-" + generation, name, kernel});
    }
  }
  return axis;
}

CaseInputs make_inputs(const Case& c, uint32_t seed) {
  CaseInputs in;
  const DType dtype = c.storage.recipe ? DType::kF32 : c.storage.dtype;
  const int64_t g = rhs_groups(c);
  switch (c.pass) {
    case CasePass::kFwd:
      in.a = testing::random_tensor({c.m, c.k}, dtype, seed);
      in.b = testing::random_tensor({g, c.k, c.n}, dtype, seed + 1);
      break;
    case CasePass::kDlhs:
      in.a = testing::random_tensor({c.m, c.n}, dtype, seed);
      in.b = testing::random_tensor({g, c.k, c.n}, dtype, seed + 1);
      break;
    case CasePass::kDrhs:
      in.a = testing::random_tensor({c.m, c.k}, dtype, seed);
      in.b = testing::random_tensor({c.m, c.n}, dtype, seed + 1);
      break;
  }
  in.group_sizes = testing::sizes_tensor(c.groups.sizes);
  // Scales near 1, so the output's magnitude (and the error bound) stays
  // that of the product.
  in.row_scale = uniform_tensor({c.m}, 0.5f, 1.5f, seed + 2);
  in.col_scale = uniform_tensor({g, rhs_columns(c)}, 0.5f, 1.5f, seed + 3);
  in.col_bias = testing::random_tensor({rhs_columns(c)}, DType::kF32, seed + 4);
  return in;
}

BackendRun::BackendRun(const Case& c, const CaseInputs& in, int threads)
    : case_(c), in_(in), threads_(threads) {
  if (c.pass == CasePass::kDrhs) {
    out_ = nan_tensor({rhs_groups(c), c.k, c.n});
  } else {
    const int64_t cols = rhs_columns(c);
    out_ = nan_tensor({c.m, uses(c.epilogue, Epilogue::kSwiglu) ? cols / 2 : cols});
  }
  if (c.storage.recipe && c.pass != CasePass::kDrhs) {
    const QuantRecipe recipe = *c.storage.recipe;
    if (c.storage.rhs_scales == Storage::RhsScales::kTensor) {
      weight_ = quantize(in.b, recipe_operand_type(recipe), Granularity::per_tensor());
    } else {
      weight_ = quantize_weight(in.b, recipe, quant_options(c).rhs_scaling);
    }
  }
}

void BackendRun::run() {
  const Case& c = case_;
  if (c.expect == Expect::kNotExpressible) {
    fail("case", c.id(), "not expressible: " + c.refusal);
  }
  if (c.pass == CasePass::kDrhs) {
    const TgmmOptions o = tgmm_options(c, threads_);
    if (!c.storage.recipe) {
      tgmm_into(in_.a, in_.b, in_.group_sizes, out_, o);
      return;
    }
    tgmm_operands_ = prepare_quantized_tgmm(in_.a, in_.b, in_.group_sizes, o, quant_options(c));
    out_ = run_quantized_tgmm(*tgmm_operands_, in_.group_sizes, o);
    return;
  }
  const GmmOptions o = gmm_options(c, in_, threads_);
  if (!c.storage.recipe) {
    gmm_into(in_.a, in_.b, in_.group_sizes, out_, o);
    return;
  }
  const QuantGmmOptions q = quant_options(c);
  gmm_operands_ = prepare_quantized_gmm(in_.a, *weight_, in_.group_sizes, o, q);
  run_quantized_gmm_into(*gmm_operands_, in_.group_sizes, out_, o, q);
}

KernelOperands BackendRun::kernel_operands() const {
  if (gmm_operands_) {
    return {values_of(gmm_operands_->lhs, true),
            values_of(gmm_operands_->rhs, gmm_operands_->rhs_scales_in_kernel)};
  }
  if (tgmm_operands_) {
    return {values_of(tgmm_operands_->lhs, tgmm_operands_->lhs_scales_in_kernel),
            values_of(tgmm_operands_->dout, true)};
  }
  return {in_.a, in_.b};
}

std::string engaged_path(const Case& c) {
  if (c.expect != Expect::kRuns) return "-";
  const Storage& s = c.storage;
  if (c.pass == CasePass::kFwd && s.recipe == QuantRecipe::kInt8 &&
      s.rhs_scales != Storage::RhsScales::kBlock && s.lhs_k_block == 0 &&
      c.epilogue == Epilogue::kNone && kernels::int8_gmm_available()) {
    return std::string("int8-dot:") + kernels::select_int8_microkernel().target;
  }
  if (!s.recipe && s.dtype == DType::kBF16 && c.runs_on.kernel == KernelVersion::kV2 &&
      (c.pass == CasePass::kDrhs || c.epilogue == Epilogue::kNone)) {
    if (const kernels::Bf16Microkernel* uk = kernels::select_bf16_microkernel()) {
      return std::string("bf16-dot:") + uk->target;
    }
  }
  return std::string("f32:") + kernels::select_microkernel().target;
}

Tensor reference_output(const Case& c, const CaseInputs& in, const Tensor& a, const Tensor& b) {
  if (c.pass == CasePass::kDrhs) {
    TgmmOptions o = tgmm_options(c, 1);
    o.backend = kOracleBackend;
    return tgmm(a, b, in.group_sizes, o);
  }
  GmmOptions o = gmm_options(c, in, 1);
  o.backend = kOracleBackend;
  return gmm(a, b, in.group_sizes, o);
}

}  // namespace raggemm::cases
