// Rewriting a run's checkpoint for another mesh (raggemm reshard,
// docs/parallelism.md): every rank's file of one step is read, each tensor
// is put back together (fsdp chunks concatenated and unpadded, expert
// shards concatenated by expert rank), and cut again for the target mesh.
// The global batch must split over the target's processes: its
// per_device_batch_size is the source's global batch / target processes,
// so the data stream, and with it the trajectory, continue.
#pragma once

#include <cstdint>
#include <string>

#include "raggemm/mesh.h"

namespace raggemm::train {

struct ReshardResult {
  int64_t step = 0;
  MeshShape from, to;
  int64_t per_device_batch_size = 0;  // the target's
  int64_t files = 0;                  // checkpoint files written
};

// from_run_dir: a run folder with checkpoints and config.yml. to_run_dir:
// a new run folder (refused if it holds checkpoints already); gets the
// checkpoint of `step` (-1: the newest every rank has), config.yml with
// the target's mesh and per_device_batch_size, and metrics.jsonl up to the
// step. Errors name what cannot be resharded and why; nothing is written
// then.
ReshardResult reshard_run(const std::string& from_run_dir, const std::string& to_run_dir,
                          const MeshShape& to, int64_t step = -1);

}  // namespace raggemm::train
