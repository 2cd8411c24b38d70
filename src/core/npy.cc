#include "kiln/npy.h"

#include <cctype>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>

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

// The header is a Python dict literal with exactly the keys 'descr', 'fortran_order' and
// 'shape', as NumPy writes it; anything else is refused, never guessed at.
class NpyHeaderParser {
 public:
  NpyHeaderParser(std::string_view text, const std::string& name) : text_(text), name_(name) {}

  Status parse(std::string& descr, bool& fortran_order, std::vector<int64_t>& shape) {
    bool seen_descr = false, seen_order = false, seen_shape = false;
    skip_space();
    if (!take('{')) return error("does not start with '{'");
    for (;;) {
      skip_space();
      if (take('}')) break;
      std::string key;
      KILN_RETURN_IF_ERROR(parse_string(key));
      skip_space();
      if (!take(':')) return error("expects ':' after '" + key + "'");
      skip_space();
      if (key == "descr" && !seen_descr) {
        seen_descr = true;
        KILN_RETURN_IF_ERROR(parse_string(descr));
      } else if (key == "fortran_order" && !seen_order) {
        seen_order = true;
        if (take_word("True")) {
          fortran_order = true;
        } else if (take_word("False")) {
          fortran_order = false;
        } else {
          return error("'fortran_order' must be True or False");
        }
      } else if (key == "shape" && !seen_shape) {
        seen_shape = true;
        KILN_RETURN_IF_ERROR(parse_shape(shape));
      } else {
        return error("has an unexpected or repeated key '" + key + "'");
      }
      skip_space();
      if (take(',')) continue;
      skip_space();
      if (take('}')) break;
      return error("expects ',' or '}' at byte " + std::to_string(at_));
    }
    skip_space();  // NumPy pads with spaces and ends with '\n'
    if (at_ != text_.size()) return error("has bytes after its closing '}'");
    if (!seen_descr || !seen_order || !seen_shape)
      return error("needs 'descr', 'fortran_order' and 'shape'");
    return Status();
  }

 private:
  Status error(const std::string& what) const {
    return invalid_argument(name_ + ": malformed .npy header: it " + what);
  }
  void skip_space() {
    while (at_ < text_.size() && (text_[at_] == ' ' || text_[at_] == '\n' || text_[at_] == '\t'))
      ++at_;
  }
  bool take(char c) {
    if (at_ < text_.size() && text_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }
  bool take_word(std::string_view word) {
    if (text_.substr(at_, word.size()) != word) return false;
    at_ += word.size();
    return true;
  }
  Status parse_string(std::string& out) {
    if (at_ >= text_.size() || (text_[at_] != '\'' && text_[at_] != '"'))
      return error("expects a quoted string at byte " + std::to_string(at_));
    char quote = text_[at_++];
    size_t end = text_.find(quote, at_);
    if (end == std::string_view::npos || end - at_ > 64) return error("has an unterminated string");
    out.assign(text_.substr(at_, end - at_));
    if (out.find('\\') != std::string::npos) return error("has an escape in a string");
    at_ = end + 1;
    return Status();
  }
  // "()", "(7,)", "(2, 3)" or "(2, 3,)"; dimensions are decimal, at most 32 of them.
  Status parse_shape(std::vector<int64_t>& shape) {
    if (!take('(')) return error("expects a tuple for 'shape'");
    bool trailing_comma = false;
    for (;;) {
      skip_space();
      if (take(')')) break;
      if (at_ >= text_.size() || !std::isdigit(static_cast<unsigned char>(text_[at_])))
        return error("has a dimension that is not a non-negative integer");
      uint64_t dim = 0;
      while (at_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[at_]))) {
        dim = dim * 10 + static_cast<uint64_t>(text_[at_++] - '0');
        if (dim > (uint64_t{1} << 48)) return error("has a dimension too large to be real");
      }
      if (shape.size() == 32) return error("has more than 32 dimensions");
      shape.push_back(static_cast<int64_t>(dim));
      skip_space();
      trailing_comma = take(',');
      if (!trailing_comma) {
        skip_space();
        if (!take(')')) return error("expects ',' or ')' in 'shape'");
        break;
      }
    }
    // Python's one-element tuple needs its comma: "(7)" is the integer 7.
    if (shape.size() == 1 && !trailing_comma) return error("writes a 1-tuple without its comma");
    return Status();
  }

  std::string_view text_;
  const std::string& name_;
  size_t at_ = 0;
};

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
  if (bytes.size() - header_start < header_len)
    return invalid_argument(name + ": truncated .npy header");
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
  NpyHeaderParser parser(std::string_view(bytes).substr(header_start, header_len), name);
  KILN_RETURN_IF_ERROR(parser.parse(descr, fortran_order, shape));
  KILN_ASSIGN_OR_RETURN(DType dtype, dtype_from_descr(descr, name));
  if (fortran_order && shape.size() > 1)
    return invalid_argument(name +
                            ": Fortran-order arrays are not supported; save with "
                            "np.ascontiguousarray");
  // The size the shape declares must be what the file holds, checked before allocating.
  size_t data_bytes = bytes.size() - header_start - header_len;
  Result<size_t> needed = dense_byte_size(dtype, shape);
  if (!needed.ok()) return invalid_argument(name + ": " + needed.status().message());
  if (*needed != data_bytes) {
    return invalid_argument(name + ": .npy data holds " + std::to_string(data_bytes) +
                            " bytes, shape " + shape_to_string(shape) + " of " + dtype_name(dtype) +
                            " needs " + std::to_string(*needed));
  }
  Result<Buffer> allocated = Buffer::allocate(dtype, shape);
  if (!allocated.ok())
    return Status(allocated.status().code(), name + ": " + allocated.status().message());
  Buffer buffer = std::move(*allocated);
  std::memcpy(buffer.data(), bytes.data() + header_start + header_len, buffer.byte_size());
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
