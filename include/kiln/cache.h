// The persistent compilation cache: keys, the entry format and the stores.
//
// Entry = 48-byte header (magic, format version, compression, compile time in ms, sizes, XXH3
// checksum over the whole entry with the checksum field zeroed) + JSON metadata (naming the entry's
// own key) + zstd payload.
// A damaged entry never decodes: it is reported as kCorruption and treated as a miss.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/env.h"
#include "kiln/export.h"
#include "kiln/status.h"

namespace kiln {

// One key component: its name ("module", "options", ...), a readable description and its digest.
struct KILN_EXPORT KeyComponent {
  std::string name;
  std::string description;
  std::string digest;
};

struct KILN_EXPORT CacheKey {
  std::string key;  // "<sanitised module name>-<sha256 hex>"
  std::string module_name;
  std::vector<KeyComponent> components;
};

struct KILN_EXPORT CacheEntryMetadata {
  std::string key;  // the full key the entry was written for; a read under any other is corrupt
  std::string module_name;
  std::string producer_version;  // kiln version that wrote it
  int64_t compile_time_ms = 0;
  int64_t created_micros = 0;
  uint64_t uncompressed_size = 0;
  std::vector<KeyComponent> components;
};

KILN_EXPORT std::string encode_cache_entry(const CacheEntryMetadata& metadata,
                                           std::string_view payload);
struct KILN_EXPORT DecodedCacheEntry {
  CacheEntryMetadata metadata;
  std::string payload;  // decompressed
};
// `key` is the key the bytes were read under: an entry written for another key is kCorruption.
KILN_EXPORT Result<DecodedCacheEntry> decode_cache_entry(std::string_view bytes,
                                                         std::string_view key);
// Header and metadata only (for `kiln cache ls` / `explain`), without decompressing.
KILN_EXPORT Result<CacheEntryMetadata> decode_cache_entry_metadata(std::string_view bytes,
                                                                   std::string_view key);

// Counters with stable names, kept by the store across processes.
struct KILN_EXPORT CacheStats {
  std::map<std::string, int64_t> counters;  // writes, corrupt, evictions, ...
  int64_t entries = 0;                      // every file, raw-bytes alias records included
  int64_t bytes = 0;
  int64_t alias_records = 0;  // of `entries`: they never count against the entry bound
};

// The counters kiln keeps in a store (CacheStats::counters), under their stable names: "writes",
// "write_errors", "read_errors", "corrupt" (entries found damaged and removed), "untrusted"
// (entries another user owns or may write, removed), "evictions".
enum class StoreCounter { kWrites, kWriteErrors, kReadErrors, kCorrupt, kUntrusted, kEvictions };
KILN_EXPORT const char* to_string(StoreCounter counter);

class KILN_EXPORT CacheStore {
 public:
  virtual ~CacheStore() = default;
  // nullopt when absent. Records a use of the entry (for LRU).
  virtual Result<std::optional<std::string>> get(const std::string& key) = 0;
  // First writer wins: an existing entry is left in place and OK is returned.
  virtual Status put(const std::string& key, std::string_view value) = 0;
  virtual Status remove(const std::string& key) = 0;
  virtual Result<std::vector<std::string>> keys() = 0;
  virtual void count(const std::string& counter, int64_t delta = 1) = 0;
  void count(StoreCounter counter, int64_t delta = 1) {
    count(std::string(to_string(counter)), delta);
  }
  virtual Result<CacheStats> stats() = 0;
  virtual std::string describe() const = 0;
};

struct KILN_EXPORT DirectoryStoreOptions {
  std::string directory;
  int64_t max_size_bytes = -1;  // -1 unbounded; 0 stores nothing
  int64_t max_entries = -1;     // -1 unbounded
  Env* env = nullptr;           // nullptr = Env::posix()
  // Accept a directory and entries other users own or may write (a deliberately shared team
  // cache; KILN_CACHE_TRUST_SHARED_DIR). Otherwise open refuses such a directory, and get treats
  // such an entry as absent and removes it.
  bool trust_shared_directory = false;
};

// Entries are files under DIR/entries, published atomically (temp file, fsync, hard link: the
// first writer wins, readers never see a partial entry). A small ledger (DIR/ledger.json, updated
// under DIR/lock) keeps the totals and counters, so get and put never scan the directory; only
// eviction, when a bound is crossed, lists the entries and drops the least recently used (last use
// is recorded in each entry's mtime, set by kiln, not the filesystem's atime, and only when a bound
// is set: without one a read writes nothing) until the bounds hold again, keeping as many of the
// most recently used as fit (JAX's LRUCache). Raw-bytes alias records do not count against the
// entry bound.
class KILN_EXPORT DirectoryStore : public CacheStore {
 public:
  static Result<std::unique_ptr<DirectoryStore>> open(const DirectoryStoreOptions& options);

  Result<std::optional<std::string>> get(const std::string& key) override;
  Status put(const std::string& key, std::string_view value) override;
  Status remove(const std::string& key) override;
  Result<std::vector<std::string>> keys() override;
  using CacheStore::count;
  void count(const std::string& counter, int64_t delta = 1) override;
  Result<CacheStats> stats() override;
  std::string describe() const override { return "directory " + options_.directory; }

