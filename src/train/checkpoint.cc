// Atomic, checksummed checkpoint files.
#include "train/checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "raggemm/diagnostics.h"
#include "raggemm/error.h"
#include "raggemm/npy.h"
#include "raggemm/train.h"

namespace raggemm::train {
namespace {

constexpr char kMagic[8] = {'R', 'G', 'M', 'M', 'C', 'K', 'P', '1'};

uint64_t fnv1a(const uint8_t* data, size_t size) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < size; ++i) h = (h ^ data[i]) * 1099511628211ull;
  return h;
}

std::vector<uint8_t> read_all(const std::string& path) {
  std::error_code error;
  require(!std::filesystem::is_directory(path, error), "checkpoint", path,
          "is a directory, not a checkpoint file");
  std::ifstream in(path, std::ios::binary);
  require(in.good(), "checkpoint", path, "cannot open");
  try {
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(in),
                                std::istreambuf_iterator<char>());
  } catch (const std::exception& e) {
    fail("checkpoint", path, std::string("cannot read: ") + e.what());
  }
}

struct Parsed {
  nlohmann::json header;
  size_t payload_offset = 0;
};

Parsed parse(const std::vector<uint8_t>& bytes, const std::string& path) {
  require(bytes.size() >= sizeof(kMagic) + 16 && std::memcmp(bytes.data(), kMagic, 8) == 0,
          "checkpoint", path, "not a raggemm checkpoint (bad magic or too short)");
  uint64_t stored = 0;
  std::memcpy(&stored, bytes.data() + bytes.size() - 8, 8);
  require(fnv1a(bytes.data(), bytes.size() - 8) == stored, "checkpoint", path,
          "checksum mismatch: the file is torn or corrupt");
  uint64_t header_size = 0;
  std::memcpy(&header_size, bytes.data() + 8, 8);
  require(header_size <= bytes.size() - 24, "checkpoint", path, "header length past the end");
  Parsed parsed;
  try {
    parsed.header = nlohmann::json::parse(bytes.begin() + 16, bytes.begin() + 16 + header_size);
  } catch (const nlohmann::json::exception& e) {
    fail("checkpoint", path, std::string("bad header: ") + e.what());
  }
  parsed.payload_offset = 16 + header_size;
  return parsed;
}

}  // namespace

std::string shard_name(int rank, int ranks) {
  if (ranks <= 1) return "";
  return "rank_" + std::to_string(rank) + "_of_" + std::to_string(ranks);
}

std::string checkpoint_path(const std::string& run_dir, int64_t step, const std::string& shard) {
  char name[64];
  std::snprintf(name, sizeof(name), "step_%08lld.ckpt", static_cast<long long>(step));
  std::filesystem::path dir = std::filesystem::path(run_dir) / "checkpoints";
  if (!shard.empty()) dir /= shard;
  return (dir / name).string();
}

void save_checkpoint(const std::string& path, const CheckpointData& data) {
  nlohmann::json blobs = nlohmann::json::array();
  uint64_t offset = 0;
  for (const auto& [name, values] : data.blobs) {
    blobs.push_back({{"name", name}, {"count", values.size()}, {"offset", offset}});
    offset += values.size() * sizeof(float);
  }
  nlohmann::json header = {
      {"format", 1}, {"step", data.step}, {"updates", data.updates}, {"blobs", blobs}};
  if (!data.shard.empty()) header["shard"] = data.shard;
  if (!data.mesh.empty()) {
    header["mesh"] = data.mesh;
    header["rank"] = data.rank;
    header["fsdp_sizes"] = data.fsdp_sizes;
    header["expert_params"] = data.expert_params;
  }
  const std::string text = header.dump();
  std::vector<uint8_t> bytes(16 + text.size() + offset + 8);
  std::memcpy(bytes.data(), kMagic, 8);
  const uint64_t header_size = text.size();
  std::memcpy(bytes.data() + 8, &header_size, 8);
  std::memcpy(bytes.data() + 16, text.data(), text.size());
  uint8_t* payload = bytes.data() + 16 + text.size();
  for (const auto& [name, values] : data.blobs) {
    std::memcpy(payload, values.data(), values.size() * sizeof(float));
    payload += values.size() * sizeof(float);
  }
  const uint64_t checksum = fnv1a(bytes.data(), bytes.size() - 8);
  std::memcpy(bytes.data() + bytes.size() - 8, &checksum, 8);
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  std::error_code error;
  std::filesystem::create_directories(folder, error);
  if (error) fail("checkpoint", path, "cannot create " + folder.string() + ": " + error.message());
  write_file_atomic(path, bytes.data(), bytes.size(), "checkpoint");
}

CheckpointData load_checkpoint(const std::string& path) {
  const std::vector<uint8_t> bytes = read_all(path);
  const Parsed parsed = parse(bytes, path);
  CheckpointData data;
  try {
    data.step = parsed.header.at("step").get<int64_t>();
    data.updates = parsed.header.at("updates").get<int64_t>();
    data.shard = parsed.header.value("shard", std::string());
    if (parsed.header.contains("mesh")) {
      data.mesh = parsed.header.at("mesh").get<std::vector<int64_t>>();
      data.rank = parsed.header.at("rank").get<int64_t>();
      data.fsdp_sizes = parsed.header.at("fsdp_sizes").get<std::map<std::string, int64_t>>();
      data.expert_params = parsed.header.at("expert_params").get<std::vector<std::string>>();
      require(data.mesh.size() == 3, "checkpoint", path, "mesh must be [dp, fsdp, ep]");
    }
    const size_t payload_size = bytes.size() - 8 - parsed.payload_offset;
    for (const auto& blob : parsed.header.at("blobs")) {
      const uint64_t count = blob.at("count").get<uint64_t>();
      const uint64_t offset = blob.at("offset").get<uint64_t>();
      require(offset <= payload_size && count <= (payload_size - offset) / sizeof(float),
              "checkpoint", path, "blob past the end of the file");
      std::vector<float> values(count);
      std::memcpy(values.data(), bytes.data() + parsed.payload_offset + offset,
                  count * sizeof(float));
      data.blobs[blob.at("name").get<std::string>()] = std::move(values);
    }
  } catch (const nlohmann::json::exception& e) {
    fail("checkpoint", path, std::string("bad header: ") + e.what());
  }
  return data;
}

int64_t verify_checkpoint(const std::string& path) { return load_checkpoint(path).step; }

std::optional<std::string> latest_checkpoint(const std::string& run_dir,
                                             const std::string& shard) {
  std::filesystem::path dir = std::filesystem::path(run_dir) / "checkpoints";
  if (!shard.empty()) dir /= shard;
  if (!std::filesystem::is_directory(dir)) return std::nullopt;
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    // Temp files of an interrupted write are not checkpoints.
    if (name.size() > 5 && name.rfind("step_", 0) == 0 && name.substr(name.size() - 5) == ".ckpt") {
      names.push_back(entry.path().string());
    }
  }
  std::sort(names.rbegin(), names.rend());
  for (const std::string& path : names) {
    try {
      verify_checkpoint(path);
      return path;
    } catch (const Error& e) {
      report_warning("checkpoint", std::string("skipping ") + e.what());
    }
  }
  return std::nullopt;
}

}  // namespace raggemm::train
