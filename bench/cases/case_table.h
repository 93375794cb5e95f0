// One table of grouped-matmul cases for the tests and the benchmarks (the
// shape of ggml's test-backend-ops): each case is one pass, one storage or
// quantization recipe, one backend, one ISA target, one output stage and one
// group pattern, on a shape whose tiles divide nothing. The test binary
// (tests/cases/) runs every case against the f64 reference; `raggemm bench
// --cases` times the same list at a larger size.
//
// A case id reads pass/storage/backend/isa/epilogue/groups/shape, e.g.
//   drhs/int8/v2/avx2/none/empty:0.4/M97K65N33G5
// A combination the op does not support stays in the table as refused, with
// the error text the op must give; one the API cannot even express (an
// output stage on tgmm) stays as not expressible. Nothing is left out
// silently.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "raggemm/dtype.h"
#include "raggemm/gmm.h"
#include "raggemm/quant.h"

namespace raggemm::cases {

enum class CasePass { kFwd, kDlhs, kDrhs };
const char* pass_name(CasePass pass);  // "fwd", "dlhs", "drhs"

// Plain storage (f32, bf16) or a quantization recipe with its scale layout.
struct Storage {
  enum class RhsScales { kChannel, kTensor, kBlock };
  std::string name;                  // "f32", "bf16", "fp8", "int8-block32", ...
  DType dtype = DType::kF32;         // storage of plain operands
  std::optional<QuantRecipe> recipe;  // set: a quantized case
  RhsScales rhs_scales = RhsScales::kChannel;
  int64_t block = 0;                 // rhs block size along K (kBlock)
  int64_t lhs_k_block = 0;           // lhs scales per K-block (fwd, v2)
};

enum class Epilogue { kNone, kSwiglu, kColScale, kBias, kRowScale, kAll };
const char* epilogue_name(Epilogue epilogue);

// An ISA target: a Highway target forced for the f32 microkernel and its
// packers (which also bounds the int8 and bf16 kernel families), and
// optionally one int8 or bf16 microkernel forced by name.
struct Isa {
  std::string name;          // "avx3", "avx2", "int8-scalar", "bf16-widen", ...
  int64_t hwy_target = 0;    // a Highway target bit this CPU runs
  std::string int8_kernel = "auto";
  std::string bf16_kernel = "auto";
};

// A value of the backend axis: a registered backend (src/backends/
// registry.cc) in one of its kernel generations, or in its one
// configuration when it offers none.
struct CaseBackend {
  // The axis value in case ids: the generation alone ("v1", "v2") for the
  // first registered backend, the CPU kernels (their ids predate the
  // registry), "<name>" or "<name>-<generation>" for any other.
  std::string label = "v2";
  std::string name = "cpu";                          // GmmOptions::backend
  std::optional<KernelVersion> kernel = KernelVersion::kV2;  // GmmOptions::kernel
};

// Group sizes, and the expert-parallel slice of them the rhs holds.
struct Groups {
  std::string name;  // "uniform", "empty:0.4", "partial", "zipf:1.5", "ep:1+2", "mask:G3:101"
  std::vector<int64_t> sizes;
  int64_t group_offset = 0;
  int64_t local_groups = -1;  // -1: every group
};

enum class Expect {
  kRuns,            // runs; compared with the reference
  kRefused,         // the op throws raggemm::Error containing `refusal`
  kNotExpressible,  // the API has no way to ask for it (`refusal` says why)
};

struct Case {
  CasePass pass = CasePass::kFwd;
  Storage storage;
  std::string backend = "v2";  // the backend axis: a label from case_backends()
  CaseBackend runs_on;         // the backend and configuration that label names
  Isa isa;
  Epilogue epilogue = Epilogue::kNone;
  Groups groups;
  int64_t m = 0, k = 0, n = 0;  // the op's problem: fwd out [M,N]; dlhs dout [M,N] -> [M,K]
  Tiles tiles{};                // {} : the op picks
  Expect expect = Expect::kRuns;
  std::string refusal;          // a substring of the error, or why not expressible
  std::string section;          // which crossing of the table produced it

  int64_t num_groups() const { return static_cast<int64_t>(groups.sizes.size()); }
  std::string id() const;       // pass/storage/backend/isa/epilogue/groups/shape
  std::string test_name() const;  // id() with every character gtest refuses made '_'
  double flops() const;          // 2 * rows in groups * K * N
};

// The size of a table: scale 1 is the test size (M97 K65 N33, G5, tiles
// 24x64x16 that divide no dim); a larger scale multiplies M, K and N and lets
// the op pick tiles, for timing.
struct TableOptions {
  int scale = 1;
};

// Every ISA target this CPU runs: each Highway target of the f32 kernels,
// best first ("avx3", "avx2", "sse4", "ssse3", "emu128"). The first is best.
std::vector<Isa> runnable_isas();
// The int8 or bf16 microkernels of this CPU, each forced alone at the best
// Highway target ("int8-avx512_vnni", ..., "bf16-scalar", "bf16-widen"):
// kernels that no Highway target selects by itself.
std::vector<Isa> forced_kernel_isas(const Storage& storage);

std::vector<Case> case_table(const TableOptions& options = {});

// Cases whose id contains every comma-separated word of `filter` ("" : all).
std::vector<Case> filter_cases(const std::vector<Case>& cases, const std::string& filter);

// Forces a case's ISA for the lifetime of the scope and restores the
// automatic dispatch afterwards.
class IsaScope {
 public:
  explicit IsaScope(const Isa& isa);
  ~IsaScope();
  IsaScope(const IsaScope&) = delete;
  IsaScope& operator=(const IsaScope&) = delete;
  bool ok() const { return ok_; }  // false: this CPU cannot force it

 private:
  bool ok_ = true;
};

}  // namespace raggemm::cases
