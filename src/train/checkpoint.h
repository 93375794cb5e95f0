// Checkpoints: one file per save, checkpoints/step_NNNNNNNN.ckpt, written
// atomically (temp file + rename) so a killed run never leaves a torn file.
// Layout: "RGMMCKP1", u64 header length, JSON header (step, update count,
// and every named f32 blob's size and offset), the blobs, then an FNV-1a
// checksum of everything before it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace raggemm::train {

struct CheckpointData {
  int64_t step = 0;  // the global step
  int64_t updates = 0;
  // Expert parallelism: which rank's shard ("rank_R_of_P"); "" on one process.
  std::string shard;
  std::map<std::string, std::vector<float>> blobs;
  // The mesh that wrote it (docs/parallelism.md): {dp, fsdp, ep} and this
  // file's rank; empty in checkpoints written before meshes existed (one
  // process, or pure expert parallelism, whose shards are rank_R_of_P).
  std::vector<int64_t> mesh;
  int64_t rank = 0;
  // Parameters sharded over fsdp (their blobs, and their optimizer state's,
  // hold this rank's padded chunk) -> unpadded size.
  std::map<std::string, int64_t> fsdp_sizes;
  // Parameters split by expert rank (expert parallelism).
  std::vector<std::string> expert_params;
};

// Expert parallelism keeps each rank's files apart: checkpoints/<shard>/
// (shard = shard_name(rank, ranks)); one process uses checkpoints/ itself.
std::string shard_name(int rank, int ranks);  // "" when ranks == 1
std::string checkpoint_path(const std::string& run_dir, int64_t step,
                            const std::string& shard = "");
void save_checkpoint(const std::string& path, const CheckpointData& data);
CheckpointData load_checkpoint(const std::string& path);
// The newest checkpoint of a run (of one shard) that verifies, if any (a
// corrupt file is reported as a warning, raggemm/diagnostics.h, and skipped).
std::optional<std::string> latest_checkpoint(const std::string& run_dir,
                                             const std::string& shard = "");

}  // namespace raggemm::train
