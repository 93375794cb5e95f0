// The trainer: a small MoE language model (embedding, decoder blocks of
// [RMSNorm, MoE or dense MLP, residual], final RMSNorm, output projection,
// next-token cross-entropy) trained on a synthetic Markov chain or a local
// text file, with per-step metrics, traces and atomic checkpoints.
//
// Configs are flat key/value maps: configs/base.yml lists every key with its
// default; overrides come as "key=value" or "key:" "value". Every key is
// documented in docs/moe_configuration.md.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "raggemm/mesh.h"
#include "raggemm/moe.h"


namespace raggemm::train {

// ---------------------------------------------------------------------------
// Config.

// Every key, in the order configs/base.yml lists them, with its default.
struct ConfigKey {
  std::string name;
  std::string default_value;
  std::string help;
};
const std::vector<ConfigKey>& config_keys();
// The valid key (or alias) nearest to `key` (edit distance).
std::string nearest_config_key(const std::string& key);

// Another spelling of a key (e.g. tokamax_gmm_autotune for gmm_autotune). An
// alias is the same key everywhere: Settings::set/get accept it, giving both
// spellings is a duplicate, config.yml and the resume check use `key`.
struct ConfigKeyAlias {
  std::string alias;
  std::string key;
};
const std::vector<ConfigKeyAlias>& config_key_aliases();
// `key` itself, or the key an alias stands for.
std::string canonical_config_key(const std::string& key);

// Raw settings: key -> value text, always holding every key.
class Settings {
 public:
  Settings();  // every key at its default
  // Unknown key: Error naming the key and suggesting the nearest one. An
  // alias sets its key. The last value set wins (duplicates are refused by
  // apply_file and parse_train_arguments, which know where values came from).
  void set(const std::string& key, const std::string& value);
  const std::string& get(const std::string& key) const;
  // Reads a flat YAML map; every key must be known, and a key (or an alias
  // of it) given twice in the file is an Error naming both lines.
  void apply_file(const std::string& path);
  // The resolved config as YAML, in key order.
  std::string to_yaml() const;
  const std::map<std::string, std::string>& values() const { return values_; }
  // A command-line override: set() and remembered, because a model preset's
  // keys replace the config file's values but conflict with these (unless
  // override_model_config=true).
  void set_override(const std::string& key, const std::string& value);
  const std::set<std::string>& overridden() const { return overridden_; }

 private:
  std::map<std::string, std::string> values_;
  std::set<std::string> overridden_;
};

// `raggemm train` arguments: an optional config file first, then overrides
// as "key=value" (one word) or "key:" "value" (two words), mixed freely. An
// override may change a key of the file; a key (or an alias of it) given
// twice among the overrides is an Error naming both values.
Settings parse_train_arguments(const std::vector<std::string>& args);

struct TrainConfig {
  std::string run_name;
  std::string base_output_directory;
  std::string dataset_type;  // synthetic | text
  std::string dataset_path;
  int64_t synthetic_branching = 4;
  int64_t steps = 0;
  int64_t per_device_batch_size = 0;
  int64_t max_target_length = 0;
  int64_t vocab_size = 0;
  int64_t base_emb_dim = 0;
  int64_t base_mlp_dim = 0;
  int64_t base_num_decoder_layers = 0;
  int64_t first_num_dense_layers = 0;
  double learning_rate = 0;
  int64_t learning_rate_schedule_steps = -1;
  double warmup_steps_fraction = 0;
  double cosine_learning_rate_final_fraction = 1;
  std::string opt_type;  // sgd | adamw
  double adam_b1 = 0.9, adam_b2 = 0.95, adam_eps = 1e-8, adam_weight_decay = 0;
  DType weight_dtype = DType::kF32;
  double routed_bias_update_rate = 0;
  uint64_t seed = 0;
  bool enable_checkpointing = false;
  int64_t checkpoint_period = 0;
  bool save_checkpoint_on_start = false;  // with enable_checkpointing: step 0 too
  int64_t eval_interval = 0;              // evaluate every N steps (0: never)
  int64_t eval_steps = 1;                 // held-out batches per evaluation
  std::string profiler;  // "" | trace
  bool allow_config_change_on_resume = false;
  // Expert parallelism (docs/parallelism.md): P processes, each with
  // num_experts / P experts and per_device_batch_size sequences of the
  // global batch of P * per_device_batch_size.
  int64_t ici_expert_parallelism = 1;
  // The mesh (docs/parallelism.md): dp x fsdp x ep processes, each reading
  // per_device_batch_size sequences of the global batch. -1 in one axis
  // (any of the three) is filled at launch from the process count;
  // run_training resolves it before anything else.
  int64_t ici_data_parallelism = 1;
  int64_t ici_fsdp_parallelism = 1;
  // FSDP: keep each layer's gathered weights from forward to backward
  // (memory of the whole model, no second all-gather).
  bool fsdp_keep_gathered_weights = false;
  // Model preset and attention (docs/moe_configuration.md, "Attention" and
  // "Model presets"). moe.mlp_dim is the experts' hidden size
  // (base_moe_mlp_dim, or base_mlp_dim when unset); base_mlp_dim the dense
  // layers'.
  std::string model_name = "default";
  std::string attention_type = "mha";  // mha | gqa | mla | none
  int64_t base_num_query_heads = 0;
  int64_t base_num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t q_lora_rank = 0;
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  std::string rope_type = "default";  // default | yarn
  double rope_max_timescale = 10000;
  double rope_factor = 40;
  int64_t original_max_position_embeddings = 4096;
  int64_t max_position_embeddings = 163840;
  double beta_fast = 32;
  double beta_slow = 1;
  double mscale = 1;
  moe::MoeConfig moe;         // dims, router, dtype, quantization, plans (and use_ring_of_experts)
  std::string resolved_yaml;  // every key with its value, as written to config.yml
  // The kernel of every pass and the key that chose it (the startup log).
  std::string kernel_selection;

