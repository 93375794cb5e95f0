// Per-thread scratch buffers, 64-byte aligned, grown on demand and reused
// across calls. Their size is bounded by the tiles (never by M, N or G).
#pragma once

#include <cstdint>

namespace raggemm::kernels {

enum class Slot { kPackedA, kPackedB, kAccumulator, kLine, kDecoded, kCount };

// A buffer of at least `floats` floats for this thread; contents undefined.
float* workspace(Slot slot, int64_t floats);

inline float* scratch_line(int64_t floats) { return workspace(Slot::kLine, floats); }

}  // namespace raggemm::kernels
