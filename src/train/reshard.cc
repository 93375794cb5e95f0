// Checkpoints from one mesh to another.
#include "train/reshard.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <vector>

#include "raggemm/error.h"
#include "raggemm/npy.h"
#include "raggemm/train.h"
#include "train/checkpoint.h"
#include "train/fsdp.h"

namespace raggemm::train {
namespace {

namespace fs = std::filesystem;

// The source's process count: checkpoints/rank_R_of_P/ folders, or one
// process's checkpoints/step_*.ckpt.
int source_processes(const std::string& run_dir) {
  const fs::path dir = fs::path(run_dir) / "checkpoints";
  require(fs::is_directory(dir), "from", run_dir, "has no checkpoints folder");
  std::set<int> counts;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    const size_t of = name.find("_of_");
    if (entry.is_directory() && name.rfind("rank_", 0) == 0 && of != std::string::npos) {
      counts.insert(std::stoi(name.substr(of + 4)));
    }
  }
  require(counts.size() <= 1, "from", run_dir,
          "holds checkpoints of several process counts; reshard from a run with one");
  return counts.empty() ? 1 : *counts.begin();
}

// The routing selection bias is the one parameter that is not trained
// (ShardedParams leaves it whole).
bool trainable(const std::string& param) { return !param.ends_with(".selection_bias"); }

std::string param_of(const std::string& blob) { return blob.substr(blob.find('/') + 1); }

}  // namespace

