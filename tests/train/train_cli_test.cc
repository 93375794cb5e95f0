// `raggemm train` and `raggemm compare` end to end: smoke trains of every
// kernel/precision configuration, output files, resume identity, a killed
// run leaving no torn checkpoint, config errors at the CLI.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "raggemm/error.h"
#include "raggemm/temp_files.h"
#include "raggemm/train.h"
#include "trace_check.h"

namespace raggemm::train {
namespace {

namespace fs = std::filesystem;

const std::string kCli = RAGGEMM_CLI_PATH;
const std::string kBase = std::string(RAGGEMM_SOURCE_DIR) + "/configs/base.yml";

// Small enough that a step takes milliseconds.
const std::string kSmall =
    " base_emb_dim=64 base_mlp_dim=128 per_device_batch_size=2 max_target_length=32"
    " vocab_size=64 num_experts=4 num_experts_per_tok=2";

struct Output {
  int status;
  std::string text;
};

Output run(const std::string& args) {
  const std::string command = kCli + " " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  Output out{-1, ""};
  if (!pipe) return out;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.text.append(buffer, n);
  const int status = pclose(pipe);
  out.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("raggemm_train_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
  static inline int counter_ = 0;
};

std::vector<nlohmann::json> read_metrics(const std::string& run_dir) {
  std::vector<nlohmann::json> out;
  std::ifstream in(fs::path(run_dir) / "metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  }
  return out;
}

struct SmokeCase {
  std::string mode;       // v1, v2, hybrid
  std::string precision;  // f32, bf16, fp8_full, int8
};

std::string mode_args(const SmokeCase& c) {
  std::string args;
  if (c.mode == "v2") args += " use_gmm_v2=true";
  // The other form on purpose: "key:" "value" as two words.
  if (c.mode == "hybrid")
    args += " use_gmm_v2_fwd: true use_gmm_v2_dlhs: false use_gmm_v2_drhs=true";
  if (c.precision == "bf16") args += " dtype=bf16 weight_dtype=bf16";
  if (c.precision == "fp8_full" || c.precision == "int8") args += " quantization=" + c.precision;
  return args;
}

class SmokeTrainTest : public ::testing::TestWithParam<SmokeCase> {};

TEST_P(SmokeTrainTest, TwoStepsFromTheCli) {
  TempDir dir;
  const SmokeCase& c = GetParam();
  const Output out = run("train " + kBase + " steps=2 base_output_directory=" + dir.str() +
                         " run_name=smoke" + kSmall + mode_args(c));
  ASSERT_EQ(out.status, 0) << out.text;
  EXPECT_NE(out.text.find("step     2/2"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("loss floor"), std::string::npos);
  const std::string run_dir = dir.str() + "/smoke";
  const auto metrics = read_metrics(run_dir);
  ASSERT_EQ(metrics.size(), 2u);
  for (const auto& m : metrics) {
    for (const char* field :
         {"step", "loss", "step_time_s", "tokens_per_s", "gmm_gflops", "gmm_time_share"}) {
      EXPECT_TRUE(m.contains(field)) << field;
    }
    EXPECT_TRUE(std::isfinite(m["loss"].get<double>()));
    EXPECT_GT(m["gmm_gflops"].get<double>(), 0);
    EXPECT_GT(m["gmm_time_share"].get<double>(), 0);
    EXPECT_LE(m["gmm_time_share"].get<double>(), 1.0);
  }
  EXPECT_TRUE(fs::exists(fs::path(run_dir) / "config.yml"));
}

INSTANTIATE_TEST_SUITE_P(Configs, SmokeTrainTest, ::testing::ValuesIn([] {
                           std::vector<SmokeCase> cases;
                           for (const char* m : {"v1", "v2", "hybrid"})
                             for (const char* p : {"f32", "bf16", "fp8_full", "int8"})
                               cases.push_back({m, p});
                           return cases;
                         }()),
                         [](const auto& info) {
                           return info.param.mode + "_" + info.param.precision;
                         });

TEST(TrainCliTest, LossFallsAndTraceOpens) {
  TempDir dir;
  const Output out =
      run("train " + kBase + " steps=30 base_output_directory=" + dir.str() +
          " run_name=falls profiler=trace shared_experts=1 first_num_dense_layers=1" +
          " fused_gate_up=true use_gmm_v2=true" + kSmall);
  ASSERT_EQ(out.status, 0) << out.text;
  const auto metrics = read_metrics(dir.str() + "/falls");
  ASSERT_EQ(metrics.size(), 30u);
  EXPECT_LT(metrics.back()["loss"].get<double>(), metrics.front()["loss"].get<double>() - 1.0);
  std::ifstream trace_file(dir.str() + "/falls/trace.json");
  const nlohmann::json trace = nlohmann::json::parse(trace_file);
  ASSERT_GT(trace["traceEvents"].size(), 30u);
  // Format rules, one process (rank 0) and one track for the trainer's
  // thread, beside the kernels' worker tracks (tid 1000 * 1 + worker).
  const auto tracks = testing::expect_valid_trace(trace);
  ASSERT_GE(tracks.size(), 2u);
  const auto& [track, slices] = *tracks.begin();
  EXPECT_EQ(track, std::make_pair(0, 1));
  for (const auto& [other, _] : tracks) {
    if (other != track) {
      EXPECT_GE(other.second, 1000) << "tid " << other.second;
    }
  }
  EXPECT_GT(testing::expect_worker_tracks(tracks), 30 * 6);
  // Every expert GMM event nests in a layer slice, which nests in a step
  // slice, and carries what ran on what.
  int steps = 0, gmms = 0;
  bool saw_swiglu = false;
  for (const testing::TraceSlice& slice : slices) {
    const nlohmann::json& e = *slice.event;
    if (e["name"] == "step") ++steps;
    if (e["cat"] != "expert_gmm") continue;
    ++gmms;
    saw_swiglu |= e["name"] == "moe/wi/fwd_swiglu";
    const testing::TraceSlice* layer = testing::parent_of(slices, slice);
    while (layer && !(*layer->event)["name"].get<std::string>().starts_with("moe_layer/"))
      layer = testing::parent_of(slices, *layer);
    ASSERT_NE(layer, nullptr) << e;
    EXPECT_TRUE((*layer->event)["args"]["layer"].is_string()) << *layer->event;
    const testing::TraceSlice* step = testing::parent_of(slices, *layer);
    while (step && (*step->event)["name"] != "step") step = testing::parent_of(slices, *step);
    ASSERT_NE(step, nullptr) << e;
    EXPECT_GE((*step->event)["args"]["step"].get<int>(), 1);
    const nlohmann::json& args = e["args"];
    for (const char* key : {"pass", "weight", "kernel", "tile_m_source", "tile_k_source",
                            "tile_n_source", "kernel_source"})
      EXPECT_TRUE(args[key].is_string()) << key << " in " << e;
    for (const char* key : {"tile_m", "tile_k", "tile_n", "M", "K", "N", "G"})
      EXPECT_TRUE(args[key].is_number_integer()) << key << " in " << e;
    EXPECT_EQ(args["kernel"], "v2") << e;  // use_gmm_v2=true
    EXPECT_TRUE(args["gflops_per_s"].is_number()) << e;
  }
  EXPECT_EQ(steps, 30);
  EXPECT_GT(gmms, 30 * 6);
  EXPECT_TRUE(saw_swiglu);
  // Every decoder layer (the dense first one included) has a layer/fwd and
  // a layer/bwd slice per step, with its index, inside the step; every
  // expert GMM and every dense GMM of a layer nests in one.
  std::map<std::pair<std::string, int64_t>, int> layer_slices;
  int dense_in_layers = 0;
  for (const testing::TraceSlice& slice : slices) {
    const nlohmann::json& e = *slice.event;
    const std::string name = e["name"];
    if (name == "layer/fwd" || name == "layer/bwd") {
      ASSERT_TRUE(e["args"]["layer"].is_number_integer()) << e;
      ++layer_slices[{name, e["args"]["layer"].get<int64_t>()}];
      const testing::TraceSlice* step = testing::parent_of(slices, slice);
      ASSERT_NE(step, nullptr) << e;
      while (step && (*step->event)["name"] != "step") step = testing::parent_of(slices, *step);
      EXPECT_NE(step, nullptr) << e;
      continue;
    }
    if (e["cat"] != "expert_gmm" && e["cat"] != "dense_gmm") continue;
    const testing::TraceSlice* layer = testing::parent_of(slices, slice);
    while (layer && !(*layer->event)["name"].get<std::string>().starts_with("layer/"))
      layer = testing::parent_of(slices, *layer);
    if (e["cat"] == "expert_gmm") {
      ASSERT_NE(layer, nullptr) << e;
    } else if (layer) {
      ++dense_in_layers;
    }
  }
  const int64_t layers = static_cast<int64_t>(layer_slices.size()) / 2;
  EXPECT_GE(layers, 2);  // the dense first layer and at least one MoE layer
  for (int64_t i = 0; i < layers; ++i) {
    EXPECT_EQ((layer_slices[{"layer/fwd", i}]), 30) << "layer " << i;
    EXPECT_EQ((layer_slices[{"layer/bwd", i}]), 30) << "layer " << i;
  }
  EXPECT_GT(dense_in_layers, 0);  // the dense layer's (and shared experts') matmuls
}

// The other data source, optimizer and routing options in one run.
TEST(TrainCliTest, TextDataSgdSigmoidGroupedRouting) {
  TempDir dir;
  const std::string text_path = dir.str() + "/corpus.txt";
  {
    std::ofstream out(text_path);
    for (int i = 0; i < 200; ++i)
      out << "the quick brown fox jumps over the lazy dog " << i << "\n";
  }
  const Output out = run("train dataset_type=text dataset_path=" + text_path +
                         " vocab_size=256 steps=3 opt_type=sgd learning_rate=0.05"
                         " routed_score_func=sigmoid routed_bias=true n_routing_groups=2"
                         " topk_routing_group=1 shared_experts=1 first_num_dense_layers=1"
                         " base_num_decoder_layers=2 base_emb_dim=64 base_mlp_dim=128"
                         " per_device_batch_size=2 max_target_length=32 num_experts=4"
                         " base_output_directory=" +
                         dir.str() + " run_name=text");
  ASSERT_EQ(out.status, 0) << out.text;
  EXPECT_NE(out.text.find("text file"), std::string::npos) << out.text;
  EXPECT_EQ(read_metrics(dir.str() + "/text").size(), 3u);
}

TEST(TrainCliTest, ConfigErrorsAreOneLineAndExit2) {
  const Output unknown = run("train " + kBase + " stpes=3");
  EXPECT_EQ(unknown.status, 2);
  EXPECT_EQ(unknown.text, "error: stpes=3: unknown config key; did you mean 'steps'?\n");
  const Output contradiction = run("train use_gmm_v2=true use_gmm_v2_fwd: false");
  EXPECT_EQ(contradiction.status, 2);
  EXPECT_NE(contradiction.text.find("error: use_gmm_v2,use_gmm_v2_fwd=true,false"),
            std::string::npos)
      << contradiction.text;
  const Output missing = run("train /nonexistent/config.yml");
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.text.find("error: config=/nonexistent/config.yml"), std::string::npos);
}

// Sizes that cannot fit are refused before anything is allocated or written
// (issue 16 item 3): one error line naming the keys, exit 2, no run folder.
struct ImpossibleSize {
  std::string name;
  std::string setting;
  std::string key;  // among the keys the error names (which product fails first
                    // depends on the machine's memory)
};

class ImpossibleSizeTest : public ::testing::TestWithParam<ImpossibleSize> {};

TEST_P(ImpossibleSizeTest, RefusedNamingTheKeysAndNothingWritten) {
  TempDir dir;
  const Output out = run("train " + kBase + " steps=1 base_output_directory=" + dir.str() +
                         "/runs " + GetParam().setting);
  EXPECT_EQ(out.status, 2) << out.text;
  ASSERT_EQ(out.text.rfind("error: ", 0), 0u) << out.text;
  const std::string keys = out.text.substr(7, out.text.find('=') - 7);
  EXPECT_NE(("," + keys + ",").find("," + GetParam().key + ","), std::string::npos) << out.text;
  EXPECT_EQ(std::count(out.text.begin(), out.text.end(), '\n'), 1) << out.text;
  EXPECT_EQ(out.text.find("bad_alloc"), std::string::npos) << out.text;
  EXPECT_FALSE(fs::exists(dir.str() + "/runs")) << "a run folder was written";
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ImpossibleSizeTest,
    ::testing::Values(
        ImpossibleSize{"experts", "num_experts=100000000", "num_experts"},
        ImpossibleSize{"embed", "base_emb_dim=1000000000", "base_emb_dim"},
        ImpossibleSize{"vocab", "vocab_size=2000000000", "vocab_size"},
        ImpossibleSize{"batch", "per_device_batch_size=1000000000", "per_device_batch_size"},
        ImpossibleSize{"overflow", "per_device_batch_size=9223372036854775807",
                       "per_device_batch_size"},
        ImpossibleSize{"layers", "base_num_decoder_layers=4000000000000", "base_num_decoder_layers"}),
    [](const auto& info) { return info.param.name; });

// `raggemm train` of a small checkpointing run `name` in `dir`; append steps=...
std::string checkpointed_run(const TempDir& dir, const std::string& name) {
  return "train " + kBase + " base_output_directory=" + dir.str() + " run_name=" + name +
         " enable_checkpointing=true" + kSmall;
}

std::string file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Resuming under a changed trajectory key is refused naming the keys and
// both values, and leaves the run as it was (issue 16 item 6); harmless keys
// may change; allow_config_change_on_resume=true resumes with a warning.
TEST(TrainCliTest, ResumeUnderAChangedConfigIsRefused) {
  TempDir dir;
  const std::string run_dir = dir.str() + "/r";
  const std::string common = checkpointed_run(dir, "r");
  ASSERT_EQ(run(common + " steps=2 checkpoint_period=1").status, 0);
  const std::string config_before = file_text(run_dir + "/config.yml");
  const std::string metrics_before = file_text(run_dir + "/metrics.jsonl");

  struct Refused {
    std::string change;
    std::string error_start;  // "error: <keys>=<new values>"
    std::string described;    // "<key> <stored> -> <current>"
  };
  for (const Refused& c : std::vector<Refused>{
           {"seed=1", "error: seed=1: differs from the run's", "seed 0 -> 1"},
           {"opt_type=sgd", "error: opt_type=sgd:", "opt_type adamw -> sgd"},
           {"learning_rate=0.01 seed=7", "error: seed,learning_rate=7,0.01:",
            "seed 0 -> 7, learning_rate 0.003 -> 0.01"},
           {"tokamax_gmm_autotune=true", "error: gmm_autotune=true:", "gmm_autotune false -> true"},
       }) {
    const Output out = run(common + " steps=3 checkpoint_period=1 " + c.change);
    EXPECT_EQ(out.status, 2) << c.change << "\n" << out.text;
    EXPECT_EQ(out.text.rfind(c.error_start, 0), 0u) << out.text;
    EXPECT_NE(out.text.find(c.described), std::string::npos) << out.text;
    EXPECT_NE(out.text.find("allow_config_change_on_resume=true"), std::string::npos) << out.text;
    EXPECT_EQ(file_text(run_dir + "/config.yml"), config_before) << c.change;
    EXPECT_EQ(file_text(run_dir + "/metrics.jsonl"), metrics_before) << c.change;
    EXPECT_FALSE(fs::exists(run_dir + "/checkpoints/step_00000003.ckpt")) << c.change;
  }

  // Length, checkpoint cadence and profiling may change; 0.003 == 3e-3.
  const Output harmless =
      run(common + " steps=3 checkpoint_period=2 profiler=trace learning_rate=3e-3");
  ASSERT_EQ(harmless.status, 0) << harmless.text;
  EXPECT_NE(harmless.text.find("resumed from"), std::string::npos) << harmless.text;
  EXPECT_EQ(harmless.text.find("warning"), std::string::npos) << harmless.text;

  const Output allowed =
      run(common + " steps=4 checkpoint_period=1 seed=1 allow_config_change_on_resume=true");
  ASSERT_EQ(allowed.status, 0) << allowed.text;
  EXPECT_NE(allowed.text.find("warning: train: resuming"), std::string::npos) << allowed.text;
  EXPECT_NE(allowed.text.find("seed 0 -> 1"), std::string::npos) << allowed.text;
  EXPECT_NE(allowed.text.find("resumed from"), std::string::npos) << allowed.text;
  // The run's config is now the one it continues under.
  EXPECT_NE(file_text(run_dir + "/config.yml").find("seed: 1\n"), std::string::npos);
}

// Temp files of killed writers are removed by the next run of the same
// folder, a live writer's are not, and the run says so (issue 16 item 2).
TEST(TrainCliTest, StaleTempFilesOfKilledWritersAreRemoved) {
  TempDir dir;
  const std::string run_dir = dir.str() + "/t";
  const std::string common = checkpointed_run(dir, "t") + " checkpoint_period=1";
  ASSERT_EQ(run(common + " steps=1").status, 0);
  const pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);  // a writer that no longer runs
  const std::string dead = ".tmp." + std::to_string(child) + ".0123456789abcdef";
  const std::string stale_checkpoint = run_dir + "/checkpoints/step_00000002.ckpt" + dead;
  const std::string stale_config = run_dir + "/config.yml" + dead;
  // This test process is alive: its temp file is a concurrent writer's.
  const std::string live = atomic_temp_path(run_dir + "/checkpoints/step_00000009.ckpt");
  for (const std::string& path : {stale_checkpoint, stale_config, live}) {
    std::ofstream(path) << std::string(4096, 'x');
  }
  const Output out = run(common + " steps=2");
  ASSERT_EQ(out.status, 0) << out.text;
  EXPECT_FALSE(fs::exists(stale_checkpoint));
  EXPECT_FALSE(fs::exists(stale_config));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_NE(out.text.find("warning: cleanup: removed 1 temp file(s) of writers that no longer run"
                          " (4.0 KiB) in " + run_dir + "/checkpoints"),
            std::string::npos)
      << out.text;
  EXPECT_NE(out.text.find("in " + run_dir + ", e.g. config.yml.tmp."), std::string::npos)
      << out.text;
  // Resumed from the real checkpoint; the temp files were never candidates.
  EXPECT_NE(out.text.find("step_00000001.ckpt (step 1)"), std::string::npos) << out.text;
}

// File-system errors name the key or argument (issue 16 item 4).
TEST(TrainCliTest, FileSystemErrorsNameTheKey) {
  TempDir dir;
  fs::create_directories(dir.str() + "/a_folder");
  const std::string a_file = dir.str() + "/a_file";
  std::ofstream(a_file) << "x";
  struct Case {
    std::string args;
    std::string error_start;
  };
  for (const Case& c : std::vector<Case>{
           {"train " + dir.str() + "/a_folder/", "error: config=" + dir.str() + "/a_folder/: is a directory"},
           {"train " + kBase + " steps=1 base_output_directory=" + a_file,
            "error: base_output_directory=" + a_file + ": cannot create the run folder"},
           {"train " + kBase + " steps=1 dataset_type=text vocab_size=256 dataset_path=" + dir.str() +
                "/a_folder base_output_directory=" + dir.str() + "/runs",
            "error: dataset_path=" + dir.str() + "/a_folder: is a directory"},
       }) {
    const Output out = run(c.args);
    EXPECT_EQ(out.status, 2) << c.args << "\n" << out.text;
    EXPECT_EQ(out.text.rfind(c.error_start, 0), 0u) << out.text;
    EXPECT_EQ(std::count(out.text.begin(), out.text.end(), '\n'), 1) << out.text;
  }
  if (::geteuid() != 0) {  // root writes anywhere
    const std::string read_only = dir.str() + "/read_only";
    fs::create_directories(read_only);
    fs::permissions(read_only, fs::perms::owner_read | fs::perms::owner_exec);
    const Output out = run("train " + kBase + " steps=1 base_output_directory=" + read_only);
    fs::permissions(read_only, fs::perms::owner_all);
    EXPECT_EQ(out.status, 2) << out.text;
    EXPECT_EQ(out.text.rfind("error: base_output_directory=" + read_only + ": cannot", 0), 0u)
        << out.text;
  }
}

// A checkpoint path that is a directory is skipped with a warning naming it;
// the run resumes from the newest real checkpoint.
TEST(TrainCliTest, CheckpointThatIsADirectoryIsSkipped) {
  TempDir dir;
  const std::string common = checkpointed_run(dir, "d") + " checkpoint_period=1";
  ASSERT_EQ(run(common + " steps=1").status, 0);
  const std::string folder = dir.str() + "/d/checkpoints/step_00000005.ckpt";
  fs::create_directories(folder);
  const Output out = run(common + " steps=2");
  ASSERT_EQ(out.status, 0) << out.text;
  EXPECT_NE(out.text.find("warning: checkpoint: skipping checkpoint=" + folder + ": is a directory"),
            std::string::npos)
      << out.text;
  EXPECT_NE(out.text.find("step_00000001.ckpt (step 1)"), std::string::npos) << out.text;
}

// A run resumed from its checkpoint gives bitwise-identical losses.
TEST(TrainCliTest, ResumeIsBitwiseIdentical) {
  TempDir dir;
  const std::string common = "train " + kBase + " base_output_directory=" + dir.str() +
                             " enable_checkpointing=true checkpoint_period=3"
                             " learning_rate_schedule_steps=6 weight_dtype=bf16" +
                             kSmall;
  ASSERT_EQ(run(common + " run_name=straight steps=6").status, 0);
  ASSERT_EQ(run(common + " run_name=resumed steps=3").status, 0);
  const Output second = run(common + " run_name=resumed steps=6");
  ASSERT_EQ(second.status, 0) << second.text;
  EXPECT_NE(second.text.find("resumed from"), std::string::npos) << second.text;
  const auto straight = read_metrics(dir.str() + "/straight");
  const auto resumed = read_metrics(dir.str() + "/resumed");
  ASSERT_EQ(straight.size(), 6u);
  ASSERT_EQ(resumed.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(resumed[i]["step"], straight[i]["step"]);
    // Bitwise: the doubles round-trip through JSON exactly.
    EXPECT_EQ(resumed[i]["loss"].get<double>(), straight[i]["loss"].get<double>())
        << "step " << i + 1;
  }
}

// Killing a run at arbitrary moments never leaves a checkpoint that fails to
// verify, and the run resumes from the newest one.
TEST(TrainCliTest, KilledRunLeavesNoTornCheckpoint) {
  TempDir dir;
  const std::string run_dir = dir.str() + "/killed";
  for (int attempt = 0; attempt < 3; ++attempt) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      const std::string out = "base_output_directory=" + dir.str();
      const int devnull = ::open("/dev/null", 1);
      dup2(devnull, 1);
      dup2(devnull, 2);
      execl(kCli.c_str(), kCli.c_str(), "train", kBase.c_str(), out.c_str(), "run_name=killed",
            "steps=100000", "enable_checkpointing=true", "checkpoint_period=1", "base_emb_dim=128",
            "base_mlp_dim=256", "per_device_batch_size=2", "max_target_length=32", "vocab_size=64",
            "num_experts=4", static_cast<char*>(nullptr));
      _exit(127);
    }
    // Wait for a few new checkpoints, then kill without warning.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(180);
    size_t count = 0;
    while (std::chrono::steady_clock::now() < deadline) {
      count = 0;
      if (fs::exists(run_dir + "/checkpoints")) {
        for (const auto& e : fs::directory_iterator(run_dir + "/checkpoints")) {
          count += e.path().extension() == ".ckpt";
        }
      }
      if (count >= static_cast<size_t>(2 + 2 * attempt)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(7 * attempt));
    kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    ASSERT_GE(count, 2u);
    for (const auto& e : fs::directory_iterator(run_dir + "/checkpoints")) {
      if (e.path().extension() != ".ckpt") continue;  // temp files of a cut write
      EXPECT_NO_THROW(verify_checkpoint(e.path().string())) << e.path();
    }
  }
}

TEST(TrainCliTest, CorruptCheckpointIsRefused) {
  TempDir dir;
  ASSERT_EQ(run("train " + kBase + " base_output_directory=" + dir.str() +
                " run_name=c steps=2 enable_checkpointing=true checkpoint_period=1" + kSmall)
                .status,
            0);
  const std::string path = dir.str() + "/c/checkpoints/step_00000002.ckpt";
  ASSERT_EQ(verify_checkpoint(path), 2);
  fs::resize_file(path, fs::file_size(path) - 100);
  EXPECT_THROW(verify_checkpoint(path), Error);
  // The run falls back to the older, intact checkpoint.
  const Output out =
      run("train " + kBase + " base_output_directory=" + dir.str() +
          " run_name=c steps=3 enable_checkpointing=true checkpoint_period=1" + kSmall);
  ASSERT_EQ(out.status, 0) << out.text;
  EXPECT_NE(out.text.find("step_00000001.ckpt (step 1)"), std::string::npos) << out.text;
}

TEST(CompareCliTest, PrintsDifferencesAndPlots) {
  TempDir dir;
  const std::string common =
      "train " + kBase + " base_output_directory=" + dir.str() + " steps=4" + kSmall;
  ASSERT_EQ(run(common + " run_name=f32").status, 0);
  ASSERT_EQ(run(common + " run_name=fp8 quantization=fp8_full").status, 0);
  const std::string png = dir.str() + "/loss.png";
  const Output out = run("compare " + dir.str() + "/f32 " + dir.str() + "/fp8 --plot " + png);
  ASSERT_EQ(out.status, 0) << out.text;
  EXPECT_NE(out.text.find("diff"), std::string::npos);
  EXPECT_NE(out.text.find("tokens/s"), std::string::npos);
  EXPECT_NE(out.text.find("     4"), std::string::npos) << out.text;
  if (system("command -v gnuplot >/dev/null 2>&1") == 0) {
    ASSERT_TRUE(fs::exists(png)) << out.text;
    std::ifstream in(png, std::ios::binary);
    char magic[4] = {};
    in.read(magic, 4);
    EXPECT_EQ(std::string(magic + 1, 3), "PNG");
  }
  const Output missing = run("compare " + dir.str() + "/nope");
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.text.find("error: RUN_DIR="), std::string::npos) << missing.text;
}

}  // namespace
}  // namespace raggemm::train

