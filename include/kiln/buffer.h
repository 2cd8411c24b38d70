// Host tensors: element types, shapes and the Buffer that carries data in and out of an executable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/export.h"
#include "kiln/status.h"

namespace kiln {

enum class DType { kF32, kF64, kI1, kI8, kI16, kI32, kI64 };

// "f32", "i1", ...
KILN_EXPORT const char* dtype_name(DType dtype);
KILN_EXPORT Result<DType> parse_dtype(const std::string& name);
// Bytes per element in memory (i1 takes one byte, as MLIR's LLVM lowering stores it).
KILN_EXPORT size_t dtype_size(DType dtype);

inline constexpr int64_t kDynamicDim = -1;

// An element type with a shape; a dimension of kDynamicDim is only known at run time.
struct KILN_EXPORT TensorType {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  // A plain value (f32, i64, index, ...) passed by value, not a tensor; its Buffer has rank 0.
  bool scalar = false;

  bool is_static() const;
  // "tensor<2x?xf32>" style, for messages.
  std::string to_string() const;
  bool operator==(const TensorType& other) const {
    return dtype == other.dtype && shape == other.shape && scalar == other.scalar;
  }
};

KILN_EXPORT std::string shape_to_string(const std::vector<int64_t>& shape);
KILN_EXPORT int64_t element_count(const std::vector<int64_t>& shape);
// Bytes a dense tensor of `shape` needs, or an error when a dimension is dynamic or negative or the
// count overflows.
KILN_EXPORT Result<size_t> dense_byte_size(DType dtype, const std::vector<int64_t>& shape);

// A dense, row-major host tensor. Copies share the storage (like a shared_ptr).
class KILN_EXPORT Buffer {
 public:
  Buffer() = default;
  // Allocates zero-filled storage, 64-byte aligned; an error naming the size when the shape's
  // byte count overflows or memory runs out.
  static Result<Buffer> allocate(DType dtype, std::vector<int64_t> shape);
  // The same for shapes the caller knows fit (tests, small fixed tensors): aborts with a message
  // where allocate would fail.
  Buffer(DType dtype, std::vector<int64_t> shape);
  // Adopts `data`, which `owner` keeps alive (e.g. memory the executable allocated).
  Buffer(DType dtype, std::vector<int64_t> shape, void* data, std::shared_ptr<void> owner);

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  TensorType type() const { return TensorType{dtype_, shape_}; }
  int64_t element_count() const { return kiln::element_count(shape_); }
  size_t byte_size() const { return static_cast<size_t>(element_count()) * dtype_size(dtype_); }
  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  // Element i converted to double (i1 gives 0 or 1), for summaries and tests.
  double element_as_double(int64_t index) const;

 private:
  DType dtype_ = DType::kF32;
  std::vector<int64_t> shape_;
  void* data_ = nullptr;
  std::shared_ptr<void> owner_;
};

}  // namespace kiln
