// The training loop: data, forward/backward, optimizer, per-step metrics,
// checkpoints, resume, trace.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <sstream>
#include <streambuf>

#include "moe/plans.h"
#include "raggemm/allocation_limits.h"
#include "raggemm/comm.h"
#include "raggemm/diagnostics.h"
#include "raggemm/mesh.h"
#include "raggemm/error.h"
#include "raggemm/npy.h"
#include "raggemm/profiler.h"
#include "raggemm/temp_files.h"
#include "raggemm/train.h"
#include "train/checkpoint.h"
#include "train/size_checks.h"
#include "train/data.h"
#include "train/fsdp.h"
#include "train/memory_estimate.h"
#include "train/model.h"
#include "train/optimizer.h"
#include "tune/autotune.h"

namespace raggemm::train {
namespace {

std::string format(const char* pattern, double a) {
  char text[64];
  std::snprintf(text, sizeof(text), pattern, a);
  return text;
}

nlohmann::json to_json(const StepMetrics& m) {
  nlohmann::json out = {{"step", m.step},
          {"loss", m.loss},
          {"aux_loss", m.aux_loss},
          {"learning_rate", m.learning_rate},
          {"step_time_s", m.step_time_s},
          {"tokens_per_s", m.tokens_per_s},
          {"gmm_gflops", m.gmm_gflops},
          {"gmm_time_share", m.gmm_time_share},
          {"expert_gmm_gflops", m.expert_gmm_gflops},
          {"expert_gmm_time_share", m.expert_gmm_time_share},
          {"dense_gmm_time_share", m.dense_gmm_time_share},
          {"glue_time_share", m.glue_time_share},
          {"attention_time_share", m.attention_time_share},
          {"optimizer_time_share", m.optimizer_time_share},
          {"data_time_share", m.data_time_share},
          {"comm_time_share", m.comm_time_share},
          {"comm_dp_time_share", m.comm_dp_time_share},
          {"comm_fsdp_time_share", m.comm_fsdp_time_share},
          {"comm_ep_time_share", m.comm_ep_time_share},
          {"max_expert_load", m.max_expert_load},
          {"dropped_tokens", m.dropped_tokens},
          {"weight_dtype", m.weight_dtype},
          {"weight_bytes", m.weight_bytes}};
  if (!std::isnan(m.eval_loss)) out["eval_loss"] = m.eval_loss;
  return out;
}

// Far past any training step: eval batches are never trained on.
constexpr int64_t kEvalBatchOffset = int64_t{1} << 40;

std::string log_line(const StepMetrics& m, int64_t steps, double floor) {
  char text[512];
  std::snprintf(
      text, sizeof(text),
      "step %5lld/%lld  loss %.4f (floor %.4f)  aux %.4f  lr %.2e | %.3f s  %7.0f tok/s"
      " | gmm %6.1f GFLOP/s, %4.1f%% of step (experts %4.1f%%, dense %4.1f%%, glue %4.1f%%,"
      " optimizer %4.1f%%) | attention %4.1f%%%s",
      static_cast<long long>(m.step), static_cast<long long>(steps), m.loss, floor, m.aux_loss,
      m.learning_rate, m.step_time_s, m.tokens_per_s, m.gmm_gflops, 100 * m.gmm_time_share,
      100 * m.expert_gmm_time_share, 100 * m.dense_gmm_time_share, 100 * m.glue_time_share,
      100 * m.optimizer_time_share, 100 * m.attention_time_share,
      m.dropped_tokens > 0 ? (" | dropped " + std::to_string(m.dropped_tokens)).c_str() : "");
  return text;
}

// A stream that drops everything: ranks other than 0 log nothing.
class NullBuffer : public std::streambuf {
 protected:
  int overflow(int c) override { return c; }
};

// Checkpoints another process count wrote (one process: checkpoints/*.ckpt;
// P processes: checkpoints/rank_R_of_P/): resuming them would silently start
// over, so it is an error instead.
void refuse_other_process_counts(const std::string& run_dir, int ranks) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(run_dir) / "checkpoints";
  if (!fs::is_directory(dir)) return;
  const std::string mine = "_of_" + std::to_string(ranks);
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    const bool single = entry.is_regular_file() && name.rfind("step_", 0) == 0;
    const bool shard = entry.is_directory() && name.rfind("rank_", 0) == 0;
    const bool other = ranks > 1 ? single || (shard && !name.ends_with(mine)) : shard;
    require(!other, "ici_expert_parallelism", ranks,
            "the run's checkpoints (" + entry.path().string() +
                ") were written with another process count; resume with the same mesh "
                "(ici_data_parallelism x ici_fsdp_parallelism x ici_expert_parallelism), "
                "reshard them (raggemm reshard) or use a new run_name");
  }
}

