// Tile plans of the grouped matmuls of one MoE block (DESIGN.md s.2).
//
// An MoE block has two weights, wi ([E, embed, mlp]) and wo ([E, mlp, embed]),
// and each weight three passes (fwd, dlhs, drhs). Users set tiles in model
// dimensions (batch_seq, embed_dim, mlp_dim); kernel_axes() is the one table
// that maps them to kernel tiles (m, k, n). Every field of a pass config is
// resolved on its own: an explicit setting beats a tuned-cache entry, which
// beats the heuristic, and the source of each field is kept.
//
// Typical use (the MoE layer, a trainer, a CLI):
//   BlockPlan plans = parse_plan_settings({"wi_tile_fwd_batch_seq=256", "use_gmm_v2=true"});
//   ResolvedPassConfig fwd = resolve(plans.wi, Weight::kWi, Pass::kForward, shape,
//                                    &TuneCache::shared_default());
//   GmmOptions options = gmm_options(fwd);
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "raggemm/dtype.h"
#include "raggemm/gmm.h"

namespace raggemm {

// ---------------------------------------------------------------------------
// Names.

enum class Weight : uint8_t { kWi, kWo };
enum class Pass : uint8_t { kForward, kGradLhs, kGradRhs };
enum class ModelDim : uint8_t { kBatchSeq, kEmbedDim, kMlpDim };

inline constexpr std::array<Weight, 2> kAllWeights = {Weight::kWi, Weight::kWo};
inline constexpr std::array<Pass, 3> kAllPasses = {Pass::kForward, Pass::kGradLhs,
                                                   Pass::kGradRhs};
inline constexpr std::array<ModelDim, 3> kAllModelDims = {ModelDim::kBatchSeq, ModelDim::kEmbedDim,
                                                          ModelDim::kMlpDim};

const char* weight_name(Weight weight);        // "wi", "wo"
const char* pass_name(Pass pass);              // "fwd", "dlhs", "drhs"
const char* model_dim_name(ModelDim dim);      // "batch_seq", "embed_dim", "mlp_dim"
// The op that runs a pass: "gmm" for fwd and dlhs (dlhs transposes rhs), "tgmm" for drhs.
const char* pass_op_name(Pass pass);
Weight parse_weight(const std::string& name, const std::string& argument);
Pass parse_pass(const std::string& name, const std::string& argument);

// ---------------------------------------------------------------------------
// Model dimensions and the mapping to kernel tiles.

struct ModelDims {
  int64_t batch_seq = 0;  // tokens (rows of the activations)
  int64_t embed_dim = 0;
  int64_t mlp_dim = 0;
  int64_t at(ModelDim dim) const;
};

// Tiles in model-dimension names; an unset field is left to cache or heuristic.
struct ModelTiles {
  std::optional<int64_t> batch_seq;
  std::optional<int64_t> embed_dim;
  std::optional<int64_t> mlp_dim;
  std::optional<int64_t>& at(ModelDim dim);
  const std::optional<int64_t>& at(ModelDim dim) const;
  bool operator==(const ModelTiles&) const = default;
};

// Which model dimension each kernel axis runs over, for one (weight, pass).
struct KernelAxes {
  ModelDim m;
  ModelDim k;  // the contracted dimension
  ModelDim n;
  bool operator==(const KernelAxes&) const = default;
};

// THE table of DESIGN.md s.2, in one place:
//   wi fwd  (batch_seq, embed_dim, mlp_dim)   wo fwd  (batch_seq, mlp_dim, embed_dim)
//   wi dlhs (batch_seq, mlp_dim, embed_dim)   wo dlhs (batch_seq, embed_dim, mlp_dim)
//   wi drhs (embed_dim, batch_seq, mlp_dim)   wo drhs (mlp_dim, batch_seq, embed_dim)
KernelAxes kernel_axes(Weight weight, Pass pass);

// Model-dim tiles -> kernel tiles (m, k, n) through kernel_axes(); an unset
// model tile gives 0 ("not set", as in raggemm::Tiles).
Tiles to_kernel_tiles(Weight weight, Pass pass, const ModelTiles& tiles);
// The extents of the kernel axes of (weight, pass) for a block's dims.
Tiles kernel_extents(Weight weight, Pass pass, const ModelDims& dims);

// ---------------------------------------------------------------------------
// Plans: what the user set.

struct PassConfig {
  ModelTiles tiles;
  std::optional<KernelVersion> kernel;
  std::optional<int> input_buffer_count;  // 1..4
  // Quantization recipe of this pass; "" for none. (Filled in by the
  // quantization work; tiles and kernels are resolved per recipe.)
  std::string quantization;
  bool operator==(const PassConfig&) const = default;
};

// The plan of one weight: a config per pass, indexed by Pass.
struct GmmPlan {
  std::array<PassConfig, 3> passes{};
  PassConfig& pass(Pass p) { return passes[static_cast<size_t>(p)]; }
  const PassConfig& pass(Pass p) const { return passes[static_cast<size_t>(p)]; }
  bool operator==(const GmmPlan&) const = default;
};

// The plans of one MoE block: one per weight.
struct BlockPlan {
  GmmPlan wi;
  GmmPlan wo;
  GmmPlan& weight(Weight w) { return w == Weight::kWi ? wi : wo; }
  const GmmPlan& weight(Weight w) const { return w == Weight::kWi ? wi : wo; }
  bool operator==(const BlockPlan&) const = default;
};

// ---------------------------------------------------------------------------
// Config keys:
//   {wi,wo}_tile_{fwd,dlhs,drhs}_{batch_seq,embed_dim,mlp_dim} = positive integer
//   use_gmm_v2 = auto|true|false        (all passes of both weights; auto: unset,
//                                        each pass resolves from cache or heuristic)
//   use_gmm_v2_{fwd,dlhs,drhs} = true|false  (that pass of both weights)
//   input_buffer_count = 1..4           (all passes of both weights)
//   {wi,wo}_input_buffer_count_{fwd,dlhs,drhs} = 1..4  (that weight and pass;
//                                        beats input_buffer_count: applied
//                                        after it by parse_plan_settings)
// A bad value or an unknown key throws Error naming the key; an unknown key's
// message suggests the nearest valid key.

std::vector<std::string> plan_setting_keys();
bool is_plan_setting_key(const std::string& key);
// The valid key nearest to `key` by edit distance.
std::string nearest_plan_setting_key(const std::string& key);
void apply_plan_setting(BlockPlan& plan, const std::string& key, const std::string& value);
// "key=value".
void apply_plan_setting(BlockPlan& plan, const std::string& key_equals_value);
BlockPlan parse_plan_settings(const std::vector<std::string>& key_equals_values);

// Parses a positive integer tile value; throws Error naming `argument`.
int64_t parse_tile_value(const std::string& value, const std::string& argument);

// ---------------------------------------------------------------------------
// Problems, as the cache and the heuristic see them.

// One grouped matmul in op terms. lhs is [m, k]; fwd: rhs [G, k, n];
// dlhs: rhs [G, n, k] (gmm with transpose_rhs); drhs: tgmm of lhs [m, k] and
// dout [m, n] into [G, k, n]. m is always the token (ragged) dimension.
struct GmmShape {
  Pass pass = Pass::kForward;
  int64_t m = 0;
  int64_t k = 0;
  int64_t n = 0;
  int64_t groups = 0;
  DType lhs_dtype = DType::kF32;
  DType rhs_dtype = DType::kF32;
  std::string quantization;          // "" for none
  std::vector<int32_t> group_sizes;  // empty: unknown, balanced m/groups assumed
};

// Kernel-axis extents of a shape: gmm (m, k, n); tgmm (k, m, n), since tgmm's
// kernel tiles its [k, n] output and contracts the tokens.
Tiles kernel_extents(const GmmShape& shape);

// The shape of one (weight, pass) of an MoE block with `groups` experts.
GmmShape block_pass_shape(Weight weight, Pass pass, const ModelDims& dims, int64_t groups,
                          std::vector<int32_t> group_sizes = {}, DType dtype = DType::kF32);

// ---------------------------------------------------------------------------
// The tuned-results cache: a versioned JSON file keyed by CPU model, ISA
// target, op and pass, dtypes, quantization, bucketed M (power of two), K, N
// and G. Writes take a file lock, re-read and merge, and replace the file
// atomically, so concurrent tuners lose nothing. An unreadable file gives one
// warning (raggemm/diagnostics.h) and is treated as empty (and kept aside on
// the next write); an entry that fails validation is rejected alone.

struct TuneCandidate {
  Tiles tiles;  // kernel tiles, all > 0
  KernelVersion kernel = KernelVersion::kV1;
  int input_buffer_count = 1;
  bool operator==(const TuneCandidate&) const = default;
};

struct CandidateTiming {
  TuneCandidate candidate;
  double seconds = 0;         // median time of one call, summed over the tuning inputs
  bool passed_check = false;  // agreed with the reference on the tuning inputs
};

struct TuneEntry {
  TuneCandidate winner;
  std::vector<CandidateTiming> timings;
  int threads = 0;
  double heuristic_seconds = 0;  // the heuristic's config, timed in the same run
};

// A cache entry that failed validation (unparsable fields, a winner outside
// the tile limit): never used; a lookup of its shape reports one warning
// naming the cache and the entry (raggemm/diagnostics.h) and the call goes
// on with the heuristic. Kept as written when the file is rewritten.
struct RejectedTuneEntry {
  std::string reason;
  std::string text;  // the entry's JSON as found
};

class TuneCache {
 public:
  static constexpr int kFormatVersion = 1;

