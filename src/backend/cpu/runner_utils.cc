// The small runtime library that MLIR-generated code calls: memref copies and the printing
// functions of MLIR's runner utilities, with the output mlir-runner gives. kiln provides its own
// because Debian's libmlir_c_runner_utils.so pulls in libMLIR and libLLVM, which a process that
// only runs cached executables must not load.
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iostream>
#include <numeric>
#include <random>
#include <vector>

namespace {

struct UnrankedMemRef {
  int64_t rank;
  void* descriptor;
};

// A rank-erased view of {allocated, aligned, offset, sizes[rank], strides[rank]}.
template <typename T>
struct StridedView {
  int64_t rank;
  T* data;
  int64_t offset;
  const int64_t* sizes;
  const int64_t* strides;

  StridedView(int64_t r, void* descriptor) : rank(r) {
    auto* slots = static_cast<int64_t*>(descriptor);
    data = reinterpret_cast<T*>(slots[1]);
    offset = slots[2];
    sizes = slots + 3;
    strides = slots + 3 + rank;
  }
};

void print_spaces(std::ostream& os, int64_t count) {
  for (int64_t i = 0; i < count; ++i) os << ' ';
}

// Nested, bracketed rows; the spacing matches mlir-runner's so outputs compare byte for byte.
template <typename T>
void print_data(std::ostream& os, const T* base, int64_t dim, int64_t rank, int64_t offset,
                const int64_t* sizes, const int64_t* strides) {
  if (dim == 0) {
    os << base[offset];
    return;
  }
  os << "[";
  if (sizes[0] > 0) print_data(os, base, dim - 1, rank, offset, sizes + 1, strides + 1);
  if (sizes[0] <= 1) {
    os << "]";
    return;
  }
  os << ", ";
  if (dim > 1) os << "\n";
  for (int64_t i = 1; i + 1 < sizes[0]; ++i) {
    print_spaces(os, rank - dim + 1);
    print_data(os, base, dim - 1, rank, offset + i * strides[0], sizes + 1, strides + 1);
    os << ", ";
    if (dim > 1) os << "\n";
  }
  print_spaces(os, rank - dim + 1);
  print_data(os, base, dim - 1, rank, offset + strides[0] * (sizes[0] - 1), sizes + 1, strides + 1);
  os << "]";
}

// IEEE half and bfloat16 as stored (their bits); printed as the float they hold, like MLIR's
// f16 and bf16 types in the runner utilities.
float half_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);  // infinity or NaN
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    int shift = 0;
    while ((mantissa & 0x400) == 0) {
      mantissa <<= 1;
      ++shift;
    }
    bits = sign | (uint32_t(113 - shift) << 23) | ((mantissa & 0x3ff) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};