  std::string run_dir() const;
  // Tokens of one process's share of a step.
  int64_t tokens_per_step() const { return per_device_batch_size * max_target_length; }
  // Processes of the mesh (axes resolved; an unresolved -1 counts as 1).
  int64_t processes() const {
    auto axis = [](int64_t v) { return v > 0 ? v : int64_t{1}; };
    return axis(ici_data_parallelism) * axis(ici_fsdp_parallelism) *
           axis(ici_expert_parallelism);
  }
  int64_t global_tokens_per_step() const { return processes() * tokens_per_step(); }
};

// Typed, validated config; invalid values and combinations throw Error
// naming the keys.
TrainConfig resolve(const Settings& settings);

// ---------------------------------------------------------------------------
// Resuming under another config (docs/moe_configuration.md, "Resuming").

// The keys that may differ between a run's config.yml and a resume without
// changing the trajectory: length, logging, profiling, checkpoint cadence,
// eval, threads, location. An explicit short list: every other key,
// including keys added later, counts as changing the trajectory.
const std::vector<std::string>& resume_harmless_keys();
bool changes_trajectory(const std::string& key);

struct ConfigChange {
  std::string key;  // the key's own name (aliases resolved)
  std::string stored;   // in the run's config.yml (the default when absent there)
  std::string current;
};
// The trajectory keys whose values differ between two config.yml texts
// (numbers and booleans compare by value: 0.003 == 3e-3, yes == true), in
// key order. Keys of `stored` this build does not know are returned in
// `unknown`.
std::vector<ConfigChange> trajectory_changes(const std::string& stored_yaml,
                                             const std::string& current_yaml,
                                             std::vector<std::string>* unknown = nullptr);

// ---------------------------------------------------------------------------
// Training.

struct StepMetrics {
  int64_t step = 0;     // 1-based: the step just completed
  double loss = 0;      // next-token cross-entropy, nats
  double aux_loss = 0;  // load-balancing loss summed over MoE layers (unweighted)
  double learning_rate = 0;
  double step_time_s = 0;
  double tokens_per_s = 0;
  double gmm_gflops = 0;      // all GMM flops / GMM time
  double gmm_time_share = 0;  // GMM time / step time
  double expert_gmm_time_share = 0;
  double dense_gmm_time_share = 0;
  double glue_time_share = 0;
  double attention_time_share = 0;  // everything inside attention (projections, core, RoPE)
  double optimizer_time_share = 0;
  double data_time_share = 0;
  double comm_time_share = 0;  // mesh: time inside collectives / step time, all axes
  // The same per mesh axis (docs/parallelism.md): data (gradient and
  // statistics sums over replicas), fsdp (all-gathers, reduce-scatters),
  // expert (dispatch, ring).
  double comm_dp_time_share = 0;
  double comm_fsdp_time_share = 0;
  double comm_ep_time_share = 0;
  double expert_gmm_gflops = 0;
  int64_t max_expert_load = 0;  // largest group of the first MoE layer
  // Dense path: (token, slot) assignments dropped past capacity, all MoE
  // layers.
  int64_t dropped_tokens = 0;
  // Mean loss over eval_steps held-out batches after this step's update;
  // NaN on steps without evaluation (eval_interval).
  double eval_loss = std::numeric_limits<double>::quiet_NaN();
  // The parameters' storage as the kernels read it: weight_dtype ("f32" or
  // "bf16") and the bytes of the stored values (this rank's; bf16 matrices
  // count 2 bytes an element; f32 masters and gradients are not included).
  std::string weight_dtype = "f32";
  int64_t weight_bytes = 0;
};

struct TrainResult {
  std::string run_dir;
  double loss_floor = 0;  // entropy rate of the data (nats/token); NaN if unknown
  int64_t resumed_from_step = 0;
  std::vector<StepMetrics> steps;  // of this invocation
  // Bytes this rank held after its last step (vector capacities): values
  // and optimizer state of the routed experts' weights and of everything
  // else (FSDP: the shards).
  int64_t non_expert_param_bytes = 0, non_expert_optimizer_bytes = 0;
  int64_t expert_param_bytes = 0, expert_optimizer_bytes = 0;
};

// The mesh's launch checks, before anything trains: ici_data_parallelism x
// ici_fsdp_parallelism x ici_expert_parallelism (one of them may be -1)
// must be the communicator's ranks (null = one), num_experts must divide
// by the expert axis; otherwise Error naming the keys and values. (With
// dp = fsdp = 1 the error names ici_expert_parallelism alone, as before
// meshes.) Returns the mesh with any -1 filled in.
MeshShape check_launch(const TrainConfig& config, const Communicator* comm);

// Runs (or resumes) a training; writes the run directory; prints one line
// per step to `log`. With a communicator of P > 1 ranks (the mesh)
// every rank calls it: rank r trains on sequences [r * B, (r + 1) * B) of
// each global batch, rank 0 alone logs and writes config.yml and
// metrics.jsonl, every rank writes its own checkpoint shard. Metrics are of
// the global batch (loss, tokens/s).
TrainResult run_training(const TrainConfig& config, std::ostream& log,
                         Communicator* comm = nullptr);

// Checks a checkpoint file (magic, size, checksum); returns its step or
// throws Error naming the path.
int64_t verify_checkpoint(const std::string& path);

}  // namespace raggemm::train
