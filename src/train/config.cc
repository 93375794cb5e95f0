// Trainer config: the key table (every key with its default), YAML and
// command-line parsing, and resolution into a typed, validated TrainConfig.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <limits>
#include <sstream>

#include "train/model.h"
#include "train/presets.h"
#include "raggemm/error.h"
#include "raggemm/moe_plan.h"
#include "raggemm/quant.h"
#include "raggemm/train.h"
#include "train/size_checks.h"
#include "train/kernel_selection.h"

namespace raggemm::train {
namespace {

std::vector<ConfigKey> build_keys() {
  std::vector<ConfigKey> keys = {
      {"run_name", "moe_base", "name of the run; output goes to base_output_directory/run_name"},
      {"base_output_directory", "runs", "where run directories are created"},
      {"seed", "0", "seed of the parameters and the data"},
      {"steps", "150", "training steps"},
      {"dataset_type", "synthetic",
       "synthetic (seeded Markov chain) or text (dataset_path, bytes)"},
      {"dataset_path", "", "text file read as bytes when dataset_type=text"},
      {"synthetic_branching", "4", "likely successors per state of the synthetic Markov chain"},
      {"per_device_batch_size", "8", "sequences per step"},
      {"max_target_length", "128", "tokens per sequence"},
      {"vocab_size", "256", "vocabulary size (256 for text)"},
      {"base_emb_dim", "256", "model (embedding) dimension"},
      {"base_mlp_dim", "512", "hidden dimension of each expert and of dense MLPs"},
      {"base_num_decoder_layers", "2", "decoder blocks"},
      {"first_num_dense_layers", "0", "the first blocks use a dense MLP instead of MoE"},
      {"num_experts", "8", "routed experts per MoE block"},
      {"num_experts_per_tok", "2", "experts each token is routed to (top-k)"},
      {"shared_experts", "0",
       "shared experts (a dense SwiGLU MLP of width shared_experts * base_mlp_dim)"},
      {"norm_topk_prob", "true", "renormalise the top-k routing weights to sum 1"},
      {"routed_score_func", "softmax", "softmax or sigmoid router scores"},
      {"routed_bias", "false", "sigmoid only: per-expert selection bias (aux-loss-free balancing)"},
      {"routed_bias_update_rate", "0.001", "step of the selection-bias update"},
      {"n_routing_groups", "-1", "expert groups for group-limited routing (-1: off)"},
      {"topk_routing_group", "-1", "groups each token may use (-1: off)"},
      {"routed_scaling_factor", "1.0", "multiplies the routing weights"},
      {"load_balance_loss_weight", "0.01", "weight of the load-balancing loss"},
      {"fused_gate_up", "false", "one gate|up weight [E, embed, 2*mlp]; v2 fwd fuses SwiGLU"},
      {"swiglu_in_gmm", "true",
       "two gate/up weights: SwiGLU runs in the wi fwd and wo dlhs GMMs' store stage"},
      {"ici_data_parallelism", "1",
       "data-parallel replicas of the mesh (-1: what the other axes leave of mpirun -np)"},
      {"ici_fsdp_parallelism", "1",
       "FSDP axis: non-expert parameters and their optimizer state sharded over it (-1: fill)"},
      {"ici_expert_parallelism", "1",
       "expert axis: each rank holds num_experts/ep experts (-1: fill); dp*fsdp*ep = mpirun -np"},
      {"fsdp_keep_gathered_weights", "false",
       "FSDP: keep a layer's all-gathered weights from forward to backward (no second gather)"},
      {"use_ring_of_experts", "false",
       "expert parallelism exchange: false = all-to-all dispatch, true = ring of experts"},
      {"opt_type", "adamw", "sgd or adamw"},
      {"learning_rate", "0.003", "peak learning rate"},
      {"learning_rate_schedule_steps", "-1", "length of the schedule (-1: steps)"},
      {"warmup_steps_fraction", "0.05", "linear warmup, as a fraction of the schedule"},
      {"cosine_learning_rate_final_fraction", "0.1",
       "cosine decay ends at this fraction of the peak"},
      {"adam_b1", "0.9", "AdamW beta1"},
      {"adam_b2", "0.95", "AdamW beta2"},
      {"adam_eps", "1e-8", "AdamW epsilon"},
      {"adam_weight_decay", "0.0", "AdamW decoupled weight decay"},
      {"weight_dtype", "f32", "f32 or bf16 (bf16 keeps f32 master weights)"},
      {"dtype", "f32", "activations / GMM inputs: f32 or bf16"},
      {"quantization", "", "\"\", fp8_full or int8 (routed expert GMMs)"},
      {"quantization_weight_scaling", "channel", "weight scales: channel or block:SIZE (v2)"},
  };
  keys.push_back({"use_gmm_v2", "auto",
                  "kernel of every pass: true (v2, group-aligned), false (v1), auto (each pass "
                  "takes the kernel its plan resolves: tune cache, else heuristic)"});
  for (const char* pass : {"fwd", "dlhs", "drhs"}) {
    keys.push_back({std::string("use_gmm_v2_") + pass, "",
                    std::string("kernel of the ") + pass +
                        " pass: true (v2), false (v1), \"\" (follow use_gmm_v2)"});
  }
  for (const char* weight : {"wi", "wo"}) {
    for (const char* pass : {"fwd", "dlhs", "drhs"}) {
      for (const char* dim : {"batch_seq", "embed_dim", "mlp_dim"}) {
        keys.push_back({std::string(weight) + "_tile_" + pass + "_" + dim, "",
                        "tile along " + std::string(dim) + " of " + weight + " " + pass +
                            " (\"\": tuned cache or heuristic)"});
      }
    }
  }
  std::vector<ConfigKey> rest = {
      {"input_buffer_count", "", "packed panels in flight, 1..4 (\"\": heuristic)"},
  };
  for (const char* weight : {"wi", "wo"}) {
    for (const char* pass : {"fwd", "dlhs", "drhs"}) {
      rest.push_back({std::string(weight) + "_input_buffer_count_" + pass, "",
                      "packed panels in flight for " + std::string(weight) + " " + pass +
                          ", 1..4 (\"\": input_buffer_count, else tuned cache or heuristic)"});
    }
  }
  for (ConfigKey key : std::vector<ConfigKey>{
      {"gmm_autotune", "false",
       "tune the expert GMM shapes the tune cache lacks (3 s each), then use the cache"},
      {"enable_checkpointing", "false", "write checkpoints and resume from the last one"},
      {"checkpoint_period", "50", "steps between checkpoints"},
      {"profiler", "", "\"\" or trace (Chrome trace-event JSON of every op)"},
      // Kernel selection and the dense path (docs/moe_configuration.md).
      {"sparse_matmul", "true",
       "true: routed experts as grouped matmuls; false: the dense path (dispatch/combine "
       "masks, batched matmuls over experts), unquantized, one process"},
      {"capacity_factor", "-1",
       "dense path: slots per expert = ceil(tokens * top_k / experts * factor); -1 keeps "
       "every token"},
      {"megablox", "false", "the megablox kernel (v1) in every pass"},
      {"use_tokamax_gmm", "false",
       "the tokamax kernels (v1 and v2, picked by use_gmm_v2*); wins over megablox"},
      {"quantization_activation_scaling", "row",
       "quantized activations: row (per token) or block:SIZE (per token and K-block, v2 fwd)"},
      // Model preset and attention (issue 15).
      {"model_name", "default",
       "model preset: default, deepseek3-671b, deepseek3-tiny, mixtral-8x7b, ... (its keys "
       "change only with override_model_config=true)"},
      {"override_model_config", "false", "let command-line keys override the preset's keys"},
      {"base_moe_mlp_dim", "", "hidden size of each routed/shared expert (\"\": base_mlp_dim)"},
      {"attention_type", "mha",
       "mha, gqa (query heads share kv heads), mla (DeepSeek latent attention) or none"},
      {"base_num_query_heads", "4", "attention query heads"},
      {"base_num_kv_heads", "4", "mha/gqa key/value heads (divides base_num_query_heads)"},
      {"head_dim", "64", "mha/gqa dimension of each head"},
      {"q_lora_rank", "0", "mla query latent rank (0: no query compression)"},
      {"kv_lora_rank", "512", "mla key/value latent rank"},
      {"qk_nope_head_dim", "128", "mla per-head query/key dims without RoPE"},
      {"qk_rope_head_dim", "64", "mla query/key dims with RoPE (the key part shared by heads)"},
      {"v_head_dim", "128", "mla per-head value dim"},
      {"rope_type", "default", "default (halves) or yarn (interleaved pairs, scaled frequencies)"},
      {"rope_max_timescale", "10000", "RoPE base theta"},
      {"rope_factor", "40", "yarn: frequency scaling factor"},
      {"original_max_position_embeddings", "4096", "yarn: context the base frequencies had"},
      {"max_position_embeddings", "163840",
       "yarn: context the model is extended to (mla mscale applies when above the original)"},
      {"beta_fast", "32", "yarn: rotations bounding the unscaled (fast) dims"},
      {"beta_slow", "1", "yarn: rotations bounding the fully scaled (slow) dims"},
      {"mscale", "1.0", "mla+yarn: softmax scale times (0.1 mscale ln(rope_factor) + 1)^2"},
      {"enable_goodput_recording", "false",
       "MaxText's goodput recording (a Cloud service): false only"},
      {"eval_interval", "0", "evaluate held-out loss every N steps (0: never)"},
      {"eval_steps", "4", "held-out batches per evaluation"},
      {"save_checkpoint_on_start", "false",
       "with enable_checkpointing: also save the initial parameters as step 0"},
  }) {
    rest.push_back(std::move(key));
  }
  keys.insert(keys.end(), rest.begin(), rest.end());
  // Hardening (issue 16).
  keys.push_back({"allow_config_change_on_resume", "false",
                  "resume a checkpointed run even though keys that change its trajectory differ "
                  "from the run's config.yml"});
  return keys;
}

// Where a key got its value, for the duplicate-key errors.
struct KeyOrigin {
  std::string spelling;  // the key as written (an alias, or the key itself)
  std::string value;
  int line = 0;  // 1-based line in a file; 0 on the command line
};

// The duplicate-key error: names the key and both values (with their lines
// in a file), and the alias when one of the two spellings is one.
[[noreturn]] void fail_duplicate(const KeyOrigin& first, const KeyOrigin& second,
                                 const std::string& where) {
  const std::string canonical = canonical_config_key(second.spelling);
  std::string alias_note;
  for (const std::string& name : {first.spelling, second.spelling}) {
    if (name != canonical) {
      alias_note = " (" + name + " is an alias of " + canonical + ")";
      break;
    }
  }
  const auto describe = [](const KeyOrigin& origin) {
    return (origin.line > 0 ? "line " + std::to_string(origin.line) + " " : std::string()) +
           origin.spelling + "=" + (origin.value.empty() ? "''" : origin.value);
  };
  fail(second.spelling, second.value.empty() ? "''" : second.value,
       "key given twice " + where + alias_note + ": first " + describe(first) + ", then " +
           describe(second) + "; give it once");
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string trim(const std::string& text) {
  size_t begin = 0, end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  std::string out = text.substr(begin, end - begin);
  // A quoted value ("" or "fp8_full") loses its quotes.
  if (out.size() >= 2 &&
      ((out.front() == '"' && out.back() == '"') || (out.front() == '\'' && out.back() == '\''))) {
    out = out.substr(1, out.size() - 2);
  }
  return out;
}

int64_t to_int(const Settings& s, const std::string& key, int64_t min);

// A mesh axis: a positive size, or -1 (filled at launch).
int64_t mesh_axis(const Settings& s, const std::string& key) {
  const int64_t value = to_int(s, key, -1);
  require(value != 0, key, value, "must be a positive size or -1 (what the other axes leave)");
  return value;
}

int64_t to_int(const Settings& s, const std::string& key, int64_t min) {
  const std::string& text = s.get(key);
  int64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  require(!text.empty() && error == std::errc() && end == text.data() + text.size(), key,
          text.empty() ? "''" : text, "expected an integer");
  require(value >= min, key, text, "must be at least " + std::to_string(min));
  return value;
}

double to_real(const Settings& s, const std::string& key, double min) {
  const std::string& text = s.get(key);
  double value = 0;
  try {
    size_t used = 0;
    value = std::stod(text, &used);
    require(used == text.size(), key, text, "expected a number");
  } catch (const std::logic_error&) {
    fail(key, text.empty() ? "''" : text, "expected a number");
  }
  require(std::isfinite(value) && value >= min, key, text,
          "must be a finite number >= " + std::to_string(min));
  return value;
}

bool to_bool(const Settings& s, const std::string& key) {
  std::string text = s.get(key);
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (text == "true" || text == "1" || text == "yes") return true;
  if (text == "false" || text == "0" || text == "no") return false;
  fail(key, s.get(key).empty() ? "''" : s.get(key), "expected true or false");
}

std::string one_of(const Settings& s, const std::string& key,
                   const std::vector<std::string>& allowed) {
  const std::string& text = s.get(key);
  if (std::find(allowed.begin(), allowed.end(), text) != allowed.end()) return text;
  std::string list;
  for (const std::string& a : allowed)
    list += (list.empty() ? "" : ", ") + (a.empty() ? "\"\"" : a);
  fail(key, text.empty() ? "''" : text, "expected one of: " + list);
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// quantization_activation_scaling: row -> 0, block:SIZE -> SIZE.
int64_t activation_k_block(const Settings& s) {
  const std::string& text = s.get("quantization_activation_scaling");
  if (text == "row") return 0;
  const RhsScaling blocks = parse_rhs_scaling(text, "quantization_activation_scaling");
  require(blocks.block(), "quantization_activation_scaling", text, "expected row or block:SIZE");
  return blocks.block_size;
}

// The kernel of every pass (kernel_selection.h: MaxText's precedence of
// use_tokamax_gmm over megablox, use_gmm_v2 auto|true|false, per-pass keys).
KernelSelection select_kernels(const Settings& s, Quantization quantization) {
  KernelKeys keys;
  keys.sparse_matmul = to_bool(s, "sparse_matmul");
  keys.megablox = to_bool(s, "megablox");
  keys.use_tokamax_gmm = to_bool(s, "use_tokamax_gmm");
  keys.use_gmm_v2 = lower(s.get("use_gmm_v2"));
  for (Pass pass : kAllPasses)
    keys.use_gmm_v2_pass[static_cast<size_t>(pass)] =
        lower(s.get(std::string("use_gmm_v2_") + pass_name(pass)));
  keys.quantization = quantization;
  keys.block_weight_scales =
      parse_rhs_scaling(s.get("quantization_weight_scaling"), "quantization_weight_scaling")
          .block();
  keys.block_activation_scales = activation_k_block(s) > 0;
  return train::select_kernels(keys);
}

// The tile plans from the plan keys, the kernels from select_kernels.
BlockPlan build_plan(const Settings& s, const KernelSelection& kernels) {
  BlockPlan plan;
  for (Weight weight : kAllWeights) {
    for (Pass pass : kAllPasses)
      plan.weight(weight).pass(pass).kernel = kernels.kernel[static_cast<size_t>(pass)];
  }
  for (const std::string& key : plan_setting_keys()) {
    if (key.find("_tile_") == std::string::npos &&
        key.find("input_buffer_count") == std::string::npos)
      continue;
    if (!s.get(key).empty()) apply_plan_setting(plan, key, s.get(key));
  }
  return plan;
}

// f32 | bf16, with MaxText's spellings float32 | bfloat16.
DType dtype_key(const Settings& s, const std::string& key) {
  const std::string& text = s.get(key);
  if (text == "bf16" || text == "bfloat16") return DType::kBF16;
  if (text == "f32" || text == "float32") return DType::kF32;
  fail(key, text.empty() ? "''" : text, "expected one of: f32, bf16 (or float32, bfloat16)");
}

// Keys of MaxText's command line that name services this machine does not
// have: accepted when off, refused by name when on.
void refuse_services(const Settings& s) {
  require(!to_bool(s, "enable_goodput_recording"), "enable_goodput_recording", "true",
          "goodput recording reports to Google Cloud Monitoring, which does not exist here; "
          "set it to false");
  const std::string& out = s.get("base_output_directory");
  require(out.rfind("gs://", 0) != 0, "base_output_directory", out,
          "Google Cloud Storage is not reachable here; use a local directory");
}

// Two spellings of one value: "1.0" and "1", "True" and "true".
bool same_value(const std::string& a, const std::string& b) {
  auto lower = [](std::string text) {
    std::transform(text.begin(), text.end(), text.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    return text;
  };
  if (lower(a) == lower(b)) return true;
  double x = 0, y = 0;
  auto [end_a, error_a] = std::from_chars(a.data(), a.data() + a.size(), x);
  auto [end_b, error_b] = std::from_chars(b.data(), b.data() + b.size(), y);
  return error_a == std::errc() && error_b == std::errc() && end_a == a.data() + a.size() &&
         end_b == b.data() + b.size() && x == y;
}

// The model preset's keys over the config file's; a command-line key that
// changes one needs override_model_config=true (MaxText's rule).
Settings with_model_preset(const Settings& input) {
  const std::string& name = input.get("model_name");
  const PresetKeys& preset = model_preset(name);
  const bool may_override = to_bool(input, "override_model_config");
  Settings out = input;
  for (const auto& [key, value] : preset) {
    if (input.overridden().count(key) == 0) {
      out.set(key, value);
      continue;
    }
    require(may_override || same_value(input.get(key), value), key, input.get(key),
            "model_name=" + name + " sets " + key + "=" + value +
                "; pass override_model_config=true to change a preset's key");
  }
  return out;
}

// The attention keys, validated as the model will build them.
void resolve_attention(const Settings& s, TrainConfig& c) {
  c.model_name = s.get("model_name");
  c.attention_type = one_of(s, "attention_type", {"mha", "gqa", "mla", "none"});
  c.base_num_query_heads = to_int(s, "base_num_query_heads", 1);
  c.base_num_kv_heads = to_int(s, "base_num_kv_heads", 1);
  c.head_dim = to_int(s, "head_dim", 1);
  c.q_lora_rank = to_int(s, "q_lora_rank", 0);
  c.kv_lora_rank = to_int(s, "kv_lora_rank", 1);
  c.qk_nope_head_dim = to_int(s, "qk_nope_head_dim", 0);
  c.qk_rope_head_dim = to_int(s, "qk_rope_head_dim", 2);
  c.v_head_dim = to_int(s, "v_head_dim", 1);
  c.rope_type = one_of(s, "rope_type", {"default", "yarn"});
  c.rope_max_timescale = to_real(s, "rope_max_timescale", 1);
  c.rope_factor = to_real(s, "rope_factor", 1);
  c.original_max_position_embeddings = to_int(s, "original_max_position_embeddings", 1);
  c.max_position_embeddings = to_int(s, "max_position_embeddings", 1);
  c.beta_fast = to_real(s, "beta_fast", 0);
  c.beta_slow = to_real(s, "beta_slow", 0);
  c.mscale = to_real(s, "mscale", 0);
  if (auto attention = attention_config(c)) model::validate(*attention);
}

}  // namespace

std::optional<model::AttentionConfig> attention_config(const TrainConfig& c) {
  if (c.attention_type == "none") return std::nullopt;
  model::AttentionConfig a;
  a.type = c.attention_type == "mla"   ? model::AttentionType::kMla
           : c.attention_type == "gqa" ? model::AttentionType::kGqa
                                       : model::AttentionType::kMha;
  a.embed_dim = c.base_emb_dim;
  a.num_query_heads = c.base_num_query_heads;
  a.num_kv_heads = c.base_num_kv_heads;
  a.head_dim = c.head_dim;
  a.q_lora_rank = c.q_lora_rank;
  a.kv_lora_rank = c.kv_lora_rank;
  a.qk_nope_head_dim = c.qk_nope_head_dim;
  a.qk_rope_head_dim = c.qk_rope_head_dim;
  a.v_head_dim = c.v_head_dim;
  a.rope.type = c.rope_type == "yarn" ? model::RopeType::kYarn : model::RopeType::kDefault;
  a.rope.max_timescale = c.rope_max_timescale;
  a.rope.factor = c.rope_factor;
  a.rope.original_max_position_embeddings = c.original_max_position_embeddings;
  a.rope.max_position_embeddings = c.max_position_embeddings;
  a.rope.beta_fast = c.beta_fast;
  a.rope.beta_slow = c.beta_slow;
  a.rope.mscale = c.mscale;
  return a;
}

const std::vector<ConfigKey>& config_keys() {
  static const std::vector<ConfigKey> keys = build_keys();
  return keys;
}

const std::vector<ConfigKeyAlias>& config_key_aliases() {
  // Other spellings of one key, e.g. MaxText's names for ours. An alias is
  // the same key everywhere: duplicates, config.yml (which stores the key's
  // own name) and the resume check.
  static const std::vector<ConfigKeyAlias> aliases = {
      {"tokamax_gmm_autotune", "gmm_autotune"},
  };
  return aliases;
}

std::string canonical_config_key(const std::string& key) {
  for (const ConfigKeyAlias& alias : config_key_aliases()) {
    if (alias.alias == key) return alias.key;
  }
  return key;
}

std::string nearest_config_key(const std::string& key) {
  std::string best;
  size_t best_distance = SIZE_MAX;
  auto consider = [&](const std::string& name) {
    const size_t distance = edit_distance(key, name);
    if (distance < best_distance) {
      best_distance = distance;
      best = name;
    }
  };
  for (const ConfigKey& candidate : config_keys()) consider(candidate.name);
  for (const ConfigKeyAlias& alias : config_key_aliases()) consider(alias.alias);
  return best;
}

Settings::Settings() {
  for (const ConfigKey& key : config_keys()) values_[key.name] = key.default_value;
}

void Settings::set(const std::string& key, const std::string& value) {
  auto it = values_.find(canonical_config_key(key));
  if (it == values_.end()) {
    fail(key.empty() ? "key" : key, value,
         "unknown config key; did you mean '" + nearest_config_key(key) + "'?");
  }
  it->second = trim(value);
}

void Settings::set_override(const std::string& key, const std::string& value) {
  set(key, value);
  overridden_.insert(canonical_config_key(key));
}

const std::string& Settings::get(const std::string& key) const {
  auto it = values_.find(canonical_config_key(key));
  require(it != values_.end(), "key", key, "not a config key");
  return it->second;
}

void Settings::apply_file(const std::string& path) {
  std::error_code error;
  require(!std::filesystem::is_directory(path, error), "config", path,
          "is a directory, not a YAML config file");
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    fail("config", path, "cannot read the config file");
  } catch (const YAML::Exception& e) {
    fail("config", path, std::string("not valid YAML: ") + e.what());
  } catch (const std::exception& e) {
    // An I/O error of the stream (a special file, a failing disk).
    fail("config", path, std::string("cannot read the config file: ") + e.what());
  }
  if (root.IsNull()) return;
  require(root.IsMap(), "config", path, "expected a map of key: value");
  // YAML parsers keep the last of two equal keys; a key written twice in a
  // file is almost always an edit gone wrong, so it is refused.
  std::map<std::string, KeyOrigin> seen;
  for (const auto& entry : root) {
    const std::string key = entry.first.as<std::string>();
    require(entry.second.IsScalar() || entry.second.IsNull(), key, path, "values must be scalars");
    const std::string value = entry.second.IsNull() ? "" : entry.second.as<std::string>();
    set(key, value);
    const KeyOrigin origin{key, trim(value), entry.first.Mark().line + 1};
    auto [it, first_time] = seen.emplace(canonical_config_key(key), origin);
    if (!first_time) fail_duplicate(it->second, origin, "in " + path);
  }
}

std::string Settings::to_yaml() const {
  std::ostringstream out;
  for (const ConfigKey& key : config_keys()) {
    const std::string& value = values_.at(key.name);
    out << key.name << ": ";
    const bool needs_quotes =
        value.empty() || value.find_first_of(":#{}[],&*!|>'\"%@`") != std::string::npos;
    if (needs_quotes) {
      out << '"' << value << '"';
    } else {
      out << value;
    }
    out << "\n";
  }
  return out.str();
}

Settings parse_train_arguments(const std::vector<std::string>& args) {
  Settings settings;
  size_t i = 0;
  if (!args.empty()) {
    const std::string& first = args[0];
    const bool looks_like_setting = first.find('=') != std::string::npos ||
                                    (!first.empty() && first.back() == ':') ||
                                    first.find(": ") != std::string::npos;
    if (!looks_like_setting) {
      settings.apply_file(first);
      i = 1;
    }
  }
  // A command-line override of the file's key is the point of overrides; the
  // same key twice on the command line is a mistake (which one was meant?).
  std::map<std::string, KeyOrigin> seen;
  auto set_once = [&](const std::string& key, const std::string& value) {
    settings.set_override(key, value);
    const KeyOrigin origin{key, trim(value), 0};
    auto [it, first_time] = seen.emplace(canonical_config_key(key), origin);
    if (!first_time) fail_duplicate(it->second, origin, "on the command line");
  };
  for (; i < args.size(); ++i) {
    const std::string& word = args[i];
    const size_t equals = word.find('=');
    const size_t colon_space = word.find(": ");
    if (equals != std::string::npos && (colon_space == std::string::npos || equals < colon_space)) {
      set_once(word.substr(0, equals), word.substr(equals + 1));
    } else if (!word.empty() && word.back() == ':') {
      require(i + 1 < args.size(), word.substr(0, word.size() - 1), "(missing)",
              "'key:' must be followed by its value as the next word");
      set_once(word.substr(0, word.size() - 1), args[i + 1]);
      ++i;
    } else if (colon_space != std::string::npos) {
      set_once(word.substr(0, colon_space), word.substr(colon_space + 2));
    } else {
      fail("setting", word, "expected key=value or 'key: value' (e.g. steps=10 or steps: 10)");
    }
  }
  return settings;
}

std::string TrainConfig::run_dir() const {
  return (std::filesystem::path(base_output_directory) / run_name).string();
}

TrainConfig resolve(const Settings& input) {
  const Settings s = with_model_preset(input);
  TrainConfig c;
  c.run_name = s.get("run_name");
  require(!c.run_name.empty() && c.run_name.find('/') == std::string::npos, "run_name",
          c.run_name.empty() ? "''" : c.run_name, "must be a non-empty name without '/'");
  c.base_output_directory = s.get("base_output_directory");
  require(!c.base_output_directory.empty(), "base_output_directory", "''", "must not be empty");
  c.dataset_type = one_of(s, "dataset_type", {"synthetic", "text"});
  c.dataset_path = s.get("dataset_path");
  c.synthetic_branching = to_int(s, "synthetic_branching", 1);
  c.steps = to_int(s, "steps", 0);
  c.per_device_batch_size = to_int(s, "per_device_batch_size", 1);
  c.max_target_length = to_int(s, "max_target_length", 1);
  c.vocab_size = to_int(s, "vocab_size", 2);
  c.base_emb_dim = to_int(s, "base_emb_dim", 1);
  c.base_mlp_dim = to_int(s, "base_mlp_dim", 1);
  c.base_num_decoder_layers = to_int(s, "base_num_decoder_layers", 0);
  c.first_num_dense_layers = to_int(s, "first_num_dense_layers", 0);
  require(
      c.first_num_dense_layers <= c.base_num_decoder_layers,
      "first_num_dense_layers,base_num_decoder_layers",
      std::to_string(c.first_num_dense_layers) + "," + std::to_string(c.base_num_decoder_layers),
      "more dense layers than layers");
  if (c.dataset_type == "text") {
    require(!c.dataset_path.empty(), "dataset_type,dataset_path", "text,''",
            "dataset_type=text needs dataset_path");
    require(c.vocab_size == 256, "dataset_type,vocab_size", "text," + s.get("vocab_size"),
            "text is read as bytes: vocab_size must be 256");
  }
  require(c.synthetic_branching <= c.vocab_size, "synthetic_branching,vocab_size",
          s.get("synthetic_branching") + "," + s.get("vocab_size"),
          "more successors than vocabulary entries");
  c.learning_rate = to_real(s, "learning_rate", 0);
  c.learning_rate_schedule_steps = to_int(s, "learning_rate_schedule_steps", -1);
  c.warmup_steps_fraction = to_real(s, "warmup_steps_fraction", 0);
  require(c.warmup_steps_fraction <= 1, "warmup_steps_fraction", s.get("warmup_steps_fraction"),
          "must be in [0, 1]");
  c.cosine_learning_rate_final_fraction = to_real(s, "cosine_learning_rate_final_fraction", 0);
  c.opt_type = one_of(s, "opt_type", {"sgd", "adamw"});
  c.adam_b1 = to_real(s, "adam_b1", 0);
  c.adam_b2 = to_real(s, "adam_b2", 0);
  require(c.adam_b1 < 1 && c.adam_b2 < 1, "adam_b1,adam_b2",
          s.get("adam_b1") + "," + s.get("adam_b2"), "betas must be in [0, 1)");
  c.adam_eps = to_real(s, "adam_eps", 0);
  c.adam_weight_decay = to_real(s, "adam_weight_decay", 0);
  c.weight_dtype = dtype_key(s, "weight_dtype");
  c.routed_bias_update_rate = to_real(s, "routed_bias_update_rate", 0);
  c.seed = static_cast<uint64_t>(to_int(s, "seed", 0));
  c.enable_checkpointing = to_bool(s, "enable_checkpointing");
  c.checkpoint_period = to_int(s, "checkpoint_period", 1);
  c.save_checkpoint_on_start = to_bool(s, "save_checkpoint_on_start");
  c.eval_interval = to_int(s, "eval_interval", 0);
  c.eval_steps = to_int(s, "eval_steps", 1);
  require(s.get("profiler") != "xplane", "profiler", "xplane",
          "xplane traces come from JAX's profiler, which does not run here; use profiler=trace "
          "(Chrome trace JSON of every op, opens in Perfetto)");
  c.profiler = one_of(s, "profiler", {"", "trace"});
  c.allow_config_change_on_resume = to_bool(s, "allow_config_change_on_resume");
  refuse_services(s);

  resolve_attention(s, c);
  moe::MoeConfig& m = c.moe;
  m.embed_dim = c.base_emb_dim;
  m.mlp_dim = s.get("base_moe_mlp_dim").empty() ? c.base_mlp_dim : to_int(s, "base_moe_mlp_dim", 1);
  m.router.num_experts = to_int(s, "num_experts", 1);
  m.router.top_k = to_int(s, "num_experts_per_tok", 1);
  m.router.normalize_top_k = to_bool(s, "norm_topk_prob");
  m.router.score_function = one_of(s, "routed_score_func", {"softmax", "sigmoid"}) == "sigmoid"
                                ? moe::ScoreFunction::kSigmoid
                                : moe::ScoreFunction::kSoftmax;
  m.router.selection_bias = to_bool(s, "routed_bias");
  m.router.n_routing_groups = to_int(s, "n_routing_groups", -1);
  m.router.topk_routing_group = to_int(s, "topk_routing_group", -1);
  m.router.routed_scaling_factor = to_real(s, "routed_scaling_factor", 0);
  m.router.load_balance_loss_weight = to_real(s, "load_balance_loss_weight", 0);
  m.shared_experts = to_int(s, "shared_experts", 0);
  m.fused_gate_up = to_bool(s, "fused_gate_up");
  m.swiglu_in_gmm = to_bool(s, "swiglu_in_gmm");
  // The mesh axes: a size >= 1 or -1 (filled from the process count at
  // launch, resolve_mesh_shape); a fixed expert axis is checked here already.
  c.ici_data_parallelism = mesh_axis(s, "ici_data_parallelism");
  c.ici_fsdp_parallelism = mesh_axis(s, "ici_fsdp_parallelism");
  c.ici_expert_parallelism = mesh_axis(s, "ici_expert_parallelism");
  require((c.ici_data_parallelism == -1) + (c.ici_fsdp_parallelism == -1) +
                  (c.ici_expert_parallelism == -1) <=
              1,
          "ici_data_parallelism,ici_fsdp_parallelism,ici_expert_parallelism",
          s.get("ici_data_parallelism") + "," + s.get("ici_fsdp_parallelism") + "," +
              s.get("ici_expert_parallelism"),
          "at most one axis may be -1 (what the others leave of the process count)");
  c.fsdp_keep_gathered_weights = to_bool(s, "fsdp_keep_gathered_weights");
  m.use_ring_of_experts = to_bool(s, "use_ring_of_experts");
  require(c.ici_expert_parallelism == -1 || m.router.num_experts % c.ici_expert_parallelism == 0,
          "num_experts", m.router.num_experts,
          "must be divisible by ici_expert_parallelism=" +
              std::to_string(c.ici_expert_parallelism) +
              " (each process holds num_experts / ici_expert_parallelism experts)");
  m.dtype = dtype_key(s, "dtype");
  m.quantization = parse_quantization(s.get("quantization"), "quantization");
  m.weight_scaling = s.get("quantization_weight_scaling");
  m.sparse_matmul = to_bool(s, "sparse_matmul");
  m.capacity_factor = to_real(s, "capacity_factor", -1);
  m.activation_k_block = activation_k_block(s);
  require(m.sparse_matmul || c.ici_expert_parallelism == 1, "sparse_matmul,ici_expert_parallelism",
          "false," + s.get("ici_expert_parallelism"),
          "the dense path runs on one process (expert parallelism needs sparse_matmul=true)");
  const KernelSelection kernels = select_kernels(s, m.quantization);
  c.kernel_selection =
      std::string(m.sparse_matmul ? "sparse" : "dense") + " path; " + kernels.describe();
  m.plan = build_plan(s, kernels);
  m.use_tune_cache = to_bool(s, "gmm_autotune");
  moe::validate(m);
  // Products that overflow are refused here; sizes beyond the machine's
  // memory are refused by run_training before it allocates or writes, so a
  // preset too large for this machine (deepseek3-671b) still resolves.
  {
    // An axis of -1 is at least 1 process; the launch checks the real size.
    TrainConfig sized = c;
    sized.ici_expert_parallelism = std::max<int64_t>(1, c.ici_expert_parallelism);
    check_allocation_sizes(sized, std::numeric_limits<int64_t>::max());
  }
  c.resolved_yaml = s.to_yaml();
  return c;
}

}  // namespace raggemm::train