float bfloat16_to_float(uint16_t b) {
  uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
std::ostream& operator<<(std::ostream& os, Half h) { return os << half_to_float(h.bits); }
std::ostream& operator<<(std::ostream& os, BFloat16 b) { return os << bfloat16_to_float(b.bits); }
bool operator==(Half a, Half b) { return half_to_float(a.bits) == half_to_float(b.bits); }
bool operator==(BFloat16 a, BFloat16 b) {
  return bfloat16_to_float(a.bits) == bfloat16_to_float(b.bits);
}

// An element of type vector<4x4xf32>, printed as MLIR's runner utilities print their Vector
// type: "((a, b, c, d),   (e, ...),   (...),  (...))".
struct Vector4x4F32 {
  float rows[4][4];
};
std::ostream& operator<<(std::ostream& os, const Vector4x4F32& v) {
  auto row = [&](int r) {
    os << "(" << v.rows[r][0] << ", " << v.rows[r][1] << ", " << v.rows[r][2] << ", "
       << v.rows[r][3] << ")";
  };
  os << "(";
  row(0);
  os << ", ";
  for (int r = 1; r < 3; ++r) {
    os << "  ";
    row(r);
    os << ", ";
  }
  os << " ";
  row(3);
  return os << ")";
}

// A 1-D memref descriptor: {allocated, aligned, offset, size, stride}.
template <typename T>
struct MemRef1D {
  T* allocated;
  T* aligned;
  int64_t offset;
  int64_t size;
  int64_t stride;
  T* begin() const { return aligned + offset; }
};

template <typename T>
void sort_prefix(uint64_t n, MemRef1D<T>* v) {
  std::sort(v->begin(), v->begin() + n);
}

// "<kind> base@ = 0x... rank = R offset = O sizes = [...] strides = [...]" (no kind: from
// "base@").
void print_metadata(std::ostream& os, const char* kind, const void* data, int64_t rank,
                    int64_t offset, const int64_t* sizes, const int64_t* strides) {
  if (kind != nullptr) os << kind << " ";
  os << "base@ = " << std::hex << std::showbase << reinterpret_cast<std::intptr_t>(data) << std::dec
     << std::noshowbase << " rank = " << rank << " offset = " << offset << " sizes = [";
  for (int64_t i = 0; i < rank; ++i) os << (i ? ", " : "") << sizes[i];
  os << "] strides = [";
  for (int64_t i = 0; i < rank; ++i) os << (i ? ", " : "") << strides[i];
  os << "]";
}

template <typename T>
void print_memref_as(const char* kind, int64_t rank, void* descriptor) {
  StridedView<T> v(rank, descriptor);
  std::ostream& os = std::cout;
  print_metadata(os, kind, v.data, v.rank, v.offset, v.sizes, v.strides);
  os << " data = \n";
  if (rank == 0) os << "[";
  print_data(os, v.data, rank, rank, v.offset, v.sizes, v.strides);
  if (rank == 0) os << "]";
  os << std::endl;
}

template <typename T>
void print_memref(int64_t rank, void* descriptor) {
  print_memref_as<T>("Unranked Memref", rank, descriptor);
}

// A descriptor of known rank: {allocated, aligned, offset, sizes[rank], strides[rank]}, the same
// slots as an unranked one's, so the ranked print functions reuse print_memref_as.

// verifyMemRef*: integers must be equal; floats within a relative error (1e-6 for f32, 1e-12 for
// f64), and finite. Up to ten mismatches are listed on stderr.
template <typename T>
bool verified(T actual, T expected) {
  return actual == expected;
}
template <typename F>
bool within_relative_error(F actual, F expected, F epsilon) {
  if (!std::isfinite(actual) || !std::isfinite(expected)) return false;
  return std::abs(actual - expected) <= epsilon * std::abs(expected);
}
template <>
bool verified(float actual, float expected) {
  return within_relative_error(actual, expected, 1e-6f);
}
template <>
bool verified(double actual, double expected) {
  return within_relative_error(actual, expected, 1e-12);
}

template <typename T>
int64_t verify_data(const T* actual, const T* expected, int64_t dim, int64_t offset,
                    const int64_t* sizes, const int64_t* strides, int64_t& printed) {
  constexpr int64_t kPrintLimit = 10;
  if (dim == 0) {
    if (verified(actual[offset], expected[offset])) return 0;
    if (printed++ < kPrintLimit)
      std::cerr << actual[offset] << " != " << expected[offset] << " offset = " << offset << "\n";
    return 1;
  }
  int64_t errors = 0;
  for (int64_t i = 0; i < sizes[0]; ++i)
    errors += verify_data(actual, expected, dim - 1, offset + i * strides[0], sizes + 1,
                          strides + 1, printed);
  return errors;
}

// The number of differing elements, or -1 (both layouts on stderr) when the layouts differ.
template <typename T>
int64_t verify_memref(int64_t rank, void* actual_descriptor, int64_t expected_rank,
                      void* expected_descriptor) {
  StridedView<T> a(rank, actual_descriptor), e(expected_rank, expected_descriptor);
  bool same_layout = a.rank == e.rank && a.offset == e.offset;
  for (int64_t i = 0; same_layout && i < rank; ++i)
    same_layout = a.sizes[i] == e.sizes[i] && a.strides[i] == e.strides[i];
  if (!same_layout && rank > 0) {
    print_metadata(std::cerr, nullptr, a.data, a.rank, a.offset, a.sizes, a.strides);
    print_metadata(std::cerr, nullptr, e.data, e.rank, e.offset, e.sizes, e.strides);
    return -1;
  }
  int64_t printed = 0;
  return verify_data(a.data, e.data, a.rank, a.offset, a.sizes, a.strides, printed);
}

// printMemrefShape*: the header alone.
template <typename T>
void print_memref_shape(int64_t rank, void* descriptor) {
  StridedView<T> v(rank, descriptor);
  print_metadata(std::cout, "Unranked Memref", v.data, v.rank, v.offset, v.sizes, v.strides);
  std::cout << std::endl;
}

}  // namespace

