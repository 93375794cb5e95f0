// The equivalence suite: cases, the pairwise subset, running a case against
// the dense reference, bounds, what-ran checks, the table.
#include "train/equivalence.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <set>

#include "moe/plans.h"
#include "raggemm/comm.h"
#include "raggemm/error.h"

namespace raggemm::train {
namespace {

using moe::GmmCall;
using moe::MoeConfig;
using moe::MoeLayer;
using moe::Param;

const char* const kKernels[] = {"v111", "v112", "v121", "v122", "v211", "v212", "v221", "v222"};
const char* const kDtypes[] = {"f32", "bf16"};
const char* const kQuants[] = {"none", "fp8_channel", "fp8_block128", "int8"};
const char* const kParallels[] = {"p1", "p2_a2a", "p2_ring"};
const char* const kShapes[] = {"small", "mixtral_like", "skewed"};

// Block scales (weights along K, activations per K-block) exist on v2 fwd
// and dlhs only.
bool valid_case(const EquivalenceCase& c) {
  return c.quant != "fp8_block128" || (c.kernels[1] == '2' && c.kernels[2] == '2');
}

std::vector<float> random_floats(int64_t count, uint64_t seed) {
  Param<float> p;
  p.reset("values", {count});
  moe::init_normal(p, seed, 1.0);
  return p.value;
}

double relative_frobenius(const std::vector<float>& got, const std::vector<float>& ref) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = static_cast<double>(got[i]) - static_cast<double>(ref[i]);
    diff += d * d;
    norm += static_cast<double>(ref[i]) * static_cast<double>(ref[i]);
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
}

struct Leaves {
  std::vector<std::string> names;  // out, dx, then the trainable parameters
  std::vector<std::vector<float>> values;
  std::vector<GmmCall> calls;  // this rank's
};

// Skewed routing: positive tokens and gate columns shifted (in logit units
// for a typical token) so that expert 0 is favoured, expert 1 less so, and
// the last two experts are never chosen.
void skew(Param<float>& gate, int64_t embed, int64_t experts, std::vector<float>& x) {
  for (float& v : x) v = std::abs(v);
  const double typical_sum = 0.8 * static_cast<double>(embed);  // E|N(0,1)| * embed
  for (int64_t j = 0; j < experts; ++j) {
    const double logit_shift = j == 0 ? 1.5 : j == 1 ? 0.7 : j >= experts - 2 ? -30.0 : 0.0;
    for (int64_t i = 0; i < embed; ++i)
      gate.value[i * experts + j] += static_cast<float>(logit_shift / typical_sum);
  }
}

Leaves run_layer(const MoeConfig& config, const EquivalenceShape& shape, Communicator* comm) {
  const int ranks = comm_size(comm), rank = comm_rank(comm);
  const int64_t d = shape.embed, tokens = shape.tokens / ranks;
  require(shape.tokens % ranks == 0, "tokens", shape.tokens,
          "must divide by the " + std::to_string(ranks) + " processes");
  std::vector<float> x = random_floats(shape.tokens * d, 31);
  const std::vector<float> probe = random_floats(shape.tokens * d, 32);
  MoeLayer<float> layer("moe", config, nullptr, comm);
  layer.init(3);
  if (shape.skewed) skew(*layer.params()[0], d, shape.experts, x);
  Leaves leaves;
  std::vector<float> out(static_cast<size_t>(tokens * d)), dx(out.size(), 0.0f);
  layer.forward(x.data() + rank * tokens * d, tokens, out.data());
  layer.backward(probe.data() + rank * tokens * d, dx.data());
  leaves.calls = layer.calls();
  const std::vector<int64_t> rows_each(static_cast<size_t>(ranks), tokens);
  auto gather_rows = [&](const std::vector<float>& local) {
    if (ranks == 1) return local;
    std::vector<float> all(static_cast<size_t>(shape.tokens * d));
    comm->allgatherv_rows(local.data(), tokens, all.data(), rows_each.data(), d,
                          comm_type_of<float>());
    return all;
  };
  leaves.names = {"out", "dx"};
  leaves.values = {gather_rows(out), gather_rows(dx)};
  for (Param<float>* p : layer.params()) {
    if (!p->trainable) continue;
    std::vector<float> grad = p->grad;
    if (ranks > 1 && p->expert_sharded) {
      // Each rank holds its experts' complete slice: concatenate.
      grad.resize(p->grad.size() * static_cast<size_t>(ranks));
      const std::vector<int64_t> one_each(static_cast<size_t>(ranks), 1);
      comm->allgatherv_rows(p->grad.data(), 1, grad.data(), one_each.data(), p->size(),
                            comm_type_of<float>());
    } else if (ranks > 1) {
      comm->allreduce_sum(grad.data(), static_cast<int64_t>(grad.size()));  // shares of the batch
    }
    leaves.names.push_back(p->name.substr(p->name.find('.') + 1));
    leaves.values.push_back(std::move(grad));
  }
  return leaves;
}

MoeConfig unquantized(MoeConfig config) {
  config.quantization.reset();
  config.weight_scaling = "channel";
  config.activation_k_block = 0;
  return config;
}

// The dense f32 reference of a shape (same router and weights), once.
const Leaves& reference_for(const MoeConfig& config, const EquivalenceShape& shape) {
  static std::map<std::string, std::unique_ptr<Leaves>> cache;
  MoeConfig dense = unquantized(config);
  dense.sparse_matmul = false;
  dense.capacity_factor = -1;
  dense.dtype = DType::kF32;
  dense.plan = BlockPlan{};
  dense.use_ring_of_experts = false;
  const std::string key = shape.name + "/" + std::to_string(shape.embed) + "x" +
                          std::to_string(shape.mlp) + "x" + std::to_string(shape.experts) + "x" +
                          std::to_string(shape.top_k) + "x" + std::to_string(shape.tokens) +
                          (config.fused_gate_up ? "/fused" : "") + "/shared" +
                          std::to_string(config.shared_experts) + "/router" +
                          std::to_string(static_cast<int>(config.router.score_function)) +
                          std::to_string(config.router.normalize_top_k) +
                          std::to_string(config.router.routed_scaling_factor) +
                          std::to_string(config.router.n_routing_groups) +
                          std::to_string(config.router.topk_routing_group);
  auto& slot = cache[key];
  if (!slot) slot = std::make_unique<Leaves>(run_layer(dense, shape, nullptr));
  return *slot;
}

// What each (pass) of a quantized recipe hands the kernels, written as a
// table here (independently of the layer's own record keeping):
// {lhs type, rhs type, lhs scales, rhs scales}; "W" stands for the weight
// scaling and "A" for the activation scaling.
struct PassStorage {
  const char* lhs_type;
  const char* rhs_type;
  const char* lhs_scales;
  const char* rhs_scales;
};
PassStorage fp8_storage(Pass pass) {
  static const PassStorage table[3] = {{"fp8_e4m3", "fp8_e4m3", "A", "W"},
                                       {"fp8_e5m2", "fp8_e4m3", "row", "W"},
                                       {"fp8_e4m3", "fp8_e5m2", "row", "column"}};
  return table[static_cast<size_t>(pass)];
}

std::string expand(const std::string& code, const MoeConfig& c) {
  if (code == "W") return c.weight_scaling;
  if (code == "A")
    return c.activation_k_block > 0 ? "row+block:" + std::to_string(c.activation_k_block) : "row";
  return code;
}

// Checks every pass of every expert weight against the configuration. An
// auto pass (no kernel set) must run what the plan resolves for the layer's
// rows when those are known here (one process, sparse path); otherwise any
// kernel but the naive loops.
void check_what_ran(const MoeConfig& config, const std::vector<GmmCall>& calls, int64_t rows,
                    std::vector<std::string>& failures, std::string& ran) {
  for (Weight weight : kAllWeights) {
    const int64_t f = config.fused_gate_up ? 2 * config.mlp_dim : config.mlp_dim;
    const moe::PassConfigs resolved =
        rows > 0 ? moe::resolve_expert_passes(
                       config, weight,
                       {rows, config.embed_dim, weight == Weight::kWi ? f : config.mlp_dim})
                 : moe::PassConfigs{};
    for (Pass pass : kAllPasses) {
      std::optional<KernelVersion> asked = config.plan.weight(weight).pass(pass).kernel;
      if (!asked && rows > 0) asked = resolved[static_cast<size_t>(pass)].kernel;
      std::string want_lhs, want_rhs, want_lhs_scales, want_rhs_scales;
      if (!config.quantization) {
        want_lhs = want_rhs = dtype_name(config.dtype);
        want_lhs_scales = want_rhs_scales = "none";
      } else if (config.quantization == QuantRecipe::kInt8) {
        const PassStorage s = fp8_storage(pass);
        want_lhs = want_rhs = "int8";
        want_lhs_scales = expand(s.lhs_scales, config);
        want_rhs_scales = expand(s.rhs_scales, config);
      } else {
        const PassStorage s = fp8_storage(pass);
        want_lhs = s.lhs_type, want_rhs = s.rhs_type;
        want_lhs_scales = expand(s.lhs_scales, config);
        want_rhs_scales = expand(s.rhs_scales, config);
      }
      const std::string label = std::string(weight_name(weight)) + " " + pass_name(pass);
      int seen = 0;
      for (const GmmCall& call : calls) {
        if (call.weight != weight_name(weight) || call.pass != pass) continue;
        if (seen++ == 0) {
          ran += (ran.empty() ? "" : "; ") + label + " " + call.kernel + " " + call.lhs_type + "/" +
                 call.rhs_type + " " + call.lhs_scales + "/" + call.rhs_scales;
        }
        const bool kernel_ok = asked ? call.kernel == kernel_name(*asked) : call.kernel != "naive";
        if (!kernel_ok)
          failures.push_back(call.name + " ran " + call.kernel + ", asked " +
                             (asked ? kernel_name(*asked) : "auto"));
        if (call.lhs_type != want_lhs || call.rhs_type != want_rhs)
          failures.push_back(call.name + " read " + call.lhs_type + "/" + call.rhs_type +
                             ", asked " + want_lhs + "/" + want_rhs);
        if (call.lhs_scales != want_lhs_scales || call.rhs_scales != want_rhs_scales)
          failures.push_back(call.name + " scales " + call.lhs_scales + "/" + call.rhs_scales +
                             ", asked " + want_lhs_scales + "/" + want_rhs_scales);
      }
      if (seen == 0) failures.push_back(label + ": no call recorded");
    }
  }
}

}  // namespace

