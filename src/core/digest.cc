#include "core/digest.h"

#include <nettle/hmac.h>
#include <nettle/sha2.h>
#include <xxhash.h>
#include <zstd.h>

#include <cstdint>

namespace kiln {

// nettle rather than OpenSSL: OpenSSL 3's provider set-up and its library's relocations cost
// milliseconds in every fresh process, and the cache-hit path hashes in every process.
Sha256::Sha256() {
  auto* ctx = new sha256_ctx;
  sha256_init(ctx);
  context_ = ctx;
}

Sha256::~Sha256() { delete static_cast<sha256_ctx*>(context_); }

void Sha256::update(std::string_view bytes) {
  sha256_update(static_cast<sha256_ctx*>(context_), bytes.size(),
                reinterpret_cast<const uint8_t*>(bytes.data()));
}

void Sha256::update_framed(std::string_view bytes) {
  uint64_t size = bytes.size();
  uint8_t prefix[8];
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<uint8_t>(size >> (8 * i));
  sha256_update(static_cast<sha256_ctx*>(context_), sizeof(prefix), prefix);
  update(bytes);
}

std::string Sha256::hex() {
  uint8_t digest[SHA256_DIGEST_SIZE];
  sha256_digest(static_cast<sha256_ctx*>(context_), SHA256_DIGEST_SIZE, digest);
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (uint8_t byte : digest) {
    out += kHex[byte >> 4];
    out += kHex[byte & 15];
  }
  return out;
}

std::string sha256_hex(std::string_view bytes) {
  Sha256 h;
  h.update(bytes);
  return h.hex();
}

uint64_t xxh3_64(std::string_view bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

std::string zstd_compress(std::string_view bytes, int level) {
  std::string out(ZSTD_compressBound(bytes.size()), '\0');
  size_t n = ZSTD_compress(out.data(), out.size(), bytes.data(), bytes.size(), level);
  out.resize(ZSTD_isError(n) ? 0 : n);
  return out;
}

std::string hmac_tag(const std::string& secret, std::string_view key, std::string_view value) {
  hmac_sha256_ctx ctx;
  hmac_sha256_set_key(&ctx, secret.size(), reinterpret_cast<const uint8_t*>(secret.data()));
  auto update_framed = [&](std::string_view bytes) {
    uint8_t size[8];
    for (int i = 0; i < 8; ++i) size[i] = static_cast<uint8_t>(uint64_t(bytes.size()) >> (8 * i));
    hmac_sha256_update(&ctx, sizeof(size), size);
    hmac_sha256_update(&ctx, bytes.size(), reinterpret_cast<const uint8_t*>(bytes.data()));
  };
  update_framed(key);
  update_framed(value);
  std::string tag(kHmacTagSize, '\0');
  hmac_sha256_digest(&ctx, kHmacTagSize, reinterpret_cast<uint8_t*>(tag.data()));
  return tag;
}

bool same_tag(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

Result<std::string> zstd_decompress(std::string_view bytes, size_t max_size) {
  unsigned long long size = ZSTD_getFrameContentSize(bytes.data(), bytes.size());
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN)
    return corruption("compressed payload has no valid zstd frame header");
  // The declared size is checked before anything is allocated: a few bytes must not make kiln
  // reserve gigabytes. Real payloads (native code) compress far less than this ratio.
  constexpr unsigned long long kMaxRatio = 8192, kAlwaysAllowed = 64ull << 20;
  unsigned long long plausible = bytes.size() * kMaxRatio + kAlwaysAllowed;
  if (size > max_size || size > plausible)
    return corruption("compressed payload declares " + std::to_string(size) +
                      " bytes, more than its " + std::to_string(bytes.size()) +
                      " compressed bytes can hold");
  std::string out(size, '\0');
  size_t n = ZSTD_decompress(out.data(), out.size(), bytes.data(), bytes.size());
  if (ZSTD_isError(n) || n != size)
    return corruption(std::string("compressed payload is damaged: ") + ZSTD_getErrorName(n));
  return out;
}

}  // namespace kiln