namespace raggemm::train {
namespace {

// Issue 19: the dense path trains, counts the tokens its capacity drops in
// the step metrics and the log; block-wise activation scales train; the
// startup log states the kernel of every pass; the equivalence command runs
// a config and fails (exit 1) on nothing here.
TEST(TrainCliTest, DensePathWithCapacityCountsDrops) {
  TempDir dir;
  const Output out = run("train " + kBase + " steps=2 base_output_directory=" + dir.str() +
                         " run_name=dense sparse_matmul=false capacity_factor=0.5" + kSmall);
  ASSERT_EQ(out.status, 0) << out.text;
  EXPECT_NE(out.text.find("kernels: dense path; fwd auto"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("| dropped "), std::string::npos) << out.text;
  std::ifstream metrics(dir.str() + "/dense/metrics.jsonl");
  std::string line;
  ASSERT_TRUE(std::getline(metrics, line));
  EXPECT_GT(nlohmann::json::parse(line).at("dropped_tokens").get<int64_t>(), 0);
}

TEST(TrainCliTest, BlockActivationScalesTrain) {
  TempDir dir;
  const Output out =
      run("train " + kBase + " steps=2 base_output_directory=" + dir.str() +
          " run_name=blocks quantization=fp8_full quantization_weight_scaling=block:64"
          " quantization_activation_scaling=block:64" +
          kSmall);
  ASSERT_EQ(out.status, 0) << out.text;
  EXPECT_NE(out.text.find("fwd v2 (use_gmm_v2=auto, v2 for the block scales"), std::string::npos)
      << out.text;
}

TEST(EquivalenceCliTest, RunsAConfigAgainstTheDenseReference) {
  const Output out = run("equivalence " + kBase +
                         " use_gmm_v2_fwd=true use_gmm_v2_dlhs=false use_gmm_v2_drhs=true"
                         " quantization=int8" +
                         kSmall);
  ASSERT_EQ(out.status, 0) << out.text;
  EXPECT_NE(out.text.find("PASS"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("wi dlhs v1 int8/int8"), std::string::npos) << out.text;
}

}  // namespace
}  // namespace raggemm::train