const std::vector<EquivalenceShape>& equivalence_shapes() {
  static const std::vector<EquivalenceShape> shapes = {
      // K of 256 (wi) and 384 (wo): two and three 128-blocks, so block-wise
      // scales differ from per-channel ones.
      {"small", 256, 384, 8, 2, 160, false},
      // mixtral-8x7b: embed 4096, mlp 14336 (3.5x), 8 experts, top-2.
      {"mixtral_like", 128, 448, 8, 2, 256, false},
      {"skewed", 256, 384, 8, 2, 160, true},
  };
  return shapes;
}

const EquivalenceShape& equivalence_shape(const std::string& name) {
  for (const EquivalenceShape& s : equivalence_shapes()) {
    if (s.name == name) return s;
  }
  fail("--shape", name, "expected small, mixtral_like or skewed");
}

std::string EquivalenceCase::name() const {
  return kernels + "_" + dtype + "_" + quant + "_" + parallel + "_" + shape;
}

std::vector<EquivalenceCase> all_equivalence_cases() {
  std::vector<EquivalenceCase> cases;
  for (const char* shape : kShapes)
    for (const char* parallel : kParallels)
      for (const char* kernels : kKernels)
        for (const char* dtype : kDtypes)
          for (const char* quant : kQuants) {
            EquivalenceCase c{kernels, dtype, quant, parallel, shape};
            if (valid_case(c)) cases.push_back(c);
          }
  return cases;
}