// Resuming under expert parallelism: every rank must load the same step, the
// newest one every rank has (a job killed between two ranks' saves leaves
// one rank a step ahead).
std::optional<std::string> agreed_checkpoint(const std::string& run_dir, const std::string& shard,
                                             Communicator* comm) {
  refuse_other_process_counts(run_dir, comm_size(comm));
  std::optional<std::string> latest = latest_checkpoint(run_dir, shard);
  if (comm_size(comm) == 1) return latest;
  const int64_t mine = latest ? verify_checkpoint(*latest) : 0;
  std::vector<int64_t> steps(static_cast<size_t>(comm->size()));
  const std::vector<int64_t> one(steps.size(), 1);
  comm->allgatherv_rows(&mine, 1, steps.data(), one.data(), 1, CommType::kI64);
  const int64_t agreed = *std::min_element(steps.begin(), steps.end());
  if (agreed == 0) return std::nullopt;
  if (agreed == mine) return latest;
  return checkpoint_path(run_dir, agreed, shard);
}

// Rewrites metrics.jsonl keeping only steps <= last_step (a resumed run
// continues the log where its checkpoint left it).
void truncate_metrics(const std::string& path, int64_t last_step) {
  std::string kept;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    try {
      if (nlohmann::json::parse(line).at("step").get<int64_t>() <= last_step) kept += line + "\n";
    } catch (const nlohmann::json::exception&) {
      // A line cut by a kill: dropped.
    }
  }
  write_file_atomic(path, kept.data(), kept.size());
}

void describe_plans(const TrainConfig& config, std::ostream& log) {
  const int64_t rows = config.tokens_per_step() * config.moe.router.top_k;
  const int64_t f = config.moe.fused_gate_up ? 2 * config.moe.mlp_dim : config.moe.mlp_dim;
  for (Weight weight : kAllWeights) {
    const moe::PassConfigs passes = moe::resolve_expert_passes(
        config.moe, weight,
        {rows, config.moe.embed_dim, weight == Weight::kWi ? f : config.moe.mlp_dim});
    for (Pass pass : kAllPasses) {
      const ResolvedPassConfig& p = passes[static_cast<size_t>(pass)];
      log << "  plan " << weight_name(weight) << " " << pass_name(pass) << ": "
          << kernel_name(p.kernel) << " tiles (m,k,n)=(" << p.tiles.m << "," << p.tiles.k << ","
          << p.tiles.n << ") from (" << source_name(p.source.m) << "," << source_name(p.source.k)
          << "," << source_name(p.source.n) << "), kernel from " << source_name(p.source.kernel)
          << (p.quantization ? std::string(", quantization ") + quantization_name(p.quantization) : "")
          << "\n";
    }
  }
}

// gmm_autotune=true: tunes every expert (weight, pass) shape the tune cache
// lacks, before anything resolves a plan, so the layers find the winners
// (explicit tile keys still win, field by field).
void autotune_missing(const TrainConfig& config, std::ostream& log) {
  TuneCache cache(TuneCache::default_path());
  const int64_t rows = config.tokens_per_step() * config.moe.router.top_k;
  const int64_t f = config.moe.fused_gate_up ? 2 * config.moe.mlp_dim : config.moe.mlp_dim;
  for (Weight weight : kAllWeights) {
    const ModelDims dims{rows, config.moe.embed_dim,
                         weight == Weight::kWi ? f : config.moe.mlp_dim};
    for (Pass pass : kAllPasses) {
      GmmShape shape =
          block_pass_shape(weight, pass, dims, config.moe.router.num_experts, {}, config.moe.dtype);
      shape.quantization = config.moe.quantization;
      if (cache.find(shape)) continue;
      tune::TuneOptions options;
      options.budget_s = 3.0;
      const tune::TuneResult tuned = tune::tune_problem(shape, options);
      cache.store(shape, tuned.entry);
      const Tiles& t = tuned.entry.winner.tiles;
      log << "  autotuned " << weight_name(weight) << " " << pass_name(pass) << ": "
          << kernel_name(tuned.entry.winner.kernel) << " (" << t.m << "," << t.k << "," << t.n
          << ") in " << cache.path() << "\n";
    }
  }
}

