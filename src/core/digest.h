// Hashing and compression helpers for the cache (SHA-256 from nettle, XXH3, zstd).
#pragma once

#include <string>
#include <string_view>

#include "kiln/status.h"

namespace kiln {

// Incremental SHA-256; hex() finishes it.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(std::string_view bytes);
  // Length-prefixed, so ("ab","c") and ("a","bc") differ.
  void update_framed(std::string_view bytes);
  std::string hex();

 private:
  void* context_;
};

std::string sha256_hex(std::string_view bytes);
uint64_t xxh3_64(std::string_view bytes);

// HMAC-SHA256 over the framed key and value (sizes included, so no two pairs share a tag).
inline constexpr size_t kHmacTagSize = 32;
std::string hmac_tag(const std::string& secret, std::string_view key, std::string_view value);
// Constant time, so a forger learns nothing from timing.
bool same_tag(std::string_view a, std::string_view b);

std::string zstd_compress(std::string_view bytes, int level = 3);
// Fails with kCorruption when the frame is damaged or larger than `max_size`.
Result<std::string> zstd_decompress(std::string_view bytes, size_t max_size);

}  // namespace kiln
