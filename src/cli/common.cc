#include "cli/common.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <limits>
#include <optional>

#include "raggemm/error.h"
#include "raggemm/npy.h"

namespace raggemm::cli {
namespace {

std::optional<int64_t> to_int(const std::string& text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [stop, status] = std::from_chars(text.data(), end, value);
  if (text.empty() || status != std::errc() || stop != end) return std::nullopt;
  return value;
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t stop = text.find(separator, start);
    parts.push_back(text.substr(start, stop - start));
    if (stop == std::string::npos) return parts;
    start = stop + 1;
  }
}

constexpr int kMaxThreads = 1024;  // the ops' limit
constexpr int kMaxBuffers = 4;

}  // namespace

void parse_command_line(CLI::App& app, const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  argv.reserve(args.size());
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    throw;
  }
}

int64_t parse_int(const std::string& text, const std::string& argument, int64_t min, int64_t max) {
  std::optional<int64_t> value = to_int(text);
  if (!value || *value < min || *value > max) {
    fail(argument, text,
         "expected an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  return *value;
}

double parse_real(const std::string& text, const std::string& argument, double min, double max) {
  double value = 0;
  const char* end = text.data() + text.size();
  auto [stop, status] = std::from_chars(text.data(), end, value);
  if (text.empty() || status != std::errc() || stop != end || !std::isfinite(value) ||
      value < min || value > max) {
    fail(argument, text, "expected a number in [" + to_display(min) + ", " + to_display(max) + "]");
  }
  return value;
}

Tiles parse_tiles(const std::string& text, const std::string& argument) {
  std::vector<std::string> parts = split(text, ',');
  std::vector<int64_t> sizes;
  for (const std::string& part : parts) {
    std::optional<int64_t> size = to_int(part);
    if (!size || *size < 1 || *size > kMaxTile) break;
    sizes.push_back(*size);
  }
  if (parts.size() != 3 || sizes.size() != 3) {
    fail(argument, text,
         "expected three integers M,K,N, each in [1, " + std::to_string(kMaxTile) + "]");
  }
  const Tiles tiles{sizes[0], sizes[1], sizes[2]};
  // The ops' own limit, checked here so the error names the flag.
  const std::string why = tile_limit_violation(tiles);
  if (!why.empty()) fail(argument, text, why);
  return tiles;
}

DType parse_input_dtype(const std::string& text, const std::string& argument) {
  if (text == "f32") return DType::kF32;
  if (text == "bf16") return DType::kBF16;
  fail(argument, text, "expected f32 or bf16");
}

void add_kernel_flags(CLI::App& app, KernelFlags& flags) {
  flags.app = &app;
  app.add_option("--tiles", flags.tiles,
                 "kernel tiles M,K,N (k is the contracted dim), each in [1, " +
                     std::to_string(kMaxTile) + "], and M*K, K*N, M*N each at most " +
                     std::to_string(kMaxTileBlock) +
                     "; default: the tune cache's winner, else the heuristic");
  app.add_option("--kernel", flags.kernel,
                 "kernel generation: v1 or v2; default: the tune cache's winner, else the heuristic");
  app.add_option("--threads", flags.threads, "threads (default: OpenMP's default)");
  app.add_option("--dtype", flags.dtype,
                 "storage of the inputs: f32, or bf16 (rounded, f32 accumulation)")
      ->capture_default_str();
  app.add_option("--buffers", flags.buffers,
                 "prefetch depth of packed panels, 1..4; default: the tune cache's winner, else 1");
}

KernelSettings parse_kernel_flags(const KernelFlags& flags) {
  KernelSettings settings;
  if (flags.given("--tiles")) settings.tiles = parse_tiles(flags.tiles, "--tiles");
  if (flags.given("--kernel")) {
    settings.kernel = parse_kernel(flags.kernel, "--kernel");
    settings.kernel_given = true;
  }
  if (flags.given("--threads")) {
    settings.threads = static_cast<int>(parse_int(flags.threads, "--threads", 1, kMaxThreads));
  }
  settings.dtype = parse_input_dtype(flags.dtype, "--dtype");
  if (flags.given("--buffers")) {
    settings.buffers = static_cast<int>(parse_int(flags.buffers, "--buffers", 1, kMaxBuffers));
    settings.buffers_given = true;
  }
  return settings;
}

Tensor load_f32_array(const std::string& path, const std::string& argument, int rank,
                      const std::string& dims) {
  Tensor tensor = read_npy(path, argument);
  if (tensor.dtype() != DType::kF32) {
    fail(argument, path, std::string("dtype ") + dtype_name(tensor.dtype()) + ", expected float32");
  }
  if (tensor.rank() != rank) {
    fail(argument, path,
         "shape " + shape_string(tensor.shape()) + ", expected rank " + std::to_string(rank) + " " +
             dims);
  }
  return tensor;
}

Tensor load_group_sizes(const std::string& path, const std::string& argument, int64_t rows,
                        const std::string& rows_name) {
  Tensor raw = read_npy(path, argument);
  if (raw.dtype() != DType::kI32 && raw.dtype() != DType::kI64) {
    fail(argument, path,
         std::string("dtype ") + dtype_name(raw.dtype()) + ", expected int32 or int64");
  }
  if (raw.rank() != 1) {
    fail(argument, path, "shape " + shape_string(raw.shape()) + ", expected rank 1 [G]");
  }
  const int64_t groups = raw.dim(0);
  require(groups >= 1, argument, path, "shape [0]: needs at least one group");
  Tensor sizes(DType::kI32, {groups});
  int64_t total = 0;
  for (int64_t g = 0; g < groups; ++g) {
    int64_t size =
        raw.dtype() == DType::kI32 ? int64_t{raw.as<int32_t>()[g]} : raw.as<int64_t>()[g];
    std::string where = "group " + std::to_string(g) + " has size " + std::to_string(size);
    if (size < 0) fail(argument, path, where + "; sizes must be >= 0");
    if (size > std::numeric_limits<int32_t>::max()) {
      fail(argument, path, where + ", which overflows int32");
    }
    total += size;  // cannot overflow: total <= rows before, size < 2^31
    if (total > rows) {
      fail(argument, path,
           "group sizes sum to more than " + rows_name + " = " + std::to_string(rows) +
               " (at group " + std::to_string(g) + ")");
    }
    sizes.as<int32_t>()[g] = static_cast<int32_t>(size);
  }
  return sizes;
}

void check_output_path(const std::string& path, const std::string& argument) {
  namespace fs = std::filesystem;
  require(!path.empty(), argument, path, "empty path");
  std::error_code error;
  fs::path target(path);
  require(!fs::is_directory(target, error), argument, path, "is a directory");
  fs::path folder = target.parent_path();
  if (folder.empty()) folder = ".";
  require(fs::is_directory(folder, error), argument, path,
          "folder " + folder.string() + " does not exist");
}

void check_problem_allocations(const SizeFactor& m, const SizeFactor& k, const SizeFactor& n,
                               const SizeFactor& groups) {
  require_allocatable("the group sizes", {groups}, 4);
  require_allocatable("the lhs", {m, k}, 4);
  require_allocatable("the dout or output", {m, n}, 4);
  require_allocatable("the rhs or weight gradient", {groups, k, n}, 4);
}

Tensor to_storage(const Tensor& f32, DType dtype) {
  if (dtype == DType::kF32) return f32;
  Tensor out(DType::kBF16, f32.shape());
  const float* in = f32.as<const float>();
  uint16_t* bits = out.as<uint16_t>();
  const int64_t count = f32.numel();
  for (int64_t i = 0; i < count; ++i) bits[i] = f32_to_bf16(in[i]);
  return out;
}

void abort_job(Communicator& comm, const std::string& message) {
  if (comm.job_size() > 1) {
    const std::string line = "error: rank " + std::to_string(comm.job_rank()) + " of " +
                             std::to_string(comm.job_size()) + ": " + message + "\n";
    std::fputs(line.c_str(), stderr);
    std::fflush(stderr);
  }
  comm.abort(message);
  std::abort();  // not reached: abort ends the job or throws
}

}  // namespace raggemm::cli
