// NumPy .npy files in and out (format versions 1–3, little-endian, C order).
#pragma once

#include <string>

#include "kiln/buffer.h"
#include "kiln/export.h"
#include "kiln/status.h"

namespace kiln {

KILN_EXPORT Result<Buffer> read_npy(const std::string& path);
KILN_EXPORT Result<Buffer> parse_npy(const std::string& bytes, const std::string& name_for_errors);
KILN_EXPORT Status write_npy(const std::string& path, const Buffer& buffer);
KILN_EXPORT std::string encode_npy(const Buffer& buffer);

}  // namespace kiln