// Resuming `checkpoint` under `config`: the run's config.yml (as the run
// last wrote it) must agree on every key that changes the trajectory, unless
// allow_config_change_on_resume=true, which resumes with a warning.
void check_resume_config(const std::string& config_path, const TrainConfig& config,
                         const std::string& checkpoint) {
  std::ifstream in(config_path, std::ios::binary);
  if (!in) {
    report_warning("train", "resuming " + checkpoint + " without its run's config.yml (" +
                                config_path + "): the config cannot be compared");
    return;
  }
  std::stringstream text;
  text << in.rdbuf();
  std::vector<std::string> unknown;
  const std::vector<ConfigChange> changes =
      trajectory_changes(text.str(), config.resolved_yaml, &unknown);
  for (const std::string& key : unknown) {
    report_warning("train", config_path + ": key '" + key +
                                "' is unknown to this build and is not compared on resume");
  }
  if (changes.empty()) return;
  std::string keys, values, described;
  for (const ConfigChange& change : changes) {
    const auto shown = [](const std::string& v) { return v.empty() ? std::string("''") : v; };
    keys += (keys.empty() ? "" : ",") + change.key;
    values += (values.empty() ? "" : ",") + shown(change.current);
    described += (described.empty() ? "" : ", ") + change.key + " " + shown(change.stored) +
                 " -> " + shown(change.current);
  }
  require(config.allow_config_change_on_resume, keys, values,
          "differs from the run's " + config_path + " (" + described + "); resuming " +
              checkpoint +
              " under it would change the run's trajectory: set "
              "allow_config_change_on_resume=true to resume anyway, or use another run_name");
  report_warning("train", "resuming " + checkpoint +
                              " under a changed config (allow_config_change_on_resume=true): " +
                              described);
}

// The run folder, created and writable, or an Error naming
// base_output_directory (a file in the way, no permission, a read-only disk).
void prepare_run_folder(const std::string& run_dir, const TrainConfig& config) {
  std::error_code error;
  std::filesystem::create_directories(run_dir, error);
  if (error) {
    fail("base_output_directory", config.base_output_directory,
         "cannot create the run folder " + run_dir + ": " + error.message());
  }
  if (::access(run_dir.c_str(), W_OK | X_OK) != 0) {
    fail("base_output_directory", config.base_output_directory,
         "cannot write in the run folder " + run_dir + ": " + std::strerror(errno));
  }
}

// Temp files that killed writers of this run left (a checkpoint's is as
// large as the model): rank 0 owns the run folder's files, each rank its
// checkpoint folder. A live writer's temp file is never touched.
void remove_stale_temp_files_of_run(const std::string& run_dir, const std::string& shard, int rank,
                                    bool checkpointing) {
  if (rank == 0) remove_stale_temp_files(run_dir, [](const std::string&) { return true; });
  if (!checkpointing) return;
  const std::string folder =
      std::filesystem::path(checkpoint_path(run_dir, 0, shard)).parent_path().string();
  remove_stale_temp_files(folder, [](const std::string& target) {
    return target.rfind("step_", 0) == 0 && target.ends_with(".ckpt");
  });
}

std::string describe_attention(const TrainConfig& c) {
  if (c.attention_type == "none") return "none";
  std::ostringstream out;
  out << c.attention_type << " " << c.base_num_query_heads << " heads";
  if (c.attention_type == "mla") {
    out << " (q_lora " << c.q_lora_rank << ", kv_lora " << c.kv_lora_rank << ", qk "
        << c.qk_nope_head_dim << "+" << c.qk_rope_head_dim << ", v " << c.v_head_dim << ")";
  } else {
    out << " (" << c.base_num_kv_heads << " kv, head_dim " << c.head_dim << ")";
  }
  out << ", rope " << c.rope_type;
  return out.str();
}

}  // namespace

