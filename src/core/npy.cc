#include "kiln/npy.h"

#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

namespace kiln {
namespace {

const char kNpyMagic[] = "\x93NUMPY";

const char* npy_descr(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "<f4";
    case DType::kF64:
      return "<f8";
    case DType::kI1:
      return "|b1";
    case DType::kI8:
      return "|i1";
    case DType::kI16:
      return "<i2";
    case DType::kI32:
      return "<i4";
    case DType::kI64:
      return "<i8";
  }
  return "";
}

Result<DType> dtype_from_descr(const std::string& descr, const std::string& name) {
  for (DType d :
       {DType::kF32, DType::kF64, DType::kI1, DType::kI8, DType::kI16, DType::kI32, DType::kI64}) {
    std::string mine = npy_descr(d);
    // NumPy writes one-byte types with '|' but accepts '<' too.
    if (descr == mine || (mine[0] == '|' && descr == "<" + mine.substr(1))) return d;
  }
  return invalid_argument(name + ": NumPy dtype '" + descr +
                          "' is not supported; use float32, float64, bool, int8, int16, int32 or "
                          "int64 (little-endian)");
}

}  // namespace

Result<Buffer> parse_npy(const std::string& bytes, const std::string& name) {
  if (bytes.size() < 10 || std::memcmp(bytes.data(), kNpyMagic, 6) != 0)
    return invalid_argument(name + ": not a NumPy .npy file (bad magic)");
  int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len = 0, header_start = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return invalid_argument(name + ": truncated .npy header");
    uint32_t len = 0;
    std::memcpy(&len, bytes.data() + 8, 4);
    header_len = len;
    header_start = 12;
  } else {
    return invalid_argument(name + ": unsupported .npy format version " + std::to_string(major));
  }
  if (bytes.size() < header_start + header_len)
    return invalid_argument(name + ": truncated .npy header");
  std::string header = bytes.substr(header_start, header_len);
  std::smatch m;
  if (!std::regex_search(header, m, std::regex("'descr'\\s*:\\s*'([^']*)'")))
    return invalid_argument(name + ": .npy header has no 'descr'");
  KILN_ASSIGN_OR_RETURN(DType dtype, dtype_from_descr(m[1].str(), name));
  if (std::regex_search(header, m, std::regex("'fortran_order'\\s*:\\s*True")))
    return invalid_argument(name +
                            ": Fortran-order arrays are not supported; save with "
                            "np.ascontiguousarray");
  if (!std::regex_search(header, m, std::regex("'shape'\\s*:\\s*\\(([^)]*)\\)")))
    return invalid_argument(name + ": .npy header has no 'shape'");
  std::vector<int64_t> shape;
  std::stringstream dims(m[1].str());
  std::string dim;
  while (std::getline(dims, dim, ',')) {
    size_t first = dim.find_first_not_of(" \t");
    if (first == std::string::npos) continue;
    try {
      shape.push_back(std::stoll(dim.substr(first)));
    } catch (const std::exception&) {
      return invalid_argument(name + ": bad dimension '" + dim + "' in .npy shape");
    }
  }
  Buffer buffer(dtype, shape);
  size_t data_start = header_start + header_len;
  if (bytes.size() - data_start != buffer.byte_size()) {
    return invalid_argument(name + ": .npy data holds " +
                            std::to_string(bytes.size() - data_start) + " bytes, shape " +
                            shape_to_string(shape) + " of " + dtype_name(dtype) + " needs " +
                            std::to_string(buffer.byte_size()));
  }
  std::memcpy(buffer.data(), bytes.data() + data_start, buffer.byte_size());
  return buffer;
}

Result<Buffer> read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return invalid_argument("cannot open input " + path + ": " + std::strerror(errno));
  std::stringstream bytes;
  bytes << in.rdbuf();
  return parse_npy(bytes.str(), path);
}

std::string encode_npy(const Buffer& buffer) {
  std::string shape = "(";
  for (size_t i = 0; i < buffer.shape().size(); ++i)
    shape += std::to_string(buffer.shape()[i]) + (buffer.shape().size() == 1      ? ","
                                                  : i + 1 < buffer.shape().size() ? ", "
                                                                                  : "");
  shape += ")";
  std::string header = std::string("{'descr': '") + npy_descr(buffer.dtype()) +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad so the data starts on a 64-byte boundary, as NumPy does; the header ends with '\n'.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out(kNpyMagic, 6);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>((header.size() >> 8) & 0xff);
  out += header;
  out.append(static_cast<const char*>(buffer.data()), buffer.byte_size());
  return out;
}

Status write_npy(const std::string& path, const Buffer& buffer) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  std::string bytes = encode_npy(buffer);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) return io_error("cannot write " + path + ": " + std::strerror(errno));
  return Status();
}

}  // namespace kiln
