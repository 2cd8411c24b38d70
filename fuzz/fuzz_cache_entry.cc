// The cache entry decoder (every disk and remote hit): a damaged or foreign entry is an error,
// and an accepted one names the key it was read under.
#include <cstdlib>
#include <string>

#include "fuzz_support.h"
#include "kiln/cache.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kiln::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto [key, bytes] = kiln::fuzz::split_key(kiln::fuzz::as_view(data, size));
  auto metadata = kiln::decode_cache_entry_metadata(bytes, key);
  auto entry = kiln::decode_cache_entry(bytes, key);
  // A full decode checks more than the header, never less.
  if (entry.ok() && !metadata.ok()) std::abort();
  if (entry.ok() && entry->payload.size() != entry->metadata.uncompressed_size) std::abort();
  return 0;
}