extern "C" {

// Copies between two memrefs of the same shape and element size, any strides.
__attribute__((visibility("default"))) void memrefCopy(int64_t element_size, UnrankedMemRef* src,
                                                       UnrankedMemRef* dst) {
  int64_t rank = src->rank;
  auto* s = static_cast<int64_t*>(src->descriptor);
  auto* d = static_cast<int64_t*>(dst->descriptor);
  char* src_data = reinterpret_cast<char*>(s[1]) + s[2] * element_size;
  char* dst_data = reinterpret_cast<char*>(d[1]) + d[2] * element_size;
  const int64_t* sizes = s + 3;
  const int64_t* src_strides = s + 3 + rank;
  const int64_t* dst_strides = d + 3 + rank;
  int64_t total = 1;
  for (int64_t i = 0; i < rank; ++i) total *= sizes[i];
  if (total == 0) return;
  // Dimensions contiguous in both memrefs merge into one (from the innermost out), so a copy into
  // a padded buffer or a slice is one memcpy per row rather than one per element.
  std::vector<int64_t> size, src_stride, dst_stride;
  for (int64_t i = rank; i-- > 0;) {
    if (sizes[i] == 1) continue;
    if (!size.empty() && src_strides[i] == src_stride.back() * size.back() &&
        dst_strides[i] == dst_stride.back() * size.back()) {
      size.back() *= sizes[i];
      continue;
    }
    size.push_back(sizes[i]);
    src_stride.push_back(src_strides[i]);
    dst_stride.push_back(dst_strides[i]);
  }
  if (size.empty()) {  // one element
    std::memcpy(dst_data, src_data, element_size);
    return;
  }
  // size[0] is now the innermost dimension.
  int64_t row = 1;
  if (src_stride[0] == 1 && dst_stride[0] == 1) {
    row = size[0];
    size[0] = 1;
  }
  int64_t rows = total / row;
  size_t dims = size.size();
  std::vector<int64_t> index(dims, 0);
  int64_t src_off = 0, dst_off = 0;
  for (int64_t n = 0; n < rows; ++n) {
    std::memcpy(dst_data + dst_off * element_size, src_data + src_off * element_size,
                static_cast<size_t>(row * element_size));
    for (size_t i = 0; i < dims; ++i) {
      src_off += src_stride[i];
      dst_off += dst_stride[i];
      if (++index[i] < size[i]) break;
      src_off -= src_stride[i] * size[i];
      dst_off -= dst_stride[i] * size[i];
      index[i] = 0;
    }
  }
}

// The C interface (`_mlir_ciface_printMemrefX`, unranked descriptor) of every type; the plain
// one (`printMemrefX(rank, descriptor)`) for the types MLIR exports it for.
#define KILN_PRINT_MEMREF_CIFACE(suffix, type)                                  \
  __attribute__((visibility("default"))) void _mlir_ciface_printMemref##suffix( \
      UnrankedMemRef* m) {                                                      \
    print_memref<type>(m->rank, m->descriptor);                                 \
  }
#define KILN_PRINT_MEMREF(suffix, type)                                                    \
  KILN_PRINT_MEMREF_CIFACE(suffix, type)                                                   \
  __attribute__((visibility("default"))) void printMemref##suffix(int64_t rank, void* d) { \
    print_memref<type>(rank, d);                                                           \
  }