MeshShape check_launch(const TrainConfig& config, const Communicator* comm) {
  const int ranks = comm_size(comm);
  MeshShape shape;
  if (config.ici_data_parallelism != 1 || config.ici_fsdp_parallelism != 1 ||
      config.ici_expert_parallelism == -1) {
    shape = resolve_mesh_shape(config.ici_data_parallelism, config.ici_fsdp_parallelism,
                               config.ici_expert_parallelism, ranks);
  } else {
    // Pure expert parallelism names its one key, as it always has.
    require(
      config.ici_expert_parallelism == ranks, "ici_expert_parallelism",
      config.ici_expert_parallelism,
      "does not match the " + std::to_string(ranks) + " process(es) of this launch (run " +
          (config.ici_expert_parallelism > 1
               ? "mpirun -np " + std::to_string(config.ici_expert_parallelism) + " raggemm train"
               : "raggemm train without mpirun, or set ici_expert_parallelism=" +
                     std::to_string(ranks)) +
          ")");
    shape.expert = ranks;
  }
  require(config.moe.router.num_experts % shape.expert == 0, "num_experts",
          config.moe.router.num_experts,
          "must be divisible by ici_expert_parallelism=" + std::to_string(shape.expert));
  require(config.moe.sparse_matmul || ranks == 1, "sparse_matmul", "false",
          "the dense path (expert capacity per batch) runs on one process; "
          "a mesh of " + std::to_string(ranks) + " processes needs sparse_matmul=true");
  return shape;
}