ReshardResult reshard_run(const std::string& from_run_dir, const std::string& to_run_dir,
                          const MeshShape& to, int64_t step) {
  ReshardResult result;
  result.to = to;
  const int ranks = source_processes(from_run_dir);
  // The source's config: experts and batch.
  Settings settings;
  const std::string config_path = (fs::path(from_run_dir) / "config.yml").string();
  require(fs::exists(config_path), "from", from_run_dir,
          "has no config.yml (the run's experts and batch are needed)");
  settings.apply_file(config_path);
  const TrainConfig config = resolve(settings);
  const int64_t experts = config.moe.router.num_experts;

  // The step every rank has.
  std::vector<std::string> shards(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) shards[r] = shard_name(r, ranks);
  if (step < 0) {
    step = std::numeric_limits<int64_t>::max();
    for (const std::string& shard : shards) {
      const std::optional<std::string> latest = latest_checkpoint(from_run_dir, shard);
      require(latest.has_value(), "from", from_run_dir,
              "has no readable checkpoint for " + (shard.empty() ? "its process" : shard));
      step = std::min(step, verify_checkpoint(*latest));
    }
  }
  result.step = step;
  std::vector<CheckpointData> files;
  for (const std::string& shard : shards) {
    const std::string path = checkpoint_path(from_run_dir, step, shard);
    require(fs::exists(path), "step", step, "no checkpoint " + path);
    files.push_back(load_checkpoint(path));
  }
  // Before meshes: one process, or pure expert parallelism (whose expert
  // shards are the routed experts' weights).
  CheckpointData& first = files[0];
  if (first.mesh.empty()) {
    first.mesh = {1, 1, ranks};
    if (ranks > 1) {
      for (const auto& [name, blob] : first.blobs) {
        if (name.rfind("param/", 0) == 0 && is_expert_weight(param_of(name))) {
          first.expert_params.push_back(param_of(name));
        }
      }
    }
  }
  const MeshShape from{first.mesh[0], first.mesh[1], first.mesh[2]};
  result.from = from;
  require(from.size() == ranks, "from", from_run_dir,
          "its checkpoints' mesh " + from.describe() + " does not match its " +
              std::to_string(ranks) + " rank folders");

  // The target must be able to run this model on this data stream.
  const std::string keys = "ici_data_parallelism,ici_fsdp_parallelism,ici_expert_parallelism";
  const std::string values =
      std::to_string(to.data) + "," + std::to_string(to.fsdp) + "," + std::to_string(to.expert);
  require(to.data >= 1 && to.fsdp >= 1 && to.expert >= 1, keys, values,
          "every axis of the target mesh must be >= 1");
  require(experts % to.expert == 0, keys, values,
          "num_experts=" + std::to_string(experts) + " does not split over " +
              std::to_string(to.expert) + " expert ranks");
  const int64_t global_batch = config.per_device_batch_size * ranks;
  require(global_batch % to.size() == 0, keys, values,
          "the run's global batch of " + std::to_string(global_batch) +
              " sequences (per_device_batch_size=" + std::to_string(config.per_device_batch_size) +
              " x " + std::to_string(ranks) + " processes) does not split over " +
              std::to_string(to.size()) + " processes: the data stream would change");
  require(config.moe.sparse_matmul || to.size() == 1, keys, values,
          "sparse_matmul=false runs on one process only");
  result.per_device_batch_size = global_batch / to.size();
  require(!fs::exists(fs::path(to_run_dir) / "checkpoints"), "to", to_run_dir,
          "holds checkpoints already; reshard into a new run folder");

  // Whole tensors.
  auto file_at = [&](int64_t fsdp, int64_t expert) -> const CheckpointData& {
    return files[static_cast<size_t>(mesh_rank(from, MeshCoords{0, fsdp, expert}))];
  };
  const std::set<std::string> expert_set(first.expert_params.begin(), first.expert_params.end());
  std::map<std::string, std::vector<float>> whole;
  for (const auto& [name, blob] : first.blobs) {
    const std::string param = param_of(name);
    std::vector<float>& out = whole[name];
    if (auto it = first.fsdp_sizes.find(param); it != first.fsdp_sizes.end()) {
      for (int64_t f = 0; f < from.fsdp; ++f) {
        const std::vector<float>& part = file_at(f, 0).blobs.at(name);
        out.insert(out.end(), part.begin(), part.end());
      }
      require(static_cast<int64_t>(out.size()) >= it->second, "from", from_run_dir,
              "blob '" + name + "' is shorter than its recorded size");
      out.resize(static_cast<size_t>(it->second));
    } else if (expert_set.count(param)) {
      for (int64_t e = 0; e < from.expert; ++e) {
        const std::vector<float>& part = file_at(0, e).blobs.at(name);
        out.insert(out.end(), part.begin(), part.end());
      }
    } else {
      out = blob;
    }
  }

  // Cut for the target and write.
  std::vector<CheckpointData> outputs(static_cast<size_t>(to.size()));
  for (int64_t r = 0; r < to.size(); ++r) {
    const MeshCoords c = mesh_coords(to, r);
    CheckpointData& out = outputs[static_cast<size_t>(r)];
    out.step = step;
    out.updates = first.updates;
    out.shard = shard_name(static_cast<int>(r), static_cast<int>(to.size()));
    out.mesh = {to.data, to.fsdp, to.expert};
    out.rank = r;
    for (const auto& [name, full] : whole) {
      const std::string param = param_of(name);
      const int64_t n = static_cast<int64_t>(full.size());
      std::vector<float>& blob = out.blobs[name];
      if (is_expert_weight(param) && to.expert > 1) {
        const int64_t local = n / to.expert;
        blob.assign(full.begin() + c.expert * local, full.begin() + (c.expert + 1) * local);
        if (name.rfind("param/", 0) == 0) out.expert_params.push_back(param);
      } else if (to.fsdp > 1 && trainable(param)) {
        const int64_t chunk = (n + to.fsdp - 1) / to.fsdp;
        const int64_t begin = std::min(n, c.fsdp * chunk), end = std::min(n, begin + chunk);
        blob.assign(static_cast<size_t>(chunk), 0.0f);
        std::copy(full.begin() + begin, full.begin() + end, blob.begin());
        out.fsdp_sizes[param] = n;
      } else {
        blob = full;
      }
    }
  }
  for (const CheckpointData& out : outputs) {
    save_checkpoint(checkpoint_path(to_run_dir, step, out.shard), out);
    ++result.files;
  }

  // config.yml: the target's mesh and batch, the new run's place.
  const fs::path target(to_run_dir);
  settings.set("ici_data_parallelism", std::to_string(to.data));
  settings.set("ici_fsdp_parallelism", std::to_string(to.fsdp));
  settings.set("ici_expert_parallelism", std::to_string(to.expert));
  settings.set("per_device_batch_size", std::to_string(result.per_device_batch_size));
  settings.set("run_name", target.filename().string());
  settings.set("base_output_directory", target.parent_path().string());
  const std::string yaml = settings.to_yaml();
  write_file_atomic((target / "config.yml").string(), yaml.data(), yaml.size());
  // metrics.jsonl up to the step, so the resumed run's log continues it.
  std::ifstream metrics(fs::path(from_run_dir) / "metrics.jsonl");
  std::string kept, line;
  while (std::getline(metrics, line)) {
    try {
      if (!line.empty() && nlohmann::json::parse(line).at("step").get<int64_t>() <= step) {
        kept += line + "\n";
      }
    } catch (const nlohmann::json::exception&) {
    }
  }
  write_file_atomic((target / "metrics.jsonl").string(), kept.data(), kept.size());
  return result;
}

}  // namespace raggemm::train
