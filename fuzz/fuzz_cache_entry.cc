// The cache entry decoder (every disk and remote hit): a damaged or foreign entry is an error,
// and an accepted one names the key it was read under.
#include <cstdlib>
#include <string>

#include "core/digest.h"
#include "fuzz_support.h"
#include "kiln/cache.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kiln::fuzz::quiet_logs();
  return 0;
}

namespace {

void decode(std::string_view bytes, std::string_view key) {
  auto metadata = kiln::decode_cache_entry_metadata(bytes, key);
  auto entry = kiln::decode_cache_entry(bytes, key);
  // A full decode checks more than the header, never less.
  if (entry.ok() && !metadata.ok()) std::abort();
  if (entry.ok() && entry->payload.size() != entry->metadata.uncompressed_size) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto [key, bytes] = kiln::fuzz::split_key(kiln::fuzz::as_view(data, size));
  decode(bytes, key);
  // Again with the checksum (header bytes 40..47, over the header with it zeroed and the rest)
  // made valid.
  constexpr size_t kHeaderSize = 48, kChecksumAt = 40;
  if (bytes.size() >= kHeaderSize) {
    std::string fixed(bytes);
    kiln::fuzz::put_u64(fixed, kChecksumAt, 0);
    kiln::fuzz::put_u64(fixed, kChecksumAt, kiln::xxh3_64(fixed));
    decode(fixed, key);
  }
  return 0;
}
