#include "python/ndarray_view.h"

#include <string>

#include "raggemm/error.h"

namespace raggemm::python {
namespace {

// Whether an array of element type `got` holds `dtype`'s values. Narrow
// floats may arrive as raw bits (unsigned ints of their width) or, where the
// exporter knows them, as their own DLPack float codes.
bool holds(DType dtype, nb::dlpack::dtype got) {
  using Code = nb::dlpack::dtype_code;
  const auto is = [&](Code code, int bits) {
    return got.lanes == 1 && got.code == static_cast<uint8_t>(code) && got.bits == bits;
  };
  switch (dtype) {
    case DType::kF32: return is(Code::Float, 32);
    case DType::kBF16: return is(Code::UInt, 16) || is(Code::Bfloat, 16);
    case DType::kF16: return is(Code::UInt, 16) || is(Code::Float, 16);
    case DType::kI32: return is(Code::Int, 32);
    case DType::kI64: return is(Code::Int, 64);
    case DType::kI8: return is(Code::Int, 8);
    case DType::kU8: return is(Code::UInt, 8);
    case DType::kF8E4M3: return is(Code::UInt, 8);
    case DType::kF8E5M2: return is(Code::UInt, 8);
  }
  return false;
}

std::string describe(nb::dlpack::dtype dtype) {
  using Code = nb::dlpack::dtype_code;
  const char* kind = "?";
  switch (static_cast<Code>(dtype.code)) {
    case Code::Int: kind = "int"; break;
    case Code::UInt: kind = "uint"; break;
    case Code::Float: kind = "float"; break;
    case Code::Bfloat: kind = "bfloat"; break;
    case Code::Complex: kind = "complex"; break;
    case Code::Bool: kind = "bool"; break;
    default: break;
  }
  return kind + std::to_string(dtype.bits);
}

template <class Array>
std::string shape_of(const Array& array) {
  Shape shape;
  for (size_t i = 0; i < array.ndim(); ++i) shape.push_back(static_cast<int64_t>(array.shape(i)));
  return shape_string(shape);
}

// numpy's rule: strides of dims of size 1 do not matter, nor any stride of
// an empty array.
template <class Array>
bool is_c_contiguous(const Array& array) {
  for (size_t i = 0; i < array.ndim(); ++i) {
    if (array.shape(i) == 0) return true;
  }
  int64_t expected = 1;
  for (size_t i = array.ndim(); i-- > 0;) {
    const auto size = static_cast<int64_t>(array.shape(i));
    if (size != 1 && array.stride(i) != expected) return false;
    expected *= size;
  }
  return true;
}

}  // namespace

TensorView view_of(const InputArray& array, DType dtype, const char* argument) {
  // Messages are built only on failure: this runs several times per call.
  if (!holds(dtype, array.dtype())) {
    fail(argument, describe(array.dtype()), std::string("expected an array of ") + dtype_name(dtype));
  }
  if (!is_c_contiguous(array)) {
    fail(argument, shape_of(array), "array must be C-contiguous (use numpy.ascontiguousarray)");
  }
  Shape shape(array.ndim());
  for (size_t i = 0; i < array.ndim(); ++i) shape[i] = static_cast<int64_t>(array.shape(i));
  const void* data = array.data();
  // An empty array may carry no storage; the ops read nothing from it, but
  // they reject null pointers, so point at something valid.
  static const uint64_t empty_storage[8] = {};
  if (data == nullptr && checked_numel(shape, argument) == 0) data = empty_storage;
  return TensorView(dtype, std::move(shape), data);
}

std::vector<int32_t> group_size_values(const std::optional<InputArray>& array, int64_t groups) {
  std::vector<int32_t> sizes;
  if (!array) return sizes;
  const TensorView view = view_of(*array, DType::kI32, "group_sizes");
  require(view.rank() == 1 && view.dim(0) == groups, "group_sizes", shape_string(view.shape),
          "expected [groups] int32");
  sizes.assign(view.as<int32_t>(), view.as<int32_t>() + view.dim(0));
  return sizes;
}

TensorView view_of_output(const OutputArray& array, DType dtype, const char* argument) {
  if (!holds(dtype, array.dtype())) {
    fail(argument, describe(array.dtype()),
         std::string("expected an array of ") + dtype_name(dtype) + " (the out_dtype)");
  }
  if (!is_c_contiguous(array)) fail(argument, shape_of(array), "array must be C-contiguous");
  Shape shape(array.ndim());
  for (size_t i = 0; i < array.ndim(); ++i) shape[i] = static_cast<int64_t>(array.shape(i));
  return TensorView(dtype, std::move(shape), array.data());
}

nb::dlpack::dtype numpy_dtype_of(DType dtype) {
  switch (dtype) {
    case DType::kF32: return nb::dtype<float>();
    case DType::kBF16: return nb::dtype<uint16_t>();
    case DType::kF16: return nb::dtype<uint16_t>();
    case DType::kI32: return nb::dtype<int32_t>();
    case DType::kI64: return nb::dtype<int64_t>();
    case DType::kI8: return nb::dtype<int8_t>();
    case DType::kU8: return nb::dtype<uint8_t>();
    case DType::kF8E4M3: return nb::dtype<uint8_t>();
    case DType::kF8E5M2: return nb::dtype<uint8_t>();
  }
  return nb::dtype<uint8_t>();
}

nb::ndarray<nb::numpy> to_numpy(Tensor tensor) {
  // The capsule keeps a copy of the Tensor (a shared_ptr to its storage)
  // alive for as long as numpy holds the array.
  auto* owned = new Tensor(std::move(tensor));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  std::vector<size_t> dims(owned->shape().begin(), owned->shape().end());
  return nb::ndarray<nb::numpy>(owned->data(), dims.size(), dims.data(), owner, nullptr,
                                numpy_dtype_of(owned->dtype()));
}

}  // namespace raggemm::python
