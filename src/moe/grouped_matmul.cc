// Grouped-matmul passes for the MoE layer: the public ops for float, the
// oracle's double-accumulation loops for the reference backend and for double.
#include "moe/grouped_matmul.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "core/float_bits.h"
#include "core/group_offsets.h"
#include "kernels/reference.h"  // the oracle (moves with the reference backend)
#include "kernels/workspace.h"
#include "raggemm/error.h"
#include "raggemm/gmm.h"
#include "raggemm/quant.h"

namespace raggemm::moe {
namespace {

std::vector<int64_t> row_starts(const GroupedProblem& problem) {
  return group_row_starts(std::span(problem.group_sizes, static_cast<size_t>(problem.groups)));
}

double pass_flops(const GroupedProblem& problem) {
  return 2.0 * static_cast<double>(covered_rows(problem)) * static_cast<double>(problem.k) *
         static_cast<double>(problem.n);
}

// The weight a call belongs to, from its name: the plan's weight for
// expert and dense-MLP matmuls ("moe/wi_0/fwd", "moe/wi/fwd" -> "wi";
// "mlp/wo/dlhs" -> "wo"), else the op's own name ("router/fwd" -> "router").
std::string weight_of(const char* name) {
  const std::string text(name);
  const size_t first = text.find('/');
  const size_t second = first == std::string::npos ? first : text.find('/', first + 1);
  if (second == std::string::npos) return text.substr(0, first);
  const std::string part = text.substr(first + 1, second - first - 1);
  if (part.rfind("wi", 0) == 0) return "wi";
  if (part.rfind("wo", 0) == 0) return "wo";
  return part;
}

// A GMM event's trace args (raggemm/profiler.h); `reference`: the naive
// loops ran (the reference backend, T = double, or a matmul too narrow for a
// tiled kernel).
void annotate(Profiler::Scope& scope, const char* name, Pass pass,
              const ResolvedPassConfig& config, const GroupedProblem& p, bool reference,
              const char* stage = nullptr) {
  annotate_gmm(scope, pass, weight_of(name), reference ? nullptr : &config, p.m, p.k, p.n,
               p.weight_groups());
  if (stage) scope.arg("stage", stage);
}

// ---------------------------------------------------------------------------
// The call log: what each call hands to the kernels, derived from the very
// options the op receives, so a selection bug shows in the record.

// Non-expert matmuls are logged as "dense".
std::string weight_of(const MatmulContext& context, const char* name) {
  return context.kind == OpKind::kExpertGmm ? weight_of(name) : "dense";
}

// Naive loops read the caller's T as it is: `naive_type` names it. A
// bf16-stored weight reaches the kernels as bf16 whatever the compute dtype:
// `rhs_type` names it then.
void log_call(const MatmulContext& context, const char* name, Pass pass, const char* kernel,
              const QuantGmmOptions* quant, const char* naive_type = nullptr,
              const char* rhs_type = nullptr, const char* stage = nullptr) {
  if (!context.calls) return;
  GmmCall call;
  call.name = name;
  if (stage) call.stage = stage;
  call.weight = weight_of(context, name);
  call.pass = pass;
  call.kernel = kernel;
  if (!quant) {
    call.lhs_type = call.rhs_type = naive_type ? naive_type : dtype_name(context.dtype);
    if (rhs_type) call.rhs_type = rhs_type;
    call.lhs_scales = call.rhs_scales = "none";
  } else {
    const std::string operand = quant_type_name(recipe_operand_type(quant->recipe));
    const std::string gradient = quant_type_name(recipe_gradient_type(quant->recipe));
    const std::string weight_scales = quant->rhs_scaling.block()
                                          ? "block:" + std::to_string(quant->rhs_scaling.block_size)
                                          : "channel";
    switch (pass) {
      case Pass::kForward:
        call.lhs_type = operand, call.rhs_type = operand;
        call.lhs_scales =
            quant->lhs_k_block > 0 ? "row+block:" + std::to_string(quant->lhs_k_block) : "row";
        call.rhs_scales = weight_scales;
        break;
      case Pass::kGradLhs:
        call.lhs_type = gradient, call.rhs_type = operand;
        call.lhs_scales = "row", call.rhs_scales = weight_scales;
        break;
      case Pass::kGradRhs:  // lhs [M,K] per row (folded into dout), dout per column
        call.lhs_type = operand, call.rhs_type = gradient;
        call.lhs_scales = "row", call.rhs_scales = "column";
        break;
    }
  }
  context.calls->push_back(std::move(call));
}

const char* kernel_label(KernelVersion kernel) {
  return kernel == KernelVersion::kV2 ? "v2" : "v1";
}

// ---------------------------------------------------------------------------
// The oracle's loops (kernels/reference.h) on plain T buffers, f64
// accumulation: the reference backend, and all of T = double.

template <class T>
void naive_forward(const GroupedProblem& p, const T* x, const T* w, T* out, bool parallel = true) {
  const std::vector<int64_t> starts = row_starts(p);
  const kernels::ReferenceGroups groups{starts.data(), p.group_offset, p.weight_groups()};
  kernels::reference_gmm_rows(
      groups, p.m, p.k, p.n,
      [&](int64_t i, int64_t kk) { return static_cast<double>(x[i * p.k + kk]); },
      [&](int64_t g, int64_t kk, int64_t j) {
        return static_cast<double>(w[(g * p.k + kk) * p.n + j]);
      },
      [&](int64_t i, int64_t, const double* acc) {
        for (int64_t j = 0; j < p.n; ++j) out[i * p.n + j] = static_cast<T>(acc[j]);
      },
      parallel);
}

// dx[i] = dy[i] @ w[g]^T: the oracle's rows with the contraction over n.
template <class T>
void naive_grad_lhs(const GroupedProblem& p, const T* dy, const T* w, T* dx, bool parallel = true) {
  const std::vector<int64_t> starts = row_starts(p);
  const kernels::ReferenceGroups groups{starts.data(), p.group_offset, p.weight_groups()};
  kernels::reference_gmm_rows(
      groups, p.m, p.n, p.k,
      [&](int64_t i, int64_t j) { return static_cast<double>(dy[i * p.n + j]); },
      [&](int64_t g, int64_t j, int64_t kk) {
        return static_cast<double>(w[(g * p.k + kk) * p.n + j]);
      },
      [&](int64_t i, int64_t, const double* acc) {
        for (int64_t kk = 0; kk < p.k; ++kk) dx[i * p.k + kk] = static_cast<T>(acc[kk]);
      },
      parallel);
}

template <class T>
void naive_grad_rhs(const GroupedProblem& p, const T* x, const T* dy, T* dw, bool parallel = true) {
  const std::vector<int64_t> starts = row_starts(p);
  const kernels::ReferenceGroups groups{starts.data(), p.group_offset, p.weight_groups()};
  kernels::reference_tgmm_groups(
      groups, p.k, p.n, [&](int64_t i, int64_t kk) { return static_cast<double>(x[i * p.k + kk]); },
      [&](int64_t i, int64_t j) { return static_cast<double>(dy[i * p.n + j]); },
      [&](int64_t g, int64_t kk, const double* acc) {
        for (int64_t j = 0; j < p.n; ++j) dw[(g * p.k + kk) * p.n + j] = static_cast<T>(acc[j]);
      },
      parallel);
}

// ---------------------------------------------------------------------------
// The public ops.

// This thread's bf16 copy buffers for the casts of one op call (slot 0: the
// lhs or x, slot 1: the weight or dy), grown on demand and kept: a fresh
// zero-initialized Tensor per cast zeroed and faulted in its pages every call,
// and the 45 casts of a bf16 training step (configs/base.yml dtype=bf16
// weight_dtype=bf16) took 26 ms of its 95 (trace's cast_bf16, Xeon model 167).
// They hold at most the largest activation of the model, per calling thread.
uint16_t* cast_buffer(int slot, int64_t count) {
  thread_local std::array<kernels::ScratchBuffer, 2> buffers;
  try {
    const int64_t floats = (count + 1) / 2;  // two bf16 a float
    return reinterpret_cast<uint16_t*>(buffers.at(static_cast<size_t>(slot)).at_least(floats));
  } catch (const std::bad_alloc&) {
    fail("dtype", "bf16", "out of memory for a cast of " + std::to_string(count));
  }
}

// bits[0:count] = bf16 of data[0:count]. core::bf16_bits_of inline, so the
// loop vectorizes: the out-of-line f32_to_bf16 call per element made this
// cast 39% of a bf16 training step (configs/base.yml dtype=bf16, trace's
// cast_bf16).
void cast_to_bf16(const float* data, int64_t count, uint16_t* bits) {
#pragma omp parallel for schedule(static) if (count > 65536)
  for (int64_t i = 0; i < count; ++i) bits[i] = core::bf16_bits_of(data[i]);
}

// A view of `count` floats as the context's dtype: the buffer itself for
// f32; for bf16 an activation's memoized copy (the context's CastMemo),
// else a copy in this thread's cast buffer `slot` (valid until the next cast
// into that slot). Weights are never memoized: a gathered (FSDP) weight may
// reuse one buffer for another weight within the step.
enum class Source { kActivation, kWeight };
TensorView as_dtype(const MatmulContext& context, const float* data, Shape shape, int slot,
                    Source source = Source::kActivation) {
  const DType dtype = context.dtype;
  if (dtype == DType::kF32) return TensorView(DType::kF32, std::move(shape), data);
  require(dtype == DType::kBF16, "dtype", dtype_name(dtype), "GMM inputs must be f32 or bf16");
  const int64_t count = checked_numel(shape, "shape");
  if (context.casts && source == Source::kActivation) {
    return TensorView(DType::kBF16, std::move(shape), context.casts->cast(data, count));
  }
  uint16_t* bits = cast_buffer(slot, count);
  cast_to_bf16(data, count, bits);
  return TensorView(DType::kBF16, std::move(shape), bits);
}

}  // namespace

const uint16_t* CastMemo::cast(const float* src, int64_t count) {
  Entry* free = nullptr;
  for (Entry& e : entries_) {
    if (e.src == src && e.count == count) return e.bits.data();
    // A free entry already big enough if one comes first, else the
    // largest so far: the buffers grow as little as they can.
    if (!e.src && (!free || (free->bits.size() < static_cast<size_t>(count) &&
                             e.bits.size() > free->bits.size()))) {
      free = &e;
    }
  }
  if (!free) free = &entries_.emplace_back();
  if (free->bits.size() < static_cast<size_t>(count)) free->bits.resize(static_cast<size_t>(count));
  free->src = src;
  free->count = count;
  cast_to_bf16(src, count, free->bits.data());
  return free->bits.data();
}

void CastMemo::clear() {
  for (Entry& e : entries_) e.src = nullptr;
}

namespace {

QuantGmmOptions quant_options(const MatmulContext& context, Pass pass) {
  QuantGmmOptions options;
  options.recipe = *context.quantization;
  options.rhs_scaling = parse_rhs_scaling(context.weight_scaling, "quantization_weight_scaling");
  // Activation K-blocks exist in the fwd pass only (the op's contract).
  if (pass == Pass::kForward) options.lhs_k_block = context.activation_k_block;
  return options;
}


// The scope covers the op call only: casting to bf16 is glue, timed apart.
void ops_gmm(const MatmulContext& context, const ResolvedPassConfig& config, Pass pass,
             const char* name, const GroupedProblem& p, const float* lhs, int64_t lhs_cols,
             WeightRef w, float* out, bool swiglu,
             const std::optional<SwigluForwardStage>& forward_stage = std::nullopt,
             const std::optional<SwigluBackwardStage>& backward_stage = std::nullopt) {
  const TensorView sizes(DType::kI32, Shape{p.groups}, p.group_sizes);
  GmmOptions options = gmm_options(config, pass);
  options.transpose_rhs = pass == Pass::kGradLhs;
  options.threads = context.threads;
  options.fuse_swiglu = swiglu;
  options.group_offset = p.group_offset;
  options.local_groups = p.local_groups;
  const int64_t out_cols = pass == Pass::kGradLhs ? p.k : (swiglu ? p.n / 2 : p.n);
  options.swiglu_forward_stage = forward_stage;
  options.swiglu_backward_stage = backward_stage;
  const char* stage_name = forward_stage    ? "swiglu_forward"
                           : backward_stage ? "swiglu_backward"
                                            : nullptr;
  if (context.quantization) {
    const TensorView lhs_view(DType::kF32, Shape{p.m, lhs_cols}, lhs);
    // The quantizer reads f32 and bf16 alike: a bf16 weight is quantized from its storage.
    const TensorView w_view(w.dtype, Shape{p.weight_groups(), p.k, p.n}, w.data);
    const QuantGmmOptions quant = quant_options(context, pass);
    // Block-wise scales along the contracted K (fwd) need a tile k the block
    // divides; a tile that the cache or heuristic chose is rounded up to it
    // (the op refuses only an explicit tile that does not fit).
    const int64_t k_block =
        pass == Pass::kForward ? std::max(quant.rhs_scaling.block_size, quant.lhs_k_block) : 0;
    if (k_block > 0 && config.source.k != PlanSource::kExplicit && options.tiles.k % k_block != 0)
      options.tiles.k = std::min(p.k, (options.tiles.k + k_block - 1) / k_block * k_block);
    log_call(context, name, pass, kernel_label(options.kernel), &quant, nullptr, nullptr,
             stage_name);
    auto scope = profile(context.profiler, name, context.kind, pass_flops(p));
    annotate(scope, name, pass, config, p, /*reference=*/false, stage_name);
    options.quantize = quant;  // the same op as unquantized, written in place
    gmm_into(lhs_view, w_view, sizes, TensorView(DType::kF32, Shape{p.m, out_cols}, out), options);
    return;
  }
  log_call(context, name, pass, kernel_label(options.kernel), nullptr, nullptr,
           w.dtype == DType::kBF16 ? dtype_name(DType::kBF16) : nullptr, stage_name);
  TensorView lhs_view, w_view;
  {
    auto cast_scope = profile(context.profiler, "cast_bf16", OpKind::kGlue);
    lhs_view = as_dtype(context, lhs, Shape{p.m, lhs_cols}, 0);
    // A bf16-stored weight is handed over as it is (with an f32 lhs the
    // kernels widen it as they pack); an f32 one is cast to the compute dtype.
    w_view = w.dtype == DType::kBF16
                 ? TensorView(DType::kBF16, Shape{p.weight_groups(), p.k, p.n}, w.data)
                 : as_dtype(context, static_cast<const float*>(w.data),
                            Shape{p.weight_groups(), p.k, p.n}, 1, Source::kWeight);
  }
  auto scope = profile(context.profiler, name, context.kind, pass_flops(p));
  annotate(scope, name, pass, config, p, /*reference=*/false, stage_name);
  gmm_into(lhs_view, w_view, sizes, TensorView(DType::kF32, Shape{p.m, out_cols}, out), options);
}

// The naive loops read f32: a bf16-stored weight is widened into `workspace`
// once per call (the router's [embed, E] gate and the reference backend; no
// kernel path is lost, these loops have no bf16 variant).
const float* f32_weight(WeightRef w, int64_t count, std::vector<float>& workspace) {
  if (w.dtype == DType::kF32) return static_cast<const float*>(w.data);
  require(w.dtype == DType::kBF16, "weight", dtype_name(w.dtype), "must be f32 or bf16");
  workspace.resize(static_cast<size_t>(count));
  const uint16_t* bits = static_cast<const uint16_t*>(w.data);
  for (int64_t i = 0; i < count; ++i) workspace[i] = bf16_to_f32(bits[i]);
  return workspace.data();
}

}  // namespace

// Matmuls with a dimension this narrow (the router's [embed, E]) are a poor
// fit for any tiled kernel and too small to be worth a parallel region: a
// serial loop takes about a millisecond.
bool tiny(const MatmulContext& context, const GroupedProblem& p) {
  return context.kind == OpKind::kDenseGmm && std::min(p.k, p.n) < 32;
}

// The naive loops go parallel only when there is enough work to pay for
// the region (the f64 gradient tests run thousands of tiny calls).
bool worth_parallel(const GroupedProblem& p) { return pass_flops(p) >= 1e6; }

int64_t covered_rows(const GroupedProblem& problem) {
  int64_t rows = 0;
  for (int64_t g = 0; g < problem.weight_groups(); ++g) {
    rows += problem.group_sizes[problem.group_offset + g];
  }
  return rows;
}

namespace {

// A call on the oracle's loops: logged as "naive" with the caller's element
// type, profiled and annotated as a reference GMM event around `loops`.
template <class Loops>
void run_naive(const MatmulContext& context, const ResolvedPassConfig& config, const char* name,
               Pass pass, const GroupedProblem& p, const char* type, Loops loops) {
  log_call(context, name, pass, "naive", nullptr, type);
  auto scope = profile(context.profiler, name, context.kind, pass_flops(p));
  annotate(scope, name, pass, config, p, /*reference=*/true);
  loops();
}

bool naive_for(const MatmulContext& context, const GroupedProblem& p) {
  return context.backend == MatmulBackend::kReference || tiny(context, p);
}

// fwd (`in` is x [M,K], out [M,N]) or dlhs (`in` is dy [M,N], out dx [M,K]).
template <class T>
void naive_gmm_pass(Pass pass, const GroupedProblem& p, const T* in, const T* w, T* out,
                    bool parallel) {
  if (pass == Pass::kForward) return naive_forward(p, in, w, out, parallel);
  naive_grad_lhs(p, in, w, out, parallel);
}

// An f32 fwd or dlhs pass: the oracle's loops on the reference backend and
// for tiny matmuls (a bf16 weight widened first), else the public op.
void float_gmm_pass(const MatmulContext& context, const ResolvedPassConfig& config,
                    const char* name, Pass pass, const GroupedProblem& p, const float* in,
                    WeightRef w, float* out) {
  if (naive_for(context, p)) {
    std::vector<float> workspace;
    const float* wf = f32_weight(w, p.weight_groups() * p.k * p.n, workspace);
    return run_naive(context, config, name, pass, p, "f32", [&] {
      naive_gmm_pass(pass, p, in, wf, out,
                     context.backend == MatmulBackend::kReference && worth_parallel(p));
    });
  }
  ops_gmm(context, config, pass, name, p, in, pass == Pass::kForward ? p.k : p.n, w, out, false);
}

void double_gmm_pass(const MatmulContext& context, const ResolvedPassConfig& config,
                     const char* name, Pass pass, const GroupedProblem& p, const double* in,
                     const double* w, double* out) {
  run_naive(context, config, name, pass, p, "f64",
            [&] { naive_gmm_pass(pass, p, in, w, out, worth_parallel(p)); });
}

}  // namespace

template <>
void grouped_forward<float>(const MatmulContext& context, const ResolvedPassConfig& config,
                            const char* name, const GroupedProblem& p, const float* x,
                            WeightRef w, float* out) {
  float_gmm_pass(context, config, name, Pass::kForward, p, x, w, out);
}

template <>
void grouped_forward<double>(const MatmulContext& context, const ResolvedPassConfig& config,
                             const char* name, const GroupedProblem& p, const double* x,
                             const double* w, double* out) {
  double_gmm_pass(context, config, name, Pass::kForward, p, x, w, out);
}

void grouped_forward_swiglu(const MatmulContext& context, const ResolvedPassConfig& config,
                            const char* name, const GroupedProblem& p, const float* x,
                            WeightRef w, float* out) {
  require(context.backend == MatmulBackend::kOps && !context.quantization, "fused_gate_up",
          "true", "the fused SwiGLU forward needs the unquantized ops backend");
  ops_gmm(context, config, Pass::kForward, name, p, x, p.k, w, out, true);
}

bool swiglu_stage_runs(const MatmulContext& context) {
  return context.backend == MatmulBackend::kOps && context.kind == OpKind::kExpertGmm;
}

namespace {

void require_swiglu_stage_runs(const MatmulContext& context) {
  require(swiglu_stage_runs(context), "swiglu_in_gmm", "true",
          "the SwiGLU stage runs in the ops backend's expert GMMs (the layer takes the separate "
          "pass elsewhere)");
}

// A stage buffer: f32 [rows, cols].
TensorView f32_matrix(const float* data, int64_t rows, int64_t cols) {
  return TensorView(DType::kF32, Shape{rows, cols}, data);
}

}  // namespace

void grouped_forward_with_swiglu(const MatmulContext& context, const ResolvedPassConfig& config,
                                 const char* name, const GroupedProblem& p, const float* x,
                                 WeightRef w, const float* gate, float* up, float* act) {
  require_swiglu_stage_runs(context);
  const SwigluForwardStage stage{f32_matrix(gate, p.m, p.n), f32_matrix(act, p.m, p.n)};
  ops_gmm(context, config, Pass::kForward, name, p, x, p.k, w, up, false, stage);
}

void grouped_grad_lhs_with_swiglu(const MatmulContext& context, const ResolvedPassConfig& config,
                                  const char* name, const GroupedProblem& p, const float* dy,
                                  WeightRef w, const float* gate, const float* up, float* dact,
                                  float* dgate, float* dup) {
  require_swiglu_stage_runs(context);
  // dlhs writes [M, K] (the weight's rows).
  const SwigluBackwardStage stage{f32_matrix(gate, p.m, p.k), f32_matrix(up, p.m, p.k),
                                  f32_matrix(dgate, p.m, p.k), f32_matrix(dup, p.m, p.k)};
  ops_gmm(context, config, Pass::kGradLhs, name, p, dy, p.n, w, dact, false, std::nullopt, stage);
}

template <>
void grouped_grad_lhs<float>(const MatmulContext& context, const ResolvedPassConfig& config,
                             const char* name, const GroupedProblem& p, const float* dy,
                             WeightRef w, float* dx) {
  float_gmm_pass(context, config, name, Pass::kGradLhs, p, dy, w, dx);
}

template <>
void grouped_grad_lhs<double>(const MatmulContext& context, const ResolvedPassConfig& config,
                              const char* name, const GroupedProblem& p, const double* dy,
                              const double* w, double* dx) {
  double_gmm_pass(context, config, name, Pass::kGradLhs, p, dy, w, dx);
}

template <>
void grouped_grad_rhs<float>(const MatmulContext& context, const ResolvedPassConfig& config,
                             const char* name, const GroupedProblem& p, const float* x,
                             const float* dy, float* dw) {
  if (naive_for(context, p)) {
    return run_naive(context, config, name, Pass::kGradRhs, p, "f32", [&] {
      naive_grad_rhs(p, x, dy, dw, context.backend == MatmulBackend::kReference && worth_parallel(p));
    });
  }
  const TensorView sizes(DType::kI32, Shape{p.groups}, p.group_sizes);
  TgmmOptions options = tgmm_options(config);
  options.threads = context.threads;
  options.group_offset = p.group_offset;
  options.local_groups = p.local_groups;
  const TensorView out(DType::kF32, Shape{p.weight_groups(), p.k, p.n}, dw);
  if (context.quantization) {
    const QuantGmmOptions quant = quant_options(context, Pass::kGradRhs);
    log_call(context, name, Pass::kGradRhs, kernel_label(options.kernel), &quant);
    auto scope = profile(context.profiler, name, context.kind, pass_flops(p));
    annotate(scope, name, Pass::kGradRhs, config, p, /*reference=*/false);
    options.quantize = quant;  // the same op as unquantized, written in place
    tgmm_into(TensorView(DType::kF32, Shape{p.m, p.k}, x), TensorView(DType::kF32, Shape{p.m, p.n}, dy),
              sizes, out, options);
    return;
  }
  log_call(context, name, Pass::kGradRhs, kernel_label(options.kernel), nullptr);
  TensorView x_view, dy_view;
  {
    auto cast_scope = profile(context.profiler, "cast_bf16", OpKind::kGlue);
    x_view = as_dtype(context, x, Shape{p.m, p.k}, 0);
    dy_view = as_dtype(context, dy, Shape{p.m, p.n}, 1);
  }
  auto scope = profile(context.profiler, name, context.kind, pass_flops(p));
  annotate(scope, name, Pass::kGradRhs, config, p, /*reference=*/false);
  tgmm_into(x_view, dy_view, sizes, out, options);
}

template <>
void grouped_grad_rhs<double>(const MatmulContext& context, const ResolvedPassConfig& config,
                              const char* name, const GroupedProblem& p, const double* x,
                              const double* dy, double* dw) {
  run_naive(context, config, name, Pass::kGradRhs, p, "f64",
            [&] { naive_grad_rhs(p, x, dy, dw, worth_parallel(p)); });
}

}  // namespace raggemm::moe