std::vector<EquivalenceCase> pairwise_equivalence_cases() {
  // Greedy covering: repeatedly take the valid case that covers the most
  // pairs (axis a = value, axis b = value) not yet covered, until every pair
  // that some valid case holds is covered.
  const std::vector<EquivalenceCase> all = all_equivalence_cases();
  auto values = [](const EquivalenceCase& c) {
    return std::vector<std::string>{c.kernels, c.dtype, c.quant, c.parallel, c.shape};
  };
  auto pairs_of = [&](const EquivalenceCase& c) {
    const std::vector<std::string> v = values(c);
    std::vector<std::string> out;
    for (size_t a = 0; a < v.size(); ++a)
      for (size_t b = a + 1; b < v.size(); ++b)
        out.push_back(std::to_string(a) + v[a] + "|" + std::to_string(b) + v[b]);
    return out;
  };
  std::set<std::string> uncovered;
  for (const EquivalenceCase& c : all)
    for (const std::string& p : pairs_of(c)) uncovered.insert(p);
  std::vector<EquivalenceCase> chosen;
  while (!uncovered.empty()) {
    size_t best = 0, best_gain = 0;
    for (size_t i = 0; i < all.size(); ++i) {
      size_t gain = 0;
      for (const std::string& p : pairs_of(all[i])) gain += uncovered.count(p);
      if (gain > best_gain) best = i, best_gain = gain;
    }
    for (const std::string& p : pairs_of(all[best])) uncovered.erase(p);
    chosen.push_back(all[best]);
  }
  return chosen;
}