  // Loads `path` (missing: empty).
  explicit TuneCache(std::string path);
  // $RAGGEMM_TUNE_CACHE, else $XDG_CACHE_HOME/raggemm/tune_cache.json, else
  // ~/.cache/raggemm/tune_cache.json.
  static std::string default_path();
  // The default cache, loaded once per process.
  static const TuneCache& shared_default();

  const std::string& path() const { return path_; }
  size_t size() const { return entries_.size(); }
  // The valid entry of `shape`; a rejected one gives nullopt and a warning.
  std::optional<TuneEntry> find(const GmmShape& shape) const;
  // The rejected entry of `shape`, if the file holds one.
  std::optional<RejectedTuneEntry> rejected(const GmmShape& shape) const;
  size_t rejected_count() const { return rejected_.size(); }
  // Records an entry in memory and in the file (locked read-merge-write).
  void store(const GmmShape& shape, const TuneEntry& entry);
  // Re-reads the file.
  void reload();

  // The key of a shape on this machine.
  static std::string key(const GmmShape& shape);
  static int64_t bucket_m(int64_t m);  // the next power of two >= m

 private:
  std::string path_;
  std::map<std::string, TuneEntry> entries_;
  std::map<std::string, RejectedTuneEntry> rejected_;
};

// ---------------------------------------------------------------------------
// Resolution: explicit > cache > heuristic, per field.

enum class PlanSource : uint8_t { kExplicit, kCache, kHeuristic };
const char* source_name(PlanSource source);  // "explicit", "cache", "heuristic"

struct ResolvedPassConfig {
  Tiles tiles;  // kernel tiles, all > 0
  KernelVersion kernel = KernelVersion::kV1;
  int input_buffer_count = 1;
  std::string quantization;
  struct Sources {
    PlanSource m = PlanSource::kHeuristic;
    PlanSource k = PlanSource::kHeuristic;
    PlanSource n = PlanSource::kHeuristic;
    PlanSource kernel = PlanSource::kHeuristic;
    PlanSource buffers = PlanSource::kHeuristic;
  } source;
  // The cache held an entry for this problem but it failed validation: why
  // (the fields then come from the heuristic). "" otherwise.
  std::string cache_rejection;
};

// What a caller of a raw op fixed, in kernel terms (0 / nullopt: not set).
struct KernelOverrides {
  Tiles tiles{};
  std::optional<KernelVersion> kernel;
  std::optional<int> input_buffer_count;
};

// Resolves one raw problem (the `gmm`, `tgmm` and `bench` commands use this;
// pass cache = nullptr for --no-cache): explicit overrides > the cache's
// winner for `shape` > the heuristic on shape.group_sizes, per field.
// `threads` (0: OpenMP's default) is the thread count the heuristic
// shares the caches between; pass the one the op will run with.
ResolvedPassConfig resolve_problem(const GmmShape& shape, const KernelOverrides& overrides,
                                   const TuneCache* cache, int threads = 0);

// Resolves one (weight, pass) of an MoE block from its plan.
ResolvedPassConfig resolve(const GmmPlan& plan, Weight weight, Pass pass, const ModelDims& dims,
                           int64_t groups, const std::vector<int32_t>& group_sizes,
                           const TuneCache* cache, DType dtype = DType::kF32);

// The heuristic alone (every source kHeuristic).
ResolvedPassConfig heuristic_config(const GmmShape& shape);

// Options for the ops from a resolved config (other fields default).
GmmOptions gmm_options(const ResolvedPassConfig& config, Pass pass);
TgmmOptions tgmm_options(const ResolvedPassConfig& config);

}  // namespace raggemm
