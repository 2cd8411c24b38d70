#include "kiln/buffer.h"

#include <sys/sysinfo.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/machine_memory.h"
#include "core/tensor_memory.h"

namespace kiln {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kF64:
      return "f64";
    case DType::kI1:
      return "i1";
    case DType::kI8:
      return "i8";
    case DType::kI16:
      return "i16";
    case DType::kI32:
      return "i32";
    case DType::kI64:
      return "i64";
  }
  return "?";
}

Result<DType> parse_dtype(const std::string& name) {
  for (DType d :
       {DType::kF32, DType::kF64, DType::kI1, DType::kI8, DType::kI16, DType::kI32, DType::kI64}) {
    if (name == dtype_name(d)) return d;
  }
  return invalid_argument("unknown element type '" + name +
                          "': expected one of f32, f64, i1, i8, i16, i32, i64");
}

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 4;
    case DType::kF64:
      return 8;
    case DType::kI1:
      return 1;
    case DType::kI8:
      return 1;
    case DType::kI16:
      return 2;
    case DType::kI32:
      return 4;
    case DType::kI64:
      return 8;
  }
  return 0;
}

bool TensorType::is_static() const {
  for (int64_t d : shape)
    if (d == kDynamicDim) return false;
  return true;
}

std::string shape_to_string(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += shape[i] == kDynamicDim ? "?" : std::to_string(shape[i]);
  }
  return out + "]";
}

std::string TensorType::to_string() const {
  if (scalar) return dtype_name(dtype);
  std::string out = "tensor<";
  for (int64_t d : shape) out += (d == kDynamicDim ? "?" : std::to_string(d)) + "x";
  return out + dtype_name(dtype) + ">";
}

int64_t element_count(const std::vector<int64_t>& shape) {
  // A zero anywhere makes the tensor empty, however large the other dimensions are; a count past
  // int64 saturates instead of wrapping (dense_byte_size rejects such shapes).
  for (int64_t d : shape)
    if (d == 0) return 0;
  int64_t n = 1;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, d, &n)) return INT64_MAX;
  return n;
}

uint64_t machine_memory_bytes() {
  static const uint64_t bytes = [] {
    struct sysinfo info;
    if (sysinfo(&info) != 0) return uint64_t{0};
    return (static_cast<uint64_t>(info.totalram) + info.totalswap) * info.mem_unit;
  }();
  return bytes;
}

Result<size_t> dense_byte_size(DType dtype, const std::vector<int64_t>& shape) {
  size_t bytes = dtype_size(dtype);
  for (int64_t d : shape) {
    if (d < 0)
      return invalid_argument("shape " + shape_to_string(shape) +
                              " has a dimension that is not known");
    if (__builtin_mul_overflow(bytes, static_cast<size_t>(d), &bytes))
      return resource_exhausted("tensor<" + shape_to_string(shape) + " x " + dtype_name(dtype) +
                                "> needs more than 2^64 bytes");
  }
  // Element indices are int64: a shape whose non-zero dimensions multiply past that is refused even
  // when a zero dimension makes it empty.
  int64_t elements = 1;
  for (int64_t d : shape)
    if (d != 0 && __builtin_mul_overflow(elements, d, &elements))
      return resource_exhausted("tensor<" + shape_to_string(shape) + " x " + dtype_name(dtype) +
                                "> has more than 2^63 elements");
  return bytes;
}

Result<Buffer> Buffer::allocate(DType dtype, std::vector<int64_t> shape) {
  KILN_ASSIGN_OR_RETURN(size_t bytes, dense_byte_size(dtype, shape));
  // 64-byte alignment suits AVX-512 loads; round the size up as aligned_alloc requires.
  size_t rounded = bytes == 0 ? 64 : (bytes + 63) / 64 * 64;
  if (rounded < bytes)
    return resource_exhausted("cannot allocate " + std::to_string(bytes) + " bytes");
  uint64_t memory = machine_memory_bytes();
  if (memory > 0 && bytes > memory)
    return resource_exhausted("cannot allocate " + std::to_string(bytes) + " bytes for a " +
                              dtype_name(dtype) + " tensor of shape " + shape_to_string(shape) +
                              ": more than this machine's memory and swap (" +
                              std::to_string(memory) + " bytes)");
  void* storage = allocate_tensor_memory(rounded, 64);
  if (storage == nullptr)
    return resource_exhausted("cannot allocate " + std::to_string(bytes) + " bytes for a " +
                              dtype_name(dtype) + " tensor of shape " + shape_to_string(shape) +
                              ": out of memory");
  std::memset(storage, 0, rounded);
  return Buffer(dtype, std::move(shape), storage,
                std::shared_ptr<void>(storage, release_tensor_memory));
}

Buffer::Buffer(DType dtype, std::vector<int64_t> shape) {
  Result<Buffer> made = allocate(dtype, std::move(shape));
  if (!made.ok()) {
    std::fprintf(stderr, "kiln: %s\n", made.status().message().c_str());
    std::abort();
  }
  *this = std::move(*made);
}

Buffer::Buffer(DType dtype, std::vector<int64_t> shape, void* data, std::shared_ptr<void> owner)
    : dtype_(dtype), shape_(std::move(shape)), data_(data), owner_(std::move(owner)) {}

double Buffer::element_as_double(int64_t index) const {
  switch (dtype_) {
    case DType::kF32:
      return as<float>()[index];
    case DType::kF64:
      return as<double>()[index];
    case DType::kI1:
      return as<uint8_t>()[index] & 1;
    case DType::kI8:
      return as<int8_t>()[index];
    case DType::kI16:
      return as<int16_t>()[index];
    case DType::kI32:
      return as<int32_t>()[index];
    case DType::kI64:
      return static_cast<double>(as<int64_t>()[index]);
  }
  return 0;
}

}  // namespace kiln
