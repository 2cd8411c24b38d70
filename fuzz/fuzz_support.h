// Shared by the fuzz targets: quiet logs, and inputs that carry a key before their bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "kiln/config.h"

namespace kiln::fuzz {

// Warnings about damaged inputs are the expected outcome here; only crashes matter.
inline void quiet_logs() { (void)config::set("KILN_LOG_LEVEL", "error"); }

inline std::string_view as_view(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// "KEY\nBYTES": the key an entry is read under, then the entry (seeds are written this way).
inline std::pair<std::string_view, std::string_view> split_key(std::string_view input) {
  size_t newline = input.find('\n');
  if (newline == std::string_view::npos) return {"", input};
  return {input.substr(0, newline), input.substr(newline + 1)};
}

// Overwrites 8 bytes at `offset` with `value`, little-endian. Mutants of checksummed formats are
// re-checksummed this way too, so the parsers behind the checksum see them (blind mutation
// almost never keeps a checksum valid).
inline void put_u64(std::string& bytes, size_t offset, uint64_t value) {
  for (int i = 0; i < 8; ++i) bytes[offset + i] = static_cast<char>(value >> (8 * i));
}

}  // namespace kiln::fuzz
