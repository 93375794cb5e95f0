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
  int64_t step = 0;
  int64_t updates = 0;
  std::map<std::string, std::vector<float>> blobs;
};

std::string checkpoint_path(const std::string& run_dir, int64_t step);
void save_checkpoint(const std::string& path, const CheckpointData& data);
CheckpointData load_checkpoint(const std::string& path);
// The newest checkpoint of a run that verifies, if any (a corrupt file is
// reported on stderr and skipped).
std::optional<std::string> latest_checkpoint(const std::string& run_dir);

}  // namespace raggemm::train