MoeConfig equivalence_config(const EquivalenceCase& c, const EquivalenceShape& shape) {
  MoeConfig config;
  config.embed_dim = shape.embed;
  config.mlp_dim = shape.mlp;
  config.router.num_experts = shape.experts;
  config.router.top_k = shape.top_k;
  config.router.load_balance_loss_weight = 0.01;
  require(c.kernels.size() == 4 && c.kernels[0] == 'v', "kernels", c.kernels,
          "expected vXYZ with X, Y, Z in {1, 2}");
  for (Pass pass : kAllPasses) {
    const char generation = c.kernels[1 + static_cast<size_t>(pass)];
    require(generation == '1' || generation == '2', "kernels", c.kernels,
            "expected vXYZ with X, Y, Z in {1, 2}");
    for (Weight weight : kAllWeights)
      config.plan.weight(weight).pass(pass).kernel =
          generation == '2' ? KernelVersion::kV2 : KernelVersion::kV1;
  }
  config.dtype = c.dtype == "bf16" ? DType::kBF16 : DType::kF32;
  if (c.quant == "fp8_channel") {
    config.quantization = QuantRecipe::kFp8;
  } else if (c.quant == "fp8_block128") {
    // DeepSeek-V3's recipe: activations per token and 128-wide K-block,
    // weights per 128-long K-block and output column.
    config.quantization = QuantRecipe::kFp8;
    config.weight_scaling = "block:128";
    config.activation_k_block = 128;
  } else if (c.quant == "int8") {
    config.quantization = QuantRecipe::kInt8;
  }
  config.use_ring_of_experts = c.parallel == "p2_ring";
  moe::validate(config);
  return config;
}

// Ours, tighter than the (1e-5 f32, 0.012 bf16, 0.22 fp8, 0.05
// int8), from the largest leaf error of `raggemm equivalence --all` at
// P = 1 and 2 (docs/equivalence.md): f32 5.2e-7, bf16 5.2e-3, fp8 0.122
// (channel; block:128 0.094), int8 0.029.
double equivalence_upper_bound(const MoeConfig& config) {
  if (config.quantization == QuantRecipe::kInt8) return 0.04;
  if (config.quantization) return 0.16;
  return config.dtype == DType::kBF16 ? 8e-3 : 2e-6;
}