KILN_PRINT_MEMREF(F32, float)
KILN_PRINT_MEMREF(F64, double)
KILN_PRINT_MEMREF(I32, int32_t)
KILN_PRINT_MEMREF(I64, int64_t)
KILN_PRINT_MEMREF(Ind, int64_t)
KILN_PRINT_MEMREF(C32, std::complex<float>)
KILN_PRINT_MEMREF(C64, std::complex<double>)
KILN_PRINT_MEMREF_CIFACE(I8, int8_t)
KILN_PRINT_MEMREF_CIFACE(I16, int16_t)
KILN_PRINT_MEMREF_CIFACE(F16, Half)
KILN_PRINT_MEMREF_CIFACE(BF16, BFloat16)
#undef KILN_PRINT_MEMREF
#undef KILN_PRINT_MEMREF_CIFACE

#define KILN_PRINT_MEMREF_SHAPE(suffix, type)                                        \
  __attribute__((visibility("default"))) void _mlir_ciface_printMemrefShape##suffix( \
      UnrankedMemRef* m) {                                                           \
    print_memref_shape<type>(m->rank, m->descriptor);                                \
  }
KILN_PRINT_MEMREF_SHAPE(I8, int8_t)
KILN_PRINT_MEMREF_SHAPE(I32, int32_t)
KILN_PRINT_MEMREF_SHAPE(I64, int64_t)
KILN_PRINT_MEMREF_SHAPE(F32, float)
KILN_PRINT_MEMREF_SHAPE(F64, double)
KILN_PRINT_MEMREF_SHAPE(Ind, int64_t)
KILN_PRINT_MEMREF_SHAPE(C32, std::complex<float>)
KILN_PRINT_MEMREF_SHAPE(C64, std::complex<double>)
#undef KILN_PRINT_MEMREF_SHAPE

// Ranked variants: "Memref" instead of "Unranked Memref".
#define KILN_PRINT_RANKED(name, type, rank)                                             \
  __attribute__((visibility("default"))) void _mlir_ciface_printMemref##name(void* d) { \
    print_memref_as<type>("Memref", rank, d);                                           \
  }
KILN_PRINT_RANKED(0dF32, float, 0)
KILN_PRINT_RANKED(1dF32, float, 1)
KILN_PRINT_RANKED(2dF32, float, 2)
KILN_PRINT_RANKED(3dF32, float, 3)
KILN_PRINT_RANKED(4dF32, float, 4)
KILN_PRINT_RANKED(1dI8, int8_t, 1)
KILN_PRINT_RANKED(1dI32, int32_t, 1)
KILN_PRINT_RANKED(1dI64, int64_t, 1)
KILN_PRINT_RANKED(1dF64, double, 1)
KILN_PRINT_RANKED(1dInd, int64_t, 1)
KILN_PRINT_RANKED(1dC32, std::complex<float>, 1)
KILN_PRINT_RANKED(1dC64, std::complex<double>, 1)
KILN_PRINT_RANKED(Vector4x4xf32, Vector4x4F32, 2)
#undef KILN_PRINT_RANKED

// Random numbers, shuffles and sorts for test programs, with the C++ library's generator and
// algorithms, so a seed gives the sequence it gives under mlir-runner.
__attribute__((visibility("default"))) void* rtsrand(uint64_t seed) {
  return new std::mt19937(static_cast<std::mt19937::result_type>(seed));
}
__attribute__((visibility("default"))) uint64_t rtrand(void* generator, uint64_t m) {
  std::uniform_int_distribution<uint64_t> distribution(0, m);
  return distribution(*static_cast<std::mt19937*>(generator));
}
__attribute__((visibility("default"))) void rtdrand(void* generator) {
  delete static_cast<std::mt19937*>(generator);
}
// The memref becomes a random permutation of 0 .. size-1.
__attribute__((visibility("default"))) void _mlir_ciface_shuffle(MemRef1D<uint64_t>* m,
                                                                 void* generator) {
  std::iota(m->begin(), m->begin() + m->size, uint64_t{0});
  std::shuffle(m->begin(), m->begin() + m->size, *static_cast<std::mt19937*>(generator));
}
__attribute__((visibility("default"))) void _mlir_ciface_stdSortI64(uint64_t n,
                                                                    MemRef1D<int64_t>* v) {
  sort_prefix(n, v);
}
__attribute__((visibility("default"))) void _mlir_ciface_stdSortF64(uint64_t n,
                                                                    MemRef1D<double>* v) {
  sort_prefix(n, v);
}
__attribute__((visibility("default"))) void _mlir_ciface_stdSortF32(uint64_t n,
                                                                    MemRef1D<float>* v) {
  sort_prefix(n, v);
}

