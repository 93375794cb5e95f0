// Helpers shared by the raggemm subcommands: argument parsing with one error
// format, loading and checking .npy inputs under their flag names, and the
// kernel flags (--tiles, --kernel, --threads, --dtype, --buffers) that every
// compute command takes. Every rejection is a raggemm::Error whose argument is
// the flag, so main prints one "error: --flag=value: why" line.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "raggemm/allocation_limits.h"
#include "raggemm/comm.h"
#include "raggemm/dtype.h"
#include "raggemm/gmm.h"
#include "raggemm/tensor.h"

namespace raggemm::cli {

// Parses a subcommand's arguments (args[0] is the subcommand name). On --help
// prints the help and throws CLI::Success, which main turns into exit 0.
void parse_command_line(CLI::App& app, const std::vector<std::string>& args);

// An integer in [min, max]; anything else (empty, "abc", "1.5", "3x",
// out of range) throws Error naming `argument`.
int64_t parse_int(const std::string& text, const std::string& argument, int64_t min, int64_t max);
// A finite number in [min, max].
double parse_real(const std::string& text, const std::string& argument, double min, double max);

// "M,K,N": three positive integers. "", "0,1,1", "-3,1,1", "abc", "1,2"
// and "1,2,3,4" are errors naming `argument`.
Tiles parse_tiles(const std::string& text, const std::string& argument);

// The storage dtype of the inputs: "f32" or "bf16".
DType parse_input_dtype(const std::string& text, const std::string& argument);

// Values of the kernel flags as typed; strings so that every bad value gets
// the same one-line error from our parsers rather than CLI11's.
struct KernelFlags {
  std::string tiles;   // not given: tune cache, else the heuristic
  std::string kernel;  // not given: tune cache, else the heuristic
  std::string threads;  // not given: OpenMP's default
  std::string dtype = "f32";
  std::string buffers;  // not given: tune cache, else the heuristic (1)
  const CLI::App* app = nullptr;  // set by add_kernel_flags

  // Whether the flag was on the command line (so "--tiles ''" is an error,
  // not "unset").
  bool given(const std::string& flag) const { return app && app->count(flag) > 0; }
};

// The kernel flags, parsed and range-checked. Tiles left at 0 and a kernel
// or buffer count not given are resolved later (cli/compute_flags.h).
struct KernelSettings {
  Tiles tiles{};
  KernelVersion kernel = KernelVersion::kV1;
  int threads = 0;
  DType dtype = DType::kF32;
  int buffers = 1;
  bool kernel_given = false;
  bool buffers_given = false;
};

void add_kernel_flags(CLI::App& app, KernelFlags& flags);
KernelSettings parse_kernel_flags(const KernelFlags& flags);

// Op options (GmmOptions or TgmmOptions) with the kernel fields set and the
// rest at their defaults.
template <class Options>
Options kernel_options(const Tiles& tiles, KernelVersion kernel, int threads, int buffers) {
  Options options;
  options.tiles = tiles;
  options.kernel = kernel;
  options.threads = threads;
  options.input_buffer_count = buffers;
  return options;
}

// Reads a float32 .npy of the given rank; `dims` names the expected shape
// in errors (e.g. "[M,K]").
Tensor load_f32_array(const std::string& path, const std::string& argument, int rank,
                      const std::string& dims);

// Reads group sizes: an int32 or int64 .npy of shape [G], G >= 1, each entry in
// [0, 2^31 - 1], summing to at most `rows`. Returns them as int32.
Tensor load_group_sizes(const std::string& path, const std::string& argument, int64_t rows,
                        const std::string& rows_name);

// Requires that `path` can be written: its folder exists and it is not a
// folder itself. Checked before any work so a doomed run fails fast.
void check_output_path(const std::string& path, const std::string& argument);

// The tensors of one grouped matmul sized by flags (lhs [m,k], dout or out
// [m,n], rhs or weight gradient [groups,k,n] in f32, group sizes [groups]),
// checked before allocating: an Error names the flags whose product
// overflows or exceeds physical memory (raggemm/allocation_limits.h).
void check_problem_allocations(const SizeFactor& m, const SizeFactor& k, const SizeFactor& n,
                               const SizeFactor& groups);

// The input in the storage dtype the user chose: f32 unchanged, bf16 rounded
// to nearest even.
Tensor to_storage(const Tensor& f32, DType dtype);

// A rank that fails ends the whole job instead of leaving the others waiting
// in a collective: prints "error: rank R of N: <message>" (one write, so the
// ranks' lines do not interleave) and has the communicator end every rank
// with status 2. With one process the communicator throws the message back
// to main, which prints "error: <message>" as for any error.
[[noreturn]] void abort_job(Communicator& comm, const std::string& message);

}  // namespace raggemm::cli
