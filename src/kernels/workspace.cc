#include "kernels/workspace.h"

#include <cstdlib>
#include <new>

namespace raggemm::kernels {
namespace {

struct Buffer {
  float* data = nullptr;
  int64_t capacity = 0;
  ~Buffer() { std::free(data); }
};

thread_local Buffer buffers[static_cast<int>(Slot::kCount)];

}  // namespace

float* workspace(Slot slot, int64_t floats) {
  Buffer& buffer = buffers[static_cast<int>(slot)];
  if (floats > buffer.capacity) {
    std::free(buffer.data);
    // Round to whole cache lines; aligned_alloc needs a multiple of 64 bytes.
    int64_t rounded = (floats + 15) / 16 * 16;
    buffer.data = static_cast<float*>(std::aligned_alloc(64, sizeof(float) * rounded));
    if (!buffer.data) throw std::bad_alloc();
    buffer.capacity = rounded;
  }
  return buffer.data;
}

}  // namespace raggemm::kernels
