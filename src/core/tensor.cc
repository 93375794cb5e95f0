#include "raggemm/tensor.h"

#include <cstdlib>
#include <cstring>
#include <limits>

#ifdef __linux__
#include <sys/mman.h>
#endif

#include "raggemm/error.h"

namespace raggemm {

std::string shape_string(const Shape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

Shape row_major_strides(const Shape& shape) {
  Shape strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  return strides;
}

int64_t checked_numel(const Shape& shape, const std::string& argument) {
  int64_t count = 1;
  for (int64_t dim : shape) {
    require(dim >= 0, argument, shape_string(shape), "dims must be >= 0");
    if (dim != 0 && count > std::numeric_limits<int64_t>::max() / dim) {
      fail(argument, shape_string(shape), "element count overflows int64");
    }
    count *= dim;
  }
  return count;
}

TensorView::TensorView(DType dtype_in, Shape shape_in, void* data_in)
    : dtype(dtype_in), shape(std::move(shape_in)), data(data_in) {
  strides = row_major_strides(shape);
}

int64_t TensorView::numel() const {
  int64_t count = 1;
  for (int64_t dim : shape) count *= dim;
  return count;
}

bool TensorView::is_contiguous() const {
  if (strides.size() != shape.size()) return false;
  int64_t expected = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1 && strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

void Tensor::Free::operator()(void* p) const { std::free(p); }

namespace {
constexpr size_t kHugePageBytes = size_t{2} << 20;  // x86-64's transparent huge page
}  // namespace

Tensor::Tensor(DType dtype, Shape shape) {
  int64_t count = checked_numel(shape, "shape");
  size_t element = dtype_size(dtype);
  if (count > 0 && static_cast<uint64_t>(count) > std::numeric_limits<size_t>::max() / 2 / element) {
    fail("shape", shape_string(shape), "tensor too large to allocate");
  }
  size_t bytes = static_cast<size_t>(count) * element;
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  // A tensor of whole 2 MiB pages or more starts on a 2 MiB boundary and
  // asks for transparent huge pages (THP "madvise" is a common default).
  // Its zeroing otherwise costs a page fault every 4 KiB: on a Zen 3 VM,
  // 2.3 ms for a fresh 4 MiB tensor, more than quantizing the 16 MiB
  // matrix it holds the codes of (3.0 ms). Only the whole huge pages are
  // advised, so the tail keeps small pages and no memory is added.
  const bool huge = rounded >= kHugePageBytes;
  void* raw = nullptr;
  if (posix_memalign(&raw, huge ? kHugePageBytes : 64, rounded) != 0) raw = nullptr;
  if (!raw) fail("shape", shape_string(shape), "out of memory");
#ifdef __linux__
  if (huge) madvise(raw, rounded / kHugePageBytes * kHugePageBytes, MADV_HUGEPAGE);  // a hint
#endif
  std::memset(raw, 0, rounded);
  storage_ = std::shared_ptr<void>(raw, Free{});
  view_ = TensorView(dtype, std::move(shape), raw);
}

}  // namespace raggemm
