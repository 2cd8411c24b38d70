// Maintenance of a CompilationCache's local directory: what `kiln cache stats | ls | verify |
// clear | gc | export | import` do, as methods of the cache object an application holds.
#include <algorithm>

#include "cache/alias_record.h"
#include "kiln/cache.h"
#include "kiln/compilation_cache.h"

namespace kiln {
namespace {

Result<DirectoryStore*> directory_of(const CompilationCache& cache) {
  if (cache.local_store() == nullptr)
    return invalid_argument(
        "the compilation cache is disabled: there is no cache directory to maintain (enable it "
        "with KILN_ENABLE_COMPILATION_CACHE=true)");
  return cache.local_store();
}

}  // namespace

Result<CacheDirectoryStats> CompilationCache::directory_stats() const {
  KILN_ASSIGN_OR_RETURN(DirectoryStore * store, directory_of(*this));
  KILN_ASSIGN_OR_RETURN(CacheStats ledger, store->stats());
  CacheDirectoryStats stats;
  stats.directory = store->directory();
  stats.bytes = ledger.bytes;
  stats.counters = ledger.counters;
  // Counters a fresh directory has not written yet still show, as 0.
  for (const char* name : {"writes", "corrupt", "evictions", "read_errors", "write_errors"})
    stats.counters.emplace(name, 0);
  // Listing the directory is fine here, off the hot path.
  if (auto keys = store->keys(); keys.ok())
    for (const std::string& key : *keys)
      stats.alias_records += AliasRecord::is_alias_key(key) ? 1 : 0;
  stats.executables = std::max<int64_t>(0, ledger.entries - stats.alias_records);
  return stats;
}

Result<std::vector<CacheEntrySummary>> CompilationCache::list_entries() const {
  KILN_ASSIGN_OR_RETURN(DirectoryStore * store, directory_of(*this));
  KILN_ASSIGN_OR_RETURN(std::vector<std::string> keys, store->keys());
  std::vector<CacheEntrySummary> entries;
  for (const std::string& key : keys) {
    if (AliasRecord::is_alias_key(key)) continue;
    auto bytes = store->get(key);
    if (!bytes.ok() || !bytes->has_value()) continue;  // evicted meanwhile
    CacheEntrySummary entry;
    entry.key = key;
    entry.bytes = (*bytes)->size();
    auto metadata = decode_cache_entry_metadata(**bytes, key);
    if (metadata.ok())
      entry.metadata = std::move(metadata).value();
    else
      entry.problem = metadata.status();
    entries.push_back(std::move(entry));
  }
  return entries;
}

Result<CacheVerification> CompilationCache::verify(bool load) {
  KILN_ASSIGN_OR_RETURN(DirectoryStore * store, directory_of(*this));
  KILN_ASSIGN_OR_RETURN(std::vector<std::string> keys, store->keys());
  CacheVerification result;
  for (const std::string& key : keys) {
    if (AliasRecord::is_alias_key(key)) continue;
    auto bytes = store->get(key);
    if (!bytes.ok() || !bytes->has_value()) continue;
    ++result.verified;
    auto entry = decode_cache_entry(**bytes, key);
    // Checking never executes the code; only `load` maps it in (running its constructors).
    Status status = !entry.ok() ? entry.status()
                    : load      ? Executable::deserialize(entry->payload).status()
                                : Executable::check_serialized(entry->payload);
    if (status.ok()) continue;
    result.removed.emplace_back(key, status.message());
    store->count(StoreCounter::kCorrupt);
    (void)store->remove(key);
  }
  return result;
}

Status CompilationCache::clear() {
  KILN_ASSIGN_OR_RETURN(DirectoryStore * store, directory_of(*this));
  return store->clear();
}

Status CompilationCache::evict(int64_t max_size_bytes, int64_t max_entries,
                               int64_t unused_since_micros) {
  KILN_ASSIGN_OR_RETURN(DirectoryStore * store, directory_of(*this));
  return store->evict_to(max_size_bytes, max_entries, unused_since_micros);
}

Result<std::string> CompilationCache::export_bundle() const {
  KILN_ASSIGN_OR_RETURN(DirectoryStore * store, directory_of(*this));
  return export_cache_bundle(*store, options().remote_secret);
}

Result<BundleImport> CompilationCache::import_bundle(std::string_view bundle) {
  KILN_ASSIGN_OR_RETURN(DirectoryStore * store, directory_of(*this));
  return import_cache_bundle(*store, bundle, options().remote_secret);
}

}  // namespace kiln
