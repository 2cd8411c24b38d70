// Shared by the fuzz targets: quiet logs, and inputs that carry a key before their bytes.
#pragma once

#include <cstddef>
#include <cstdint>
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

}  // namespace kiln::fuzz
