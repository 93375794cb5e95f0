// Op-level terms of tile plans (DESIGN.md s.2): the passes, one grouped
// matmul's shape as the tune cache and the heuristic see it, the cache, and
// the resolution of one op's config (explicit > tuned cache > heuristic, per
// field, the source of each kept). Nothing here knows weights or model
// dimensions: those (wi/wo, batch_seq/embed_dim/mlp_dim, the table that maps
// them to kernel tiles, the config keys) are the MoE layer's,
// raggemm/moe_plan.h.
//
// Typical use (a raw op, the `gmm`/`tgmm`/`bench` commands):
//   ResolvedPassConfig config = resolve_problem(shape, overrides, &TuneCache::shared_default());
//   GmmOptions options = gmm_options(config, shape.pass);
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "raggemm/dtype.h"
#include "raggemm/problem.h"
#include "raggemm/tiles.h"

namespace raggemm {

// ---------------------------------------------------------------------------
// The tuned-results cache: a versioned JSON file keyed by CPU model, ISA
// target, op and pass, dtypes, quantization, bucketed M (power of two), K, N
// and G. Writes take a file lock, re-read and merge, and replace the file
// atomically, so concurrent tuners lose nothing. An unreadable file gives one
// warning (raggemm/diagnostics.h) and is treated as empty (and kept aside on
// the next write); an entry that fails validation is rejected alone.

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
  Quantization quantization;
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

// The heuristic alone (every source kHeuristic).
ResolvedPassConfig heuristic_config(const GmmShape& shape);

}  // namespace raggemm