  // Recounts entries and bytes from the directory (after crashes or manual deletion).
  Status rebuild_ledger();
  // Evicts least recently used entries until both bounds hold (`gc` with explicit limits).
  Status evict_to(int64_t max_bytes, int64_t max_entries, int64_t older_than_micros = -1);
  Status clear();
  const std::string& directory() const { return options_.directory; }
  std::string entry_path(const std::string& key) const;

 private:
  explicit DirectoryStore(DirectoryStoreOptions options) : options_(std::move(options)) {}
  Status update_ledger(const std::function<void(CacheStats&)>& change);
  Result<CacheStats> read_ledger();
  Status write_ledger(const CacheStats& stats);
  // Lists the entries, recounts `stats`, and removes the least recently used until the goals hold
  // (-1: no goal) and every entry older than `older_than_micros` (-1: none) is gone.
  Status evict_locked(CacheStats& stats, int64_t byte_goal, int64_t entry_goal,
                      int64_t older_than_micros);

  DirectoryStoreOptions options_;
};

class KeyValueStore;

// The remote tier: entries in a key-value store (Redis) under "kiln:cache:<key>". With a secret,
// every value carries an HMAC-SHA256 over key and bytes; a value whose tag does not verify
// (tampered, another secret, or written without one) is rejected with kCorruption, never returned.
class KILN_EXPORT RemoteCacheStore : public CacheStore {
 public:
  RemoteCacheStore(std::unique_ptr<KeyValueStore> kv, std::string secret, std::string description);
  ~RemoteCacheStore() override;
  Result<std::optional<std::string>> get(const std::string& key) override;
  Status put(const std::string& key, std::string_view value) override;
  Status remove(const std::string& key) override;
  Result<std::vector<std::string>> keys() override;
  using CacheStore::count;
  void count(const std::string&, int64_t) override {}
  Result<CacheStats> stats() override { return CacheStats{}; }
  std::string describe() const override { return description_; }

 private:
  std::unique_ptr<KeyValueStore> kv_;
  std::string secret_;
  std::string description_;
};

// Local first, then remote (a remote hit is copied into the local store); writes go to both unless
// the remote is read-only. The remote fails open: its errors and timeouts are warnings and counts
// (remote_errors, remote_timeouts, remote_rejected), and after 3 failures in a row it is skipped
// for 30 s. Counters and maintenance commands use the local store.
class KILN_EXPORT TieredCacheStore : public CacheStore {
 public:
  TieredCacheStore(CacheStore* local, std::unique_ptr<CacheStore> remote, bool remote_read_only,
                   Env* env);
  Result<std::optional<std::string>> get(const std::string& key) override;
  Status put(const std::string& key, std::string_view value) override;
  Status remove(const std::string& key) override;
  Result<std::vector<std::string>> keys() override { return local_->keys(); }
  using CacheStore::count;
  void count(const std::string& counter, int64_t delta = 1) override {
    local_->count(counter, delta);
  }
  Result<CacheStats> stats() override { return local_->stats(); }
  std::string describe() const override;
  // remote_hits, remote_misses, remote_rejected, remote_errors, remote_timeouts: kept in memory,
  // so a read never writes to the local directory (CompilationCache::counters reports them).
  std::map<std::string, int64_t> remote_counters() const;

 private:
  bool remote_available();
  void remote_failed(const Status& status, const std::string& what);
  void note(const char* counter);
  CacheStore* local_;
  std::unique_ptr<CacheStore> remote_;
  bool remote_read_only_;
  Env* env_;
  mutable std::mutex mutex_;
  int consecutive_failures_ = 0;
  int64_t skip_until_micros_ = 0;
  std::map<std::string, int64_t> remote_counters_;
};

// A portable bundle of entries (magic, then key/entry pairs with lengths, then an XXH3 checksum,
// then, when exported with a secret, an HMAC-SHA256 over all of it), to warm another machine's
// cache. Entries of another platform version import fine and are simply never looked up there
// (their keys include the platform version). Raw-bytes alias records never travel.
KILN_EXPORT Result<std::string> export_cache_bundle(CacheStore& store,
                                                    const std::string& secret = "");
struct KILN_EXPORT BundleImport {
  int imported = 0;
  int skipped = 0;  // records that do not decode under their key, and alias records
  bool signed_bundle = false;
};
// Every record is decoded in full under its key before any is written; a damaged bundle imports
// nothing. With a secret only a bundle signed with it is accepted; without one, a signed bundle
// is refused too (its signature cannot be checked), and an unsigned one is trusted like the
// user's own files.
KILN_EXPORT Result<BundleImport> import_cache_bundle(CacheStore& store, std::string_view bundle,
                                                     const std::string& secret = "");

// The platform's default directory: $XDG_CACHE_HOME/kiln, else ~/.cache/kiln.
KILN_EXPORT std::string default_cache_directory();
// The directory in use: the KILN_CACHE_DIR flag (set from code or the command line), else the
// default.
KILN_EXPORT std::string cache_directory();

}  // namespace kiln