// The smallest distance of a quantized output from its unquantized run in
// the same measurement: fp8 0.062, int8 0.023. A skipped quantization gives 0.
double equivalence_lower_bound(const MoeConfig& config) {
  if (!config.quantization) return 0;
  return config.quantization == QuantRecipe::kInt8 ? 0.01 : 0.02;
}

EquivalenceResult run_equivalence(const std::string& name, const MoeConfig& config,
                                  const EquivalenceShape& shape, Communicator* comm) {
  EquivalenceResult result;
  result.name = name;
  result.upper = equivalence_upper_bound(config);
  result.lower = equivalence_lower_bound(config);
  const Leaves& reference = reference_for(config, shape);
  const Leaves got = run_layer(config, shape, comm);
  require(got.names == reference.names, "config", name,
          "its parameters differ from the reference's");
  for (size_t i = 0; i < got.values.size(); ++i) {
    const double error = relative_frobenius(got.values[i], reference.values[i]);
    result.leaves.push_back({got.names[i], error});
    if (!(error <= result.upper)) {
      char text[160];
      std::snprintf(text, sizeof(text), "%s: %.3e above the bound %.1e", got.names[i].c_str(),
                    error, result.upper);
      result.failures.push_back(text);
    }
  }
  if (config.quantization) {
    const Leaves plain = run_layer(unquantized(config), shape, comm);
    result.quant_gap = relative_frobenius(got.values[0], plain.values[0]);
    if (!(result.quant_gap >= result.lower)) {
      char text[160];
      std::snprintf(text, sizeof(text),
                    "out differs from the unquantized run by %.3e, below %.1e: no quantization?",
                    result.quant_gap, result.lower);
      result.failures.push_back(text);
    }
  }
  std::vector<std::string> ran_failures;
  const bool rows_known = comm_size(comm) == 1 && config.sparse_matmul;
  check_what_ran(config, got.calls, rows_known ? shape.tokens * shape.top_k : 0, ran_failures,
                 result.ran);
  if (comm && comm->size() > 1) {
    // Every rank checked its own calls: all must agree that all passed.
    int64_t failed = ran_failures.empty() ? 0 : 1;
    comm->allreduce_sum(&failed, 1);
    if (failed > 0 && ran_failures.empty())
      ran_failures.push_back(std::to_string(failed) + " other rank(s) ran something else");
  }
  for (std::string& f : ran_failures) result.failures.push_back(std::move(f));
  return result;
}

EquivalenceResult run_equivalence(const EquivalenceCase& c, Communicator* comm) {
  require(comm_size(comm) == c.ranks(), "parallel", c.parallel,
          "needs " + std::to_string(c.ranks()) + " process(es), this launch has " +
              std::to_string(comm_size(comm)));
  const EquivalenceShape& shape = equivalence_shape(c.shape);
  return run_equivalence(c.name(), equivalence_config(c, shape), shape, comm);
}

std::string equivalence_header() {
  return "case                                   out       dx        gate      wi_0      wi_1      "
         "wo        bound    q-gap(min)         result";
}

std::string equivalence_row(const EquivalenceResult& r) {
  char text[512];
  std::string line;
  std::snprintf(text, sizeof(text), "%-38s", r.name.c_str());
  line += text;
  for (const LeafError& leaf : r.leaves) {
    std::snprintf(text, sizeof(text), " %-9.2e", leaf.error);
    line += text;
  }
  std::snprintf(text, sizeof(text), " %-8.1e", r.upper);
  line += text;
  if (r.lower > 0) {
    std::snprintf(text, sizeof(text), " %.2e(%.0e)", r.quant_gap, r.lower);
  } else {
    std::snprintf(text, sizeof(text), " %-15s", "-");
  }
  line += text;
  line += r.passed() ? "  PASS" : "  FAIL";
  for (const std::string& f : r.failures) line += "\n    " + f;
  return line;
}

}  // namespace raggemm::train
