// The crossings that make the case table (case_table.h). Full products of
// every axis would be tens of thousands of cases; the table is a union of
// products, each chosen so every value of every axis meets the values it
// interacts with:
//   core:     pass x storage x backend x ISA x group pattern (every pattern
//             on the best ISA, two on the others), no output stage; plus the
//             int8 and bf16 microkernels forced one by one;
//   epilogue: fwd and dlhs x four storages x backend x every output stage x
//             three ISAs (tgmm has no output stage: listed as not expressible);
//   patterns: every empty/non-empty pattern of G = 1..4 groups x pass x
//             backend x storage (f32 and int8 at every G, bf16 and fp8 to G=3).
// Refused combinations are one case each (best ISA, one pattern): the
// refusal does not depend on the ISA or the groups.
#include "cases/case_table.h"

#include <hwy/targets.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>

#include "cases/case_backend.h"
#include "kernels/bf16_microkernel.h"
#include "kernels/int8_microkernel.h"
#include "kernels/microkernel.h"
#include "kernels/microkernel_registry.h"

namespace raggemm::cases {

const char* pass_name(CasePass pass) {
  switch (pass) {
    case CasePass::kFwd:
      return "fwd";
    case CasePass::kDlhs:
      return "dlhs";
    case CasePass::kDrhs:
      return "drhs";
  }
  return "?";
}

const char* epilogue_name(Epilogue epilogue) {
  switch (epilogue) {
    case Epilogue::kNone:
      return "none";
    case Epilogue::kSwiglu:
      return "swiglu";
    case Epilogue::kColScale:
      return "colscale";
    case Epilogue::kBias:
      return "bias";
    case Epilogue::kRowScale:
      return "rowscale";
    case Epilogue::kAll:
      return "all";
  }
  return "?";
}

std::string Case::id() const {
  std::ostringstream s;
  s << pass_name(pass) << "/" << storage.name << "/" << backend << "/" << isa.name << "/"
    << epilogue_name(epilogue) << "/" << groups.name << "/M" << m << "K" << k << "N" << n << "G"
    << num_groups();
  return s.str();
}

std::string Case::test_name() const {
  std::string name = id();
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

double Case::flops() const {
  const int64_t first = groups.local_groups < 0 ? 0 : groups.group_offset;
  const int64_t last = groups.local_groups < 0 ? num_groups() : first + groups.local_groups;
  int64_t rows = 0;
  for (int64_t g = first; g < last; ++g) rows += groups.sizes[static_cast<size_t>(g)];
  return 2.0 * double(rows) * double(k) * double(n);
}

namespace {

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

Storage plain(const char* name, DType dtype) {
  Storage s;
  s.name = name;
  s.dtype = dtype;
  return s;
}

Storage quantized(QuantRecipe recipe, Storage::RhsScales rhs, int64_t block, int64_t lhs_k_block) {
  Storage s;
  s.recipe = recipe;
  s.rhs_scales = rhs;
  s.block = block;
  s.lhs_k_block = lhs_k_block;
  s.name = quant_recipe_name(recipe);
  if (rhs == Storage::RhsScales::kTensor) s.name += "-tensor";
  if (rhs == Storage::RhsScales::kBlock) s.name += "-block" + std::to_string(block);
  if (lhs_k_block > 0) s.name += "-lhsblock" + std::to_string(lhs_k_block);
  return s;
}

// Every storage and scale layout the quantized API can express: lhs per
// row (or per row and K-block), weight per expert and column, per tensor
// (a weight quantized by the caller), or per K-block.
std::vector<Storage> all_storages() {
  std::vector<Storage> all = {plain("f32", DType::kF32), plain("bf16", DType::kBF16)};
  for (QuantRecipe recipe : {QuantRecipe::kFp8, QuantRecipe::kInt8}) {
    all.push_back(quantized(recipe, Storage::RhsScales::kChannel, 0, 0));
    all.push_back(quantized(recipe, Storage::RhsScales::kTensor, 0, 0));
    all.push_back(quantized(recipe, Storage::RhsScales::kBlock, 32, 0));
    all.push_back(quantized(recipe, Storage::RhsScales::kChannel, 0, 32));
  }
  return all;
}

Storage storage_named(const std::string& name) {
  for (const Storage& s : all_storages()) {
    if (s.name == name) return s;
  }
  return {};
}

// Sizes of G groups over M rows, by pattern; all deterministic.
Groups make_groups(const std::string& name, int64_t m, int64_t g) {
  Groups groups;
  groups.name = name;
  std::vector<double> weight(static_cast<size_t>(g), 1.0);
  double covered = 1.0;
  if (name == "empty:0.4") {  // round(0.4 G) groups empty, not the last
    const int64_t empty = std::min<int64_t>(g - 1, std::llround(0.4 * double(g)));
    for (int64_t e = 0; e < empty; ++e) weight[static_cast<size_t>(1 + 2 * e) % g] = 0.0;
  } else if (name == "partial") {  // sum(group_sizes) = 3/4 M, one group empty
    covered = 0.75;
    for (int64_t i = 0; i < g; ++i) weight[static_cast<size_t>(i)] = 1.0 + double((i * 3) % 4);
    if (g > 1) weight[1] = 0.0;
  } else if (name == "zipf:1.5") {  // rank r gets 1/r^1.5, ranks shuffled
    for (int64_t i = 0; i < g; ++i) {
      weight[static_cast<size_t>(i)] = 1.0 / std::pow(double((i * 3) % g + 1), 1.5);
    }
  } else if (name == "ep:1+2") {  // the rhs holds groups 1 and 2, group 1 empty
    if (g > 1) weight[1] = 0.0;
    groups.group_offset = std::min<int64_t>(1, g - 1);
    groups.local_groups = std::min<int64_t>(2, g - groups.group_offset);
  }
  double total = 0;
  for (double w : weight) total += w;
  const int64_t rows = static_cast<int64_t>(std::floor(covered * double(m)));
  int64_t given = 0;
  for (int64_t i = 0; i < g; ++i) {
    const int64_t size =
        static_cast<int64_t>(std::floor(double(rows) * weight[static_cast<size_t>(i)] / total));
    groups.sizes.push_back(size);
    given += size;
  }
  // The rounding rest goes to the last non-empty group.
  for (int64_t i = g - 1; i >= 0; --i) {
    if (weight[static_cast<size_t>(i)] > 0) {
      groups.sizes[static_cast<size_t>(i)] += rows - given;
      break;
    }
  }
  return groups;
}

// Every empty/non-empty pattern: group g has rows when bit g of mask is set.
Groups mask_groups(int64_t g, int mask) {
  Groups groups;
  std::string bits;
  for (int64_t i = 0; i < g; ++i) {
    const bool filled = mask & (1 << i);
    groups.sizes.push_back(filled ? 1 + (i * 7 + mask) % 5 : 0);
    bits += filled ? '1' : '0';
  }
  groups.name = "mask:G" + std::to_string(g) + ":" + bits;
  return groups;
}

bool is_int8_dot(CasePass pass, const Storage& s) {
  // The integer-dot driver runs int8 fwd with per-row lhs scales and weight
  // scales constant along K (ops/quant_gmm.cc); elsewhere int8 codes are
  // decoded to f32 while packing.
  return pass == CasePass::kFwd && s.recipe == QuantRecipe::kInt8 &&
         s.rhs_scales != Storage::RhsScales::kBlock && s.lhs_k_block == 0;
}

// What the op must refuse (and the words of its error), or "".
std::string refusal_of(CasePass pass, const Storage& s, const CaseBackend& backend,
                       Epilogue epilogue) {
  const bool v1 = backend.kernel == KernelVersion::kV1;
  if (v1 && epilogue != Epilogue::kNone) return "the fused output stage";
  if (s.lhs_k_block > 0 && pass != CasePass::kFwd) return "apply to the forward pass only";
  if (v1 && s.rhs_scales == Storage::RhsScales::kBlock) return "block-wise weight scales";
  if (v1 && s.lhs_k_block > 0) return "need kernel v2";
  return "";
}

struct Shape3 {
  int64_t m, k, n, g;
};

Case make_case(CasePass pass, const Storage& storage, const CaseBackend& backend, const Isa& isa,
               Epilogue epilogue, Groups groups, Shape3 shape, const TableOptions& options,
               const char* section) {
  Case c;
  c.pass = pass;
  c.storage = storage;
  c.backend = backend.label;
  c.runs_on = backend;
  c.isa = isa;
  c.epilogue = epilogue;
  c.groups = std::move(groups);
  c.m = shape.m;
  c.k = shape.k;
  c.n = shape.n;
  // Tiles that divide no dim at the test size; the op's own at bench sizes.
  if (options.scale == 1) c.tiles = {24, 64, 16};
  c.section = section;
  c.refusal = refusal_of(pass, storage, backend, epilogue);
  if (!c.refusal.empty()) c.expect = Expect::kRefused;
  return c;
}

}  // namespace

std::vector<Isa> runnable_isas() {
  std::vector<Isa> isas;
  const int64_t targets = kernels::microkernel_targets();
  // Highway's bits run from the best x86 target (low bit) down to the
  // portable fallback (high bit).
  for (int64_t bit = 1; bit != 0 && bit <= targets; bit <<= 1) {
    if (!(targets & bit)) continue;
    Isa isa;
    isa.name = lower(kernels::target_name(bit));
    isa.hwy_target = bit;
    isas.push_back(isa);
  }
  return isas;
}

std::vector<Isa> forced_kernel_isas(const Storage& storage) {
  std::vector<Isa> isas;
  const std::vector<Isa> hwy = runnable_isas();
  if (hwy.empty()) return isas;
  if (storage.recipe == QuantRecipe::kInt8) {
    for (const kernels::Int8Microkernel& uk : kernels::int8_microkernels()) {
      Isa isa = hwy.front();
      isa.name = "int8-" + lower(uk.target);
      isa.int8_kernel = uk.target;
      isas.push_back(isa);
    }
  }
  if (!storage.recipe && storage.dtype == DType::kBF16) {
    std::vector<std::string> names;
    for (const kernels::Bf16Microkernel& uk : kernels::bf16_microkernels()) names.push_back(uk.target);
    names.push_back("WIDEN");
    for (const std::string& name : names) {
      Isa isa = hwy.front();
      isa.name = "bf16-" + lower(name);
      isa.bf16_kernel = name;
      isas.push_back(isa);
    }
  }
  return isas;
}

std::vector<Case> case_table(const TableOptions& options) {
  std::vector<Case> table;
  const std::vector<Isa> isas = runnable_isas();
  const std::vector<CaseBackend> backends = case_backends();
  const int64_t s = std::max(1, options.scale);
  const Shape3 base{97 * s, 65 * s, 33 * s, 5};
  const std::vector<std::string> patterns = {"uniform", "empty:0.4", "partial", "zipf:1.5",
                                             "ep:1+2"};

  // core
  for (CasePass pass : {CasePass::kFwd, CasePass::kDlhs, CasePass::kDrhs}) {
    for (const Storage& storage : all_storages()) {
      if (pass == CasePass::kDrhs && storage.rhs_scales != Storage::RhsScales::kChannel) {
        for (const CaseBackend& backend : backends) {
          Case c = make_case(pass, storage, backend, isas.front(), Epilogue::kNone,
                             make_groups("empty:0.4", base.m, base.g), base, options, "core");
          c.expect = Expect::kNotExpressible;
          c.refusal = "tgmm has no weight operand: a weight scale layout does not apply";
          table.push_back(c);
        }
        continue;
      }
      for (const CaseBackend& backend : backends) {
        if (!refusal_of(pass, storage, backend, Epilogue::kNone).empty()) {
          table.push_back(make_case(pass, storage, backend, isas.front(), Epilogue::kNone,
                                    make_groups("empty:0.4", base.m, base.g), base, options,
                                    "core"));
          continue;
        }
        for (size_t i = 0; i < isas.size(); ++i) {
          for (const std::string& pattern : patterns) {
            if (i > 0 && pattern != "empty:0.4" && pattern != "ep:1+2") continue;
            table.push_back(make_case(pass, storage, backend, isas[i], Epilogue::kNone,
                                      make_groups(pattern, base.m, base.g), base, options,
                                      "core"));
          }
        }
        // Microkernels no Highway target picks alone: int8 where the integer
        // dot engages; bf16 on v2, where the bf16 dot engages.
        const bool int8_kernels = is_int8_dot(pass, storage);
        const bool bf16_kernels = !storage.recipe && storage.dtype == DType::kBF16 &&
                                  backend.kernel == KernelVersion::kV2;
        if (int8_kernels || bf16_kernels) {
          for (const Isa& isa : forced_kernel_isas(storage)) {
            for (const char* pattern : {"partial", "ep:1+2"}) {
              table.push_back(make_case(pass, storage, backend, isa, Epilogue::kNone,
                                        make_groups(pattern, base.m, base.g), base, options,
                                        "core"));
            }
          }
        }
      }
    }
  }

  // epilogue: an even number of output columns for SwiGLU on both passes.
  const Shape3 even{97 * s, 66 * s, 34 * s, 5};
  std::vector<Isa> epilogue_isas = {isas.front()};
  for (const Isa& isa : isas) {
    if (isa.name == "avx2" && isa.hwy_target != isas.front().hwy_target) epilogue_isas.push_back(isa);
  }
  if (isas.size() > 1) epilogue_isas.push_back(isas.back());
  for (Epilogue epilogue : {Epilogue::kSwiglu, Epilogue::kColScale, Epilogue::kBias,
                            Epilogue::kRowScale, Epilogue::kAll}) {
    for (CasePass pass : {CasePass::kFwd, CasePass::kDlhs}) {
      for (const char* name : {"f32", "bf16", "fp8", "int8"}) {
        const Storage storage = storage_named(name);
        for (const CaseBackend& backend : backends) {
          if (!refusal_of(pass, storage, backend, epilogue).empty()) {
            table.push_back(make_case(pass, storage, backend, isas.front(), epilogue,
                                      make_groups("empty:0.4", even.m, even.g), even, options,
                                      "epilogue"));
            continue;
          }
          for (const Isa& isa : epilogue_isas) {
            table.push_back(make_case(pass, storage, backend, isa, epilogue,
                                      make_groups("empty:0.4", even.m, even.g), even, options,
                                      "epilogue"));
          }
          table.push_back(make_case(pass, storage, backend, isas.front(), epilogue,
                                    make_groups("ep:1+2", even.m, even.g), even, options,
                                    "epilogue"));
        }
      }
    }
    // The API cannot say it, whatever the backend: one case, on the default.
    Case c = make_case(CasePass::kDrhs, storage_named("f32"), CaseBackend{}, isas.front(), epilogue,
                       make_groups("empty:0.4", even.m, even.g), even, options, "epilogue");
    c.expect = Expect::kNotExpressible;
    c.refusal = "tgmm has no output stage (TgmmOptions carries none)";
    table.push_back(c);
  }

  // patterns: small K and N, tiles that straddle the groups.
  for (int64_t g = 1; g <= 4; ++g) {
    for (int mask = 0; mask < (1 << g); ++mask) {
      Groups groups = mask_groups(g, mask);
      int64_t total = 0;
      for (int64_t size : groups.sizes) total += size;
      const Shape3 shape{(total + 3) * s, 13 * s, 11 * s, g};
      if (s > 1) {  // keep the pattern, scale the rows
        for (int64_t& size : groups.sizes) size *= s;
      }
      for (CasePass pass : {CasePass::kFwd, CasePass::kDlhs, CasePass::kDrhs}) {
        for (const char* name : {"f32", "int8", "bf16", "fp8"}) {
          if (g > 3 && (std::string(name) == "bf16" || std::string(name) == "fp8")) continue;
          for (const CaseBackend& backend : backends) {
            Case c = make_case(pass, storage_named(name), backend, isas.front(), Epilogue::kNone,
                               groups, shape, options, "patterns");
            if (options.scale == 1) c.tiles = {4, 8, 5};
            table.push_back(c);
          }
        }
      }
    }
  }
  return table;
}

std::vector<Case> filter_cases(const std::vector<Case>& cases, const std::string& filter) {
  std::vector<std::string> words;
  std::stringstream in(filter);
  for (std::string word; std::getline(in, word, ',');) {
    if (!word.empty()) words.push_back(word);
  }
  std::vector<Case> kept;
  for (const Case& c : cases) {
    const std::string id = c.id();
    bool all = true;
    for (const std::string& word : words) all = all && id.find(word) != std::string::npos;
    if (all) kept.push_back(c);
  }
  return kept;
}

IsaScope::IsaScope(const Isa& isa) {
  if (isa.hwy_target != 0) hwy::SetSupportedTargetsForTest(isa.hwy_target);
  ok_ = kernels::force_int8_microkernel(isa.int8_kernel) &&
        kernels::force_bf16_microkernel(isa.bf16_kernel == "auto" ? "" : isa.bf16_kernel);
}

IsaScope::~IsaScope() {
  kernels::force_int8_microkernel("auto");
  kernels::force_bf16_microkernel("");
  hwy::SetSupportedTargetsForTest(0);
}

}  // namespace raggemm::cases
