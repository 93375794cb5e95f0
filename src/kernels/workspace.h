// Per-thread scratch buffers, 64-byte aligned, grown on demand and reused
// across calls. Their size is bounded by the tiles (never by M, N or G).
#pragma once

#include <cstdint>

namespace raggemm::kernels {

enum class Slot { kPackedA, kPackedB, kAccumulator, kLine, kDecoded, kColumnSums, kCount };

// A buffer of at least `floats` floats for this thread; contents undefined.
float* workspace(Slot slot, int64_t floats);

inline float* scratch_line(int64_t floats) { return workspace(Slot::kLine, floats); }

// The same buffer holding `count` elements of T (bf16 bits, int8 codes, i32
// sums), for the dot-product drivers.
template <class T>
T* workspace_as(Slot slot, int64_t count) {
  const int64_t bytes = count * static_cast<int64_t>(sizeof(T));
  return reinterpret_cast<T*>(workspace(slot, (bytes + 3) / 4));
}

}  // namespace raggemm::kernels
