// Argument validation shared by every op: each check throws raggemm::Error
// naming the argument and the offending value, and runs before any write.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "backends/gmm_spec.h"
#include "backends/workspace.h"
#include "raggemm/gmm.h"
#include "raggemm/tensor.h"

namespace raggemm::ops {

// Rank, dtype (one of `dtypes`), row-major contiguity, non-null data when
// non-empty, and a non-overflowing element count.
void check_tensor(const TensorView& view, const std::string& argument, int rank,
                  std::initializer_list<DType> dtypes);

void check_dim(const TensorView& view, const std::string& argument, int axis, int64_t expected,
               const std::string& what);

// group_sizes: int32 or int64 [G], each >= 0, sum <= m. Returns row starts
// (size G + 1).
std::vector<int64_t> check_group_sizes(const TensorView& group_sizes, int64_t m);

// Tiles: all three unset (0: the op picks them) or within the one tile
// limit of raggemm/gmm.h (tile_limit_violation); refused otherwise.
void check_tiles(const Tiles& tiles, const std::string& argument);

void check_threads(int threads, const std::string& argument);
void check_buffer_count(int input_buffer_count, const std::string& argument);

// The options' out_dtype: kF32 or kBF16 (argument "out_dtype").
void check_out_dtype(DType out_dtype);
// A caller's output tensor: rank, contiguity, and a dtype of f32 or bf16
// that equals out_dtype (argument "out", naming its dtype).
void check_out_tensor(const TensorView& out, int rank, DType out_dtype);

// Local expert range: returns the number of local groups.
int64_t check_local_groups(int64_t group_offset, int64_t local_groups, int64_t total_groups,
                           int64_t rhs_groups, const std::string& rhs_argument);

// What a call fixes besides its operands: the settings every op validates
// the same way, and the names its arguments go by in error messages (a
// quantized pass calls its rhs "weight", tgmm its rhs "dout").
struct CallSettings {
  Tiles tiles{};
  KernelVersion kernel = KernelVersion::kV1;
  int input_buffer_count = 1;
  DType out_dtype = DType::kF32;
  std::string backend;  // "": the first registered backend that runs the spec
  // Lent to Backend::run for the call; null: the threads' own buffers.
  backends::Workspace* workspace = nullptr;
};

// The one validation of a grouped matmul (DESIGN.md s.5): every operand,
// the groups and their range, the settings, the output stage and the
// quantized operands' scales, in that order, each failure an Error naming
// the argument and its value, before anything is written. Fills the spec's
// derived fields. `spec.out` is not looked at (see validate_out).
void validate(backends::GmmSpec& spec, const CallSettings& settings);

// The caller's output of a validated spec: rank, contiguity, dtype equal
// to the settings' out_dtype, and the shape the spec computes.
void validate_out(const backends::GmmSpec& spec, const CallSettings& settings);

// The shape of the output a validated spec computes.
Shape output_shape(const backends::GmmSpec& spec);

}  // namespace raggemm::ops
