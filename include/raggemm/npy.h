// NumPy .npy files (format versions 1.0, 2.0 and 3.0), C order only, for
// float32, float16, int32, int64, int8 and uint8. bf16 tensors are written as
// float32; fp8 tensors as uint8 (their raw bit pattern).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "raggemm/tensor.h"

namespace raggemm {

// Parses a whole .npy image held in memory. Never reads past `size`, never
// allocates more than the payload the image really holds; a malformed image
// throws Error naming `argument`.
Tensor parse_npy(const uint8_t* data, size_t size, const std::string& argument);

// Reads a file; a missing or malformed file throws Error naming `argument`.
Tensor read_npy(const std::string& path, const std::string& argument);

// Serializes a contiguous view (version 1.0 header, 64-byte aligned).
std::vector<uint8_t> serialize_npy(const TensorView& view);

// Writes to a temporary file beside `path` and renames it into place. A
// failure to write throws Error(argument, path); pass the CLI flag (e.g.
// "--out") as `argument` so the message names it.
void write_npy(const std::string& path, const TensorView& view,
               const std::string& argument = "path");

// Writes bytes atomically: `<path>.tmp.<pid>.<random>.<host>` in the same
// directory (raggemm/temp_files.h), fsync, rename over `path`. On failure the temporary file is removed, `path`
// is left as it was, and Error(argument, path) is thrown. Used for every file
// we write.
void write_file_atomic(const std::string& path, const void* data, size_t size,
                       const std::string& argument = "path");

// One .npy file of a set that belongs together (a command's outputs).
struct NpyOutput {
  std::string path;
  TensorView view;
  std::string argument;  // the CLI flag that named the path, for errors
};

// Writes every file to its temporary (fsynced) before renaming any into
// place, so a failure to write one of them leaves every path as it was.
// (Only a failing rename, after the first rename, can leave a partial set.)
void write_npys_together(const std::vector<NpyOutput>& outputs);

}  // namespace raggemm