// Allocation entry points of MLIR's C runner utilities.
__attribute__((visibility("default"))) void* mlirAlloc(uint64_t size) { return std::malloc(size); }
__attribute__((visibility("default"))) void* mlirAlignedAlloc(uint64_t alignment, uint64_t size) {
  return std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
}
__attribute__((visibility("default"))) void mlirFree(void* p) { std::free(p); }
__attribute__((visibility("default"))) void mlirAlignedFree(void* p) { std::free(p); }

#define KILN_VERIFY_MEMREF(suffix, type)                                                        \
  __attribute__((visibility("default")))                                                        \
  int64_t _mlir_ciface_verifyMemRef##suffix(UnrankedMemRef* actual, UnrankedMemRef* expected) { \
    return verify_memref<type>(actual->rank, actual->descriptor, expected->rank,                \
                               expected->descriptor);                                           \
  }
KILN_VERIFY_MEMREF(I8, int8_t)
KILN_VERIFY_MEMREF(I16, int16_t)
KILN_VERIFY_MEMREF(I32, int32_t)
KILN_VERIFY_MEMREF(I64, int64_t)
KILN_VERIFY_MEMREF(F16, Half)
KILN_VERIFY_MEMREF(BF16, BFloat16)
KILN_VERIFY_MEMREF(F32, float)
KILN_VERIFY_MEMREF(F64, double)
KILN_VERIFY_MEMREF(Ind, int64_t)
KILN_VERIFY_MEMREF(C32, std::complex<float>)
KILN_VERIFY_MEMREF(C64, std::complex<double>)
#undef KILN_VERIFY_MEMREF

// The plain interface: both memrefs of `rank`.
#define KILN_VERIFY_MEMREF_PLAIN(suffix, type)                               \
  __attribute__((visibility("default")))                                     \
  int64_t verifyMemRef##suffix(int64_t rank, void* actual, void* expected) { \
    return verify_memref<type>(rank, actual, rank, expected);                \
  }
KILN_VERIFY_MEMREF_PLAIN(I32, int32_t)
KILN_VERIFY_MEMREF_PLAIN(F32, float)
KILN_VERIFY_MEMREF_PLAIN(F64, double)
KILN_VERIFY_MEMREF_PLAIN(Ind, int64_t)
KILN_VERIFY_MEMREF_PLAIN(C32, std::complex<float>)
KILN_VERIFY_MEMREF_PLAIN(C64, std::complex<double>)
#undef KILN_VERIFY_MEMREF_PLAIN

__attribute__((visibility("default"))) int64_t _mlir_ciface_nanoTime() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

__attribute__((visibility("default"))) void printF32(float f) {
  if (std::isnan(f) && std::signbit(f))
    std::fputs("-nan", stdout);
  else
    std::fprintf(stdout, "%g", f);
}
__attribute__((visibility("default"))) void printF64(double d) {
  if (std::isnan(d) && std::signbit(d))
    std::fputs("-nan", stdout);
  else
    std::fprintf(stdout, "%lg", d);
}
__attribute__((visibility("default"))) void printI64(int64_t i) {
  std::fprintf(stdout, "%" PRId64, i);
}
__attribute__((visibility("default"))) void printU64(uint64_t u) {
  std::fprintf(stdout, "%" PRIu64, u);
}
__attribute__((visibility("default"))) void printString(const char* s) { std::fputs(s, stdout); }
__attribute__((visibility("default"))) void printOpen() { std::fputs("( ", stdout); }
__attribute__((visibility("default"))) void printClose() { std::fputs(" )", stdout); }
__attribute__((visibility("default"))) void printComma() { std::fputs(", ", stdout); }
__attribute__((visibility("default"))) void printNewline() { std::fputc('\n', stdout); }
__attribute__((visibility("default"))) double rtclock() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
__attribute__((visibility("default"))) void printFlops(double flops) {
  std::fprintf(stderr, "%lf GFLOPS\n", flops / 1.0e9);
}

}  // extern "C"
