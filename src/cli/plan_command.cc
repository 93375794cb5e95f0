// raggemm plan: the resolved tile plan of one weight of an MoE block, for all
// three passes, with the source of every field (explicit > cache > heuristic).
//
//   raggemm plan --m M --embed E --mlp F --groups G [--weight wi|wo]
//       [key=value ...] [--cache PATH] [--no-cache] [--dist D] [--json]
//
// key=value are the plan config keys ({wi,wo}_tile_{fwd,dlhs,drhs}_{batch_seq,
// embed_dim,mlp_dim}, use_gmm_v2[_fwd|_dlhs|_drhs], input_buffer_count and
// {wi,wo}_input_buffer_count_{fwd,dlhs,drhs}). The m, k, n printed are
// kernel tiles, after the model-dim mapping.
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/bench_problem.h"
#include "cli/command.h"
#include "cli/common.h"
#include "raggemm/error.h"
#include "raggemm/moe_plan.h"

namespace raggemm::cli {
namespace {

constexpr int64_t kMaxDim = int64_t{1} << 31;

struct BlockArgs {
  std::string m, embed, mlp, groups, dist;
};

void add_block_flags(CLI::App& app, BlockArgs& args) {
  app.add_option("--m", args.m, "tokens (batch_seq)")->required();
  app.add_option("--embed", args.embed, "embed_dim")->required();
  app.add_option("--mlp", args.mlp, "mlp_dim")->required();
  app.add_option("--groups", args.groups, "experts (groups)")->required();
}

int run_plan(const std::vector<std::string>& args) {
  CLI::App app{"Resolved tile plan of one weight of an MoE block, for its three passes, with the "
               "source of each field: explicit > cache > heuristic.",
               "raggemm plan"};
  BlockArgs block;
  add_block_flags(app, block);
  std::string weight_text = "wi", cache_path, dist_text;
  std::vector<std::string> settings;
  bool json_output = false, no_cache = false;
  app.add_option("--weight", weight_text, "wi or wo")->capture_default_str();
  app.add_option("--cache", cache_path, "tune cache file (default: $RAGGEMM_TUNE_CACHE or "
                                        "$XDG_CACHE_HOME/raggemm/tune_cache.json)");
  app.add_flag("--no-cache", no_cache, "ignore the tune cache");
  app.add_option("--dist", dist_text,
                 "group sizes the heuristic reasons about: uniform, zipf:S, empty:F "
                 "(default: balanced M/G)");
  app.add_flag("--json", json_output, "print one JSON object");
  app.add_option("settings", settings, "plan keys as key=value");
  parse_command_line(app, args);

  const ModelDims dims{parse_int(block.m, "--m", 0, kMaxDim), parse_int(block.embed, "--embed", 1, kMaxDim),
                       parse_int(block.mlp, "--mlp", 1, kMaxDim)};
  const int64_t groups = parse_int(block.groups, "--groups", 1, kMaxDim);
  const Weight weight = parse_weight(weight_text, "--weight");
  const BlockPlan plan = parse_plan_settings(settings);
  std::vector<int32_t> group_sizes;
  if (app.count("--dist")) {
    require_allocatable("the group sizes", {{"--groups", groups}}, 4);
    group_sizes = bench::draw_group_sizes(dims.batch_seq, groups, bench::parse_group_dist(dist_text, "--dist"));
  }
  std::unique_ptr<TuneCache> own_cache;
  const TuneCache* cache = nullptr;
  if (!no_cache) {
    if (app.count("--cache")) {
      own_cache = std::make_unique<TuneCache>(cache_path);
      cache = own_cache.get();
    } else {
      cache = &TuneCache::shared_default();
    }
  }

  nlohmann::ordered_json passes = nlohmann::ordered_json::object();
  for (Pass pass : kAllPasses) {
    const ResolvedPassConfig config =
        resolve(plan.weight(weight), weight, pass, dims, groups, group_sizes, cache);
    passes[pass_name(pass)] = {
        {"m", config.tiles.m},
        {"k", config.tiles.k},
        {"n", config.tiles.n},
        {"kernel", kernel_name(config.kernel)},
        {"buffers", config.input_buffer_count},
        {"source",
         {{"m", source_name(config.source.m)},
          {"k", source_name(config.source.k)},
          {"n", source_name(config.source.n)},
          {"kernel", source_name(config.source.kernel)},
          {"buffers", source_name(config.source.buffers)}}}};
    if (!config.cache_rejection.empty()) {
      passes[pass_name(pass)]["cache_rejected"] = config.cache_rejection;
    }
  }
  if (json_output) {
    nlohmann::ordered_json out = {{"weight", weight_name(weight)}, {"passes", passes}};
    std::cout << out.dump() << "\n";
    return 0;
  }
  std::printf("plan for %s: M=%lld embed=%lld mlp=%lld groups=%lld; cache: %s\n", weight_name(weight),
              static_cast<long long>(dims.batch_seq), static_cast<long long>(dims.embed_dim),
              static_cast<long long>(dims.mlp_dim), static_cast<long long>(groups),
              cache ? (cache->path() + " (" + std::to_string(cache->size()) + " entries)").c_str() : "off");
  std::printf("%-5s %-5s %-26s %-26s %-26s %-16s %s\n", "pass", "op", "m", "k", "n", "kernel", "buffers");
  for (Pass pass : kAllPasses) {
    const auto& p = passes[pass_name(pass)];
    const KernelAxes axes = kernel_axes(weight, pass);
    auto field = [&](const char* name, ModelDim dim) {
      return std::to_string(p[name].get<int64_t>()) + " " + model_dim_name(dim) + " (" +
             p["source"][name].get<std::string>() + ")";
    };
    std::printf("%-5s %-5s %-26s %-26s %-26s %-16s %s\n", pass_name(pass), pass_op_name(pass),
                field("m", axes.m).c_str(), field("k", axes.k).c_str(), field("n", axes.n).c_str(),
                (p["kernel"].get<std::string>() + " (" + p["source"]["kernel"].get<std::string>() + ")").c_str(),
                (std::to_string(p["buffers"].get<int>()) + " (" + p["source"]["buffers"].get<std::string>() + ")").c_str());
  }
  for (Pass pass : kAllPasses) {
    const auto& p = passes[pass_name(pass)];
    if (p.contains("cache_rejected")) {
      std::printf("%s: cache entry rejected (%s); the heuristic decides instead\n", pass_name(pass),
                  p["cache_rejected"].get<std::string>().c_str());
    }
  }
  return 0;
}

const CommandRegistrar kPlanRegistrar(
    "plan", "resolved tile plan of an MoE weight (explicit > cache > heuristic)",
    run_plan);

}  // namespace
}  // namespace raggemm::cli
