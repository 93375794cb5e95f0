// Pass-config resolution for the layer's matmuls.
#include "moe/plans.h"

#include "raggemm/error.h"

namespace raggemm::moe {
namespace {

const TuneCache* cache_for(const MoeConfig& config) {
  return config.use_tune_cache ? &TuneCache::shared_default() : nullptr;
}

}  // namespace

PassConfigs resolve_expert_passes(const MoeConfig& config, Weight weight, const ModelDims& dims) {
  GmmPlan plan = config.plan.weight(weight);
  for (PassConfig& pass : plan.passes) pass.quantization = config.quantization;
  PassConfigs out;
  for (Pass pass : kAllPasses) {
    out[static_cast<size_t>(pass)] = resolve(plan, weight, pass, dims, config.router.num_experts,
                                             {}, cache_for(config), config.dtype);
  }
  return out;
}

PassConfigs resolve_dense_passes(const MoeConfig& config, int64_t rows, int64_t k, int64_t n,
                                 DType dtype) {
  PassConfigs out;
  for (Pass pass : kAllPasses) {
    GmmShape shape;
    shape.pass = pass;
    shape.m = rows;
    // dlhs contracts the weight's N and produces its K.
    shape.k = pass == Pass::kGradLhs ? n : k;
    shape.n = pass == Pass::kGradLhs ? k : n;
    shape.groups = 1;
    shape.lhs_dtype = dtype;
    shape.rhs_dtype = dtype;
    shape.group_sizes = {static_cast<int32_t>(rows)};
    KernelOverrides overrides;
    overrides.kernel = config.plan.wi.pass(pass).kernel;
    out[static_cast<size_t>(pass)] = resolve_problem(shape, overrides, cache_for(config));
  }
  return out;
}

MatmulContext expert_context(const MoeConfig& config, Profiler* profiler,
                             std::vector<GmmCall>* calls) {
  MatmulContext context;
  context.calls = calls;
  context.activation_k_block = config.activation_k_block;
  context.backend = config.backend;
  context.dtype = config.dtype;
  context.quantization = config.quantization;
  context.weight_scaling = config.weight_scaling;
  context.threads = config.threads;
  context.profiler = profiler;
  context.kind = OpKind::kExpertGmm;
  return context;
}

MatmulContext dense_context(const MoeConfig& config, Profiler* profiler, DType dtype,
                            std::vector<GmmCall>* calls) {
  MatmulContext context = expert_context(config, profiler, calls);
  context.dtype = dtype;
  context.quantization.reset();
  context.kind = OpKind::kDenseGmm;
  return context;
}

}  // namespace raggemm::moe