TrainResult run_training(const TrainConfig& launch_config, std::ostream& main_log,
                         Communicator* comm) {
  namespace fs = std::filesystem;
  const MeshShape mesh_shape = check_launch(launch_config, comm);
  // The config with the mesh's -1 filled in (its resolved_yaml keeps the
  // text as given, so a resume compares like with like).
  TrainConfig config = launch_config;
  config.ici_data_parallelism = mesh_shape.data;
  config.ici_fsdp_parallelism = mesh_shape.fsdp;
  config.ici_expert_parallelism = mesh_shape.expert;
  const int rank = comm_rank(comm), ranks = comm_size(comm);
  if (ranks == 1) comm = nullptr;  // one process: no collectives at all
  const Mesh mesh(comm, mesh_shape);
  NullBuffer null_buffer;
  std::ostream null_log(&null_buffer);
  std::ostream& log = rank == 0 ? main_log : null_log;
  const std::string shard = shard_name(rank, ranks);

  // Before anything is allocated (the data, the model) or written, on every
  // rank: first each tensor alone (naming the keys that size it), then the
  // whole run's estimate.
  check_allocation_sizes(config);
  const int64_t machine_memory = physical_memory_bytes();  // 0: unknown, no bound
  if (machine_memory > 0) check_memory(config, static_cast<double>(machine_memory));
  TrainResult result;
  result.run_dir = config.run_dir();
  prepare_run_folder(result.run_dir, config);
  const std::string config_path = (fs::path(result.run_dir) / "config.yml").string();
  // Which checkpoint to resume, and whether the config may resume it, before
  // config.yml is replaced by this invocation's.
  std::optional<std::string> resume_from;
  if (config.enable_checkpointing) {
    resume_from = agreed_checkpoint(result.run_dir, shard, comm);
    if (resume_from) check_resume_config(config_path, config, *resume_from);
  }
  remove_stale_temp_files_of_run(result.run_dir, shard, rank, config.enable_checkpointing);
  if (comm) comm->barrier();  // every rank has read config.yml before rank 0 replaces it
  if (rank == 0) {
    write_file_atomic(config_path, config.resolved_yaml.data(), config.resolved_yaml.size());
  }

  // Rank r reads its slice of the global batch (docs/parallelism.md).
  const DataShard data_shard{rank * config.per_device_batch_size,
                             ranks * config.per_device_batch_size};
  std::unique_ptr<Dataset> data =
      config.dataset_type == "text"
          ? make_text_dataset(config.dataset_path, config.per_device_batch_size,
                              config.max_target_length, config.seed, data_shard)
          : make_synthetic_dataset(config.vocab_size, config.synthetic_branching,
                                   config.per_device_batch_size, config.max_target_length,
                                   config.seed, data_shard);
  result.loss_floor = data->loss_floor();

  // One rank tunes (the cache is shared); the others wait for its winners.
  if (config.moe.use_tune_cache && rank == 0) autotune_missing(config, log);
  if (comm) comm->barrier();
  Profiler profiler(config.profiler == "trace");
  profiler.set_rank(rank);
  ModelConfig model_settings = model_config(config, mesh.axis(MeshAxis::kExpert));
  model_settings.batch_comms = {mesh.axis(MeshAxis::kData), mesh.axis(MeshAxis::kFsdp)};
  Model<float> model(model_settings, &profiler);
  model.init(config.seed);
  int64_t parameter_count = 0;
  for (auto* p : model.params()) parameter_count += p->size();
  // FSDP keeps this rank's shards and frees the rest; the optimizer and the
  // checkpoints see the shards (and the whole parameters). The optimizer
  // then switches the matrices among them to bf16 storage
  // (weight_dtype=bf16), shards included.
  ShardedParams sharded(model.units(), mesh, config.fsdp_keep_gathered_weights);
  model.set_hooks(&sharded);
  Optimizer optimizer(config, sharded.local_params());
  // What this rank stores of the weights (FSDP: its shards).
  int64_t weight_bytes = 0;
  for (auto* p : sharded.local_params()) weight_bytes += p->storage_bytes();
  log << "run " << result.run_dir << ": " << data->describe() << "\n"
      << "model " << config.model_name << ": " << config.base_num_decoder_layers << " layers ("
      << config.first_num_dense_layers << " dense), embed " << config.base_emb_dim << ", mlp "
      << config.base_mlp_dim << " (experts " << config.moe.mlp_dim << "), attention "
      << describe_attention(config) << ", " << config.moe.router.num_experts << " experts top-" << config.moe.router.top_k << ", "
      << config.moe.shared_experts << " shared; " << parameter_count << " parameters"
      << (ranks > 1 ? " on rank 0" : "") << "; " << config.global_tokens_per_step()
      << " tokens/step; dtype " << dtype_name(config.moe.dtype) << ", weights "
      << dtype_name(config.weight_dtype) << " (" << format("%.1f", weight_bytes / double(1 << 20))
      << " MiB stored)"
      << (config.moe.quantization
              ? std::string(", quantization ") + quantization_name(config.moe.quantization)
              : "")
      << "\n";
  if (ranks > 1) {
    log << "mesh " << mesh_shape.describe() << ": " << ranks << " processes, "
        << config.per_device_batch_size << " sequences each"
        << (mesh_shape.fsdp > 1 ? "; non-expert parameters and optimizer state sharded over " +
                                      std::to_string(mesh_shape.fsdp) + " fsdp ranks" +
                                      (config.fsdp_keep_gathered_weights
                                           ? " (gathered weights kept for backward)"
                                           : "")
                                : "")
        << "\n";
  }
  if (mesh_shape.expert > 1) {
    log << "expert parallelism: " << mesh_shape.expert << " processes, "
        << config.moe.router.num_experts / mesh_shape.expert << " experts and "
        << config.per_device_batch_size << " sequences each, "
        << (config.moe.use_ring_of_experts ? "ring of experts" : "all-to-all dispatch") << "\n";
  }
  if (config.moe.router.num_experts > 0 &&
      config.base_num_decoder_layers > config.first_num_dense_layers) {
    log << "kernels: " << config.kernel_selection << "\n";
    describe_plans(config, log);
  }
  {
    const MemoryEstimate estimate = estimate_memory(config);
    log << "memory estimate: " << format("%.2f", estimate.total_bytes() / (1 << 30))
        << " GiB per process (machine " << format("%.1f", static_cast<double>(machine_memory) / (1 << 30))
        << " GiB)\n";
  }
  log << "loss floor (entropy rate of the data): " << format("%.4f", result.loss_floor)
      << " nats/token\n";

  // Resume.
  int64_t start = 0;
  const std::string metrics_path = (fs::path(result.run_dir) / "metrics.jsonl").string();
  if (config.enable_checkpointing) {
    if (const std::optional<std::string>& latest = resume_from) {
      CheckpointData saved = load_checkpoint(*latest);
      require(saved.shard == shard, "checkpoint", *latest,
              "holds shard '" + saved.shard + "', not this process's '" + shard +
                  "' (resume with the same ici_expert_parallelism)");
      // Checkpoints before meshes are one process's or pure expert
      // parallelism's; a mesh's must be this mesh's.
      const std::vector<int64_t> mine = {mesh_shape.data, mesh_shape.fsdp, mesh_shape.expert};
      const bool legacy_fits = saved.mesh.empty() && mesh_shape.data == 1 && mesh_shape.fsdp == 1;
      require(legacy_fits || saved.mesh == mine,
              "ici_data_parallelism,ici_fsdp_parallelism,ici_expert_parallelism",
              std::to_string(mine[0]) + "," + std::to_string(mine[1]) + "," +
                  std::to_string(mine[2]),
              "the checkpoint " + *latest + " was written by mesh " +
                  (saved.mesh.empty() ? std::string("(1, 1, ") + std::to_string(ranks) + ")"
                                      : MeshShape{saved.mesh[0], saved.mesh[1], saved.mesh[2]}
                                            .describe()) +
                  "; resume with that mesh or reshard it (raggemm reshard)");
      auto load_into = [&](const std::string& name, std::vector<float>& target) {
        auto it = saved.blobs.find(name);
        require(it != saved.blobs.end() && it->second.size() == target.size(), "checkpoint",
                *latest, "does not match the model: blob '" + name + "' missing or resized");
        target = it->second;
      };
      // Parameter blobs are f32 whatever the storage (a bf16 param's is its
      // widened value); bf16 storage is then rebuilt from the masters.
      for (auto* p : sharded.local_params()) {
        std::vector<float> values(static_cast<size_t>(p->size()));
        load_into("param/" + p->name, values);
        p->set_values(values);
      }
      for (auto& [name, blob] : optimizer.state()) load_into(name, *blob);
      optimizer.update_count() = saved.updates;
      optimizer.sync_weights();
      start = saved.step;
      result.resumed_from_step = start;
      log << "resumed from " << *latest << " (step " << start << ")\n";
    }
  }
  std::ofstream metrics;
  if (rank == 0) {
    if (start > 0) {
      truncate_metrics(metrics_path, start);
    } else {
      write_file_atomic(metrics_path, "", 0);
    }
    metrics.open(metrics_path, std::ios::app);
  }

  auto save = [&](int64_t step) {
    auto scope = profile(&profiler, "checkpoint", OpKind::kSpan);
    CheckpointData saved;
    saved.step = step;
    saved.updates = optimizer.update_count();
    saved.shard = shard;
    saved.mesh = {mesh_shape.data, mesh_shape.fsdp, mesh_shape.expert};
    saved.rank = rank;
    saved.fsdp_sizes = sharded.sharded_sizes();
    saved.expert_params = sharded.expert_params();
    for (auto* p : sharded.local_params()) saved.blobs["param/" + p->name] = p->values_f32();
    for (auto& [name, blob] : optimizer.state()) saved.blobs[name] = *blob;
    save_checkpoint(checkpoint_path(result.run_dir, step, shard), saved);
    profiler.take_totals();  // checkpoint time belongs to no step
  };
  // save_checkpoint_on_start: the initial parameters, as step 0 (a fresh run only).
  if (config.enable_checkpointing && config.save_checkpoint_on_start && start == 0) save(0);

  const int64_t tokens = config.tokens_per_step();
  // Held-out batches: indices no training step reads (steps count from 0).
  auto evaluate = [&]() {
    auto scope = profile(&profiler, "eval", OpKind::kSpan);
    double sum = 0;
    for (int64_t i = 0; i < config.eval_steps; ++i) {
      const Batch batch = data->batch(kEvalBatchOffset + i);
      sum += model.loss(batch.inputs.data(), batch.targets.data(), tokens).cross_entropy;
    }
    profiler.take_totals();  // eval time belongs to no step
    return sum / static_cast<double>(config.eval_steps);
  };
  const int64_t global_tokens = config.global_tokens_per_step();
  for (int64_t step = start + 1; step <= config.steps; ++step) {
    const auto begin = std::chrono::steady_clock::now();
    double axis_before[3];
    for (MeshAxis axis : kAllMeshAxes) {
      axis_before[static_cast<int>(axis)] = mesh.axis_seconds(axis);
    }
    LossParts parts;
    const double lr = Optimizer::learning_rate(config, step);
    {
      // The step's slice in the trace: it holds the layers' slices, which
      // hold the GMM events.
      auto step_span = profile(&profiler, "step", OpKind::kSpan);
      step_span.arg("step", step);
      Batch batch;
      {
        auto scope = profile(&profiler, "data", OpKind::kData);
        batch = data->batch(step - 1);
      }
      {
        auto span = profile(&profiler, "forward_backward", OpKind::kSpan);
        parts = model.loss_and_grad(batch.inputs.data(), batch.targets.data(), tokens);
        sharded.finish_gradients();
      }
      require(std::isfinite(parts.total), "loss", parts.total,
              "diverged at step " + std::to_string(step) + " (lower learning_rate?)");
      {
        auto scope = profile(&profiler, "optimizer", OpKind::kOptimizer);
        optimizer.step(lr);
        sharded.release_all();  // gathered copies are stale now
        for (auto* layer : model.moe_layers())
          layer->update_selection_bias(config.routed_bias_update_rate);
      }
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    const Profiler::Totals totals = profiler.take_totals();

    StepMetrics m;
    m.step = step;
    m.loss = parts.cross_entropy;
    m.aux_loss = parts.aux_loss;
    m.learning_rate = lr;
    m.weight_dtype = dtype_name(config.weight_dtype);
    m.weight_bytes = weight_bytes;
    m.step_time_s = seconds;
    m.tokens_per_s = static_cast<double>(global_tokens) / seconds;
    {
      double* shares[3] = {&m.comm_dp_time_share, &m.comm_fsdp_time_share, &m.comm_ep_time_share};
      for (MeshAxis axis : kAllMeshAxes) {
        const int a = static_cast<int>(axis);
        *shares[a] = (mesh.axis_seconds(axis) - axis_before[a]) / seconds;
        m.comm_time_share += *shares[a];
      }
    }
    const double expert_s = totals.seconds_of(OpKind::kExpertGmm);
    const double dense_s = totals.seconds_of(OpKind::kDenseGmm);
    const double gmm_s = expert_s + dense_s;
    m.gmm_gflops = gmm_s > 0 ? (totals.expert_gmm_flops + totals.dense_gmm_flops) / gmm_s / 1e9 : 0;
    m.expert_gmm_gflops = expert_s > 0 ? totals.expert_gmm_flops / expert_s / 1e9 : 0;
    m.gmm_time_share = gmm_s / seconds;
    m.expert_gmm_time_share = expert_s / seconds;
    m.dense_gmm_time_share = dense_s / seconds;
    m.glue_time_share = totals.seconds_of(OpKind::kGlue) / seconds;
    m.attention_time_share = totals.seconds_of(OpKind::kAttention) / seconds;
    m.optimizer_time_share = totals.seconds_of(OpKind::kOptimizer) / seconds;
    m.data_time_share = totals.seconds_of(OpKind::kData) / seconds;
    for (auto* layer : model.moe_layers()) m.dropped_tokens += layer->routing().dropped;
    if (!model.moe_layers().empty()) {
      for (int32_t size : model.moe_layers()[0]->routing().group_sizes) {
        m.max_expert_load = std::max<int64_t>(m.max_expert_load, size);
      }
    }
    if (config.eval_interval > 0 && step % config.eval_interval == 0) m.eval_loss = evaluate();
    // "fsdp 28.0% 264ms": an axis's share of the step and its time.
    auto axis_time = [&](const char* axis, double share) {
      return std::string(axis) + " " + format("%.1f", 100 * share) + "% " +
             format("%.0f", 1000 * share * seconds) + "ms";
    };
    log << log_line(m, config.steps, result.loss_floor)
        << (comm ? " | comm " + format("%4.1f", 100 * m.comm_time_share) + "% (" +
                       axis_time("dp", m.comm_dp_time_share) + ", " +
                       axis_time("fsdp", m.comm_fsdp_time_share) + ", " +
                       axis_time("ep", m.comm_ep_time_share) + ")"
                 : "")
        << (std::isnan(m.eval_loss) ? "" : " | eval loss " + format("%.4f", m.eval_loss))
        << std::endl;
    if (rank == 0) {
      metrics << to_json(m).dump() << "\n";
      metrics.flush();
    }
    result.steps.push_back(m);

    if (config.enable_checkpointing &&
        (step % config.checkpoint_period == 0 || step == config.steps)) {
      save(step);
    }
  }

  if (profiler.recording()) {
    const std::string trace =
        (fs::path(result.run_dir) / (ranks > 1 ? "trace." + shard + ".json" : "trace.json"))
            .string();
    profiler.write_trace(trace);
    log << "trace: " << trace << " (" << profiler.event_count() << " events)\n";
  }
  if (!result.steps.empty()) {
    double time = 0, share = 0, expert_share = 0, glue = 0, gflops = 0, comm_share = 0,
           attention = 0, axis_share[3] = {0, 0, 0};
    // Step 1 pays one-time allocations; the summary averages the rest.
    const size_t first = result.steps.size() > 1 ? 1 : 0;
    for (size_t i = first; i < result.steps.size(); ++i) {
      time += result.steps[i].step_time_s;
      share += result.steps[i].gmm_time_share;
      expert_share += result.steps[i].expert_gmm_time_share;
      glue += result.steps[i].glue_time_share;
      attention += result.steps[i].attention_time_share;
      gflops += result.steps[i].gmm_gflops;
      comm_share += result.steps[i].comm_time_share;
      axis_share[0] += result.steps[i].comm_dp_time_share;
      axis_share[1] += result.steps[i].comm_fsdp_time_share;
      axis_share[2] += result.steps[i].comm_ep_time_share;
    }
    const double n = static_cast<double>(result.steps.size() - first);
    const StepMetrics& last = result.steps.back();
    log << "done: step " << last.step << ", loss " << format("%.4f", last.loss) << " (floor "
        << format("%.4f", result.loss_floor) << ", gap "
        << format("%.4f", last.loss - result.loss_floor) << "); mean step "
        << format("%.3f", time / n) << " s, "
        << format("%.0f", static_cast<double>(global_tokens) * n / time) << " tok/s, GMM "
        << format("%.1f", gflops / n) << " GFLOP/s, GMM share " << format("%.1f", 100 * share / n)
        << "% (experts " << format("%.1f", 100 * expert_share / n) << "%, glue "
        << format("%.1f", 100 * glue / n) << "%), attention "
        << format("%.1f", 100 * attention / n) << "% of step"
        << (comm ? "; communication " + format("%.1f", 100 * comm_share / n) + "% of step (dp " +
                       format("%.1f", 100 * axis_share[0] / n) + "%, fsdp " +
                       format("%.1f", 100 * axis_share[1] / n) + "%, ep " +
                       format("%.1f", 100 * axis_share[2] / n) + "%)"
                 : "")
        << "\n";
  }
  // What this rank holds after the last step (FSDP frees gathered copies
  // after each use; the optimizer state is the shards').
  result.non_expert_param_bytes = sharded.non_expert_value_bytes();
  result.expert_param_bytes = sharded.expert_value_bytes();
  for (auto& [name, blob] : optimizer.state()) {
    const std::string param = name.substr(name.find('/') + 1);
    (is_expert_weight(param) ? result.expert_optimizer_bytes : result.non_expert_optimizer_bytes) +=
        static_cast<int64_t>(blob->capacity() * sizeof(float));
  }
  log << "memory on rank 0: non-expert parameters " << format("%.2f", result.non_expert_param_bytes / 1048576.0)
      << " MiB + optimizer state " << format("%.2f", result.non_expert_optimizer_bytes / 1048576.0)
      << " MiB; expert weights " << format("%.2f", result.expert_param_bytes / 1048576.0)
      << " MiB + optimizer state " << format("%.2f", result.expert_optimizer_bytes / 1048576.0)
      << " MiB\n";
  return result;
}

}  // namespace raggemm::train
