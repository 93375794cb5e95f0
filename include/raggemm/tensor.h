// TensorView: a non-owning, typed, strided view. Tensor: an owning,
// 64-byte-aligned, zero-initialized, row-major buffer (2 MiB-aligned and
// advised as transparent huge pages from 2 MiB up: core/tensor.cc).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "raggemm/dtype.h"

namespace raggemm {

using Shape = std::vector<int64_t>;

std::string shape_string(const Shape& shape);  // "[2,3,4]"

// Row-major strides in elements for a shape.
Shape row_major_strides(const Shape& shape);

// Number of elements; throws Error naming `argument` if a dim is negative or
// the product overflows int64.
int64_t checked_numel(const Shape& shape, const std::string& argument);

struct TensorView {
  DType dtype = DType::kF32;
  Shape shape;
  Shape strides;  // in elements
  void* data = nullptr;

  TensorView() = default;
  // A row-major contiguous view.
  TensorView(DType dtype, Shape shape, void* data);
  TensorView(DType dtype, Shape shape, const void* data)
      : TensorView(dtype, std::move(shape), const_cast<void*>(data)) {}

  int rank() const { return static_cast<int>(shape.size()); }
  int64_t dim(int axis) const { return shape.at(static_cast<size_t>(axis)); }
  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  bool is_contiguous() const;

  template <class T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

class Tensor {
 public:
  Tensor() = default;
  // Zero-initialized; throws Error on a negative dim or an overflowing size.
  Tensor(DType dtype, Shape shape);

  DType dtype() const { return view_.dtype; }
  const Shape& shape() const { return view_.shape; }
  int rank() const { return view_.rank(); }
  int64_t dim(int axis) const { return view_.dim(axis); }
  int64_t numel() const { return view_.numel(); }
  size_t nbytes() const { return view_.nbytes(); }
  void* data() const { return view_.data; }
  template <class T>
  T* as() const {
    return view_.as<T>();
  }
  const TensorView& view() const { return view_; }
  operator const TensorView&() const { return view_; }  // NOLINT: views are how every op reads

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::shared_ptr<void> storage_;
  TensorView view_;
};

}  // namespace raggemm
