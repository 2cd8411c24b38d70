// The compilation cache as an object an application holds: its own memory tier, persistent
// store, single-flight table, error handlers and policies. Two caches in one process never see
// each other's entries. compile_or_get_cached (kiln/compile.h) is a thin wrapper over a process
// default built from the KILN_* flags.
//
//   kiln::CompilationCacheOptions options;
//   options.directory = "/var/cache/my-server/kiln";
//   auto cache = kiln::CompilationCache::open(options);
//   auto exe = (*cache)->compile_or_get_cached(client, source, kiln::CompileOptions{}, &report);
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/cache.h"
#include "kiln/client.h"
#include "kiln/env.h"
#include "kiln/executable.h"
#include "kiln/export.h"
#include "kiln/options.h"
#include "kiln/pgle.h"
#include "kiln/status.h"

namespace kiln {

struct CompileReport;

// Error handlers see compile errors in registration order; the first that returns a status
// replaces the error (the original is appended as the cause).
using CompileErrorHandler = std::function<std::optional<Status>(const Status&)>;

// Each field names the flag the process default takes it from.
struct KILN_EXPORT CompilationCacheOptions {
  bool enabled = true;          // KILN_ENABLE_COMPILATION_CACHE: false compiles every time
  std::string directory;        // "": cache_directory() (the KILN_CACHE_DIR flag, else the default)
  int64_t max_size_bytes = -1;  // KILN_COMPILATION_CACHE_MAX_SIZE (-1 unbounded, 0 stores none)
  int64_t max_entries = -1;     // KILN_COMPILATION_CACHE_MAX_ENTRIES
  double min_compile_time_secs = 0;         // KILN_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS
  int64_t min_entry_size_bytes = 0;         // KILN_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES
  bool raise_errors = false;                // KILN_RAISE_PERSISTENT_CACHE_ERRORS
  bool check_contents = false;              // KILN_COMPILATION_CACHE_CHECK_CONTENTS
  bool explain_cache_misses = false;        // KILN_EXPLAIN_CACHE_MISSES
  bool log_compiles = false;                // KILN_LOG_COMPILES
  bool include_metadata_in_key = false;     // KILN_COMPILATION_CACHE_INCLUDE_METADATA_IN_KEY
  std::string key_tag;                      // KILN_CACHE_KEY_TAG
  bool trust_shared_directory = false;      // KILN_CACHE_TRUST_SHARED_DIR
  int64_t writer_process = 0;               // KILN_CACHE_WRITER
  std::string remote_url;                   // KILN_REMOTE_CACHE
  std::string remote_secret;                // KILN_REMOTE_CACHE_SECRET
  int64_t remote_timeout_ms = 500;          // KILN_REMOTE_CACHE_TIMEOUT_MS
  bool remote_read_only = false;            // KILN_REMOTE_CACHE_READ_ONLY
  bool share_binary_between_hosts = false;  // KILN_SHARE_BINARY_BETWEEN_HOSTS
  int64_t share_timeout_ms = 1200000;       // KILN_SHARE_BINARY_BETWEEN_HOSTS_TIMEOUT_MS
  bool enable_pgle = false;                 // KILN_ENABLE_PGLE
  int64_t pgle_profiling_runs = 3;          // KILN_PGLE_PROFILING_RUNS
  bool expect_pgle = false;                 // KILN_COMPILATION_CACHE_EXPECT_PGLE
  size_t memory_capacity = 64;              // executables kept loaded in memory
  Env* env = nullptr;                       // files and clock (nullptr: POSIX)

  // From the KILN_* flags as they are now.
  static CompilationCacheOptions from_flags();
  bool operator==(const CompilationCacheOptions&) const = default;
};

// What `kiln cache stats` shows of the local directory: executables and raw-bytes alias records
// counted apart, bytes, and the counters its ledger keeps across processes.
struct KILN_EXPORT CacheDirectoryStats {
  std::string directory;
  int64_t executables = 0;
  int64_t alias_records = 0;
  int64_t bytes = 0;
  std::map<std::string, int64_t> counters;  // writes, corrupt, evictions, read_errors, ...
};

// One stored executable, from its header and metadata (`kiln cache ls`).
struct KILN_EXPORT CacheEntrySummary {
  std::string key;
  size_t bytes = 0;
  Status problem;               // not OK: the header or metadata does not decode under its key
  CacheEntryMetadata metadata;  // module name, compile time, key components (when readable)
};

// What `verify` checked and removed.
struct KILN_EXPORT CacheVerification {
  int verified = 0;
  std::vector<std::pair<std::string, std::string>> removed;  // key, why
};

class KILN_EXPORT CompilationCache {
 public:
  // Opens the persistent store (when enabled); an unusable directory is an error here.
  static Result<std::shared_ptr<CompilationCache>> open(const CompilationCacheOptions& options);
  ~CompilationCache();
  CompilationCache(const CompilationCache&) = delete;
  CompilationCache& operator=(const CompilationCache&) = delete;

  // From this cache's memory, its persistent store, the job's leader, or by compiling (then
  // stored). With PGLE on, the seed's three cases apply (see kiln/compile.h).
  Result<std::shared_ptr<Executable>> compile_or_get_cached(const Client& client,
                                                            const ModuleSource& source,
                                                            const CompileOptions& options,
                                                            CompileReport* report = nullptr,
                                                            PgleProfiler* profiler = nullptr);
  // For compile-only clients: the serialised executable, under the key a real client computes.
  Result<std::string> compile_or_get_cached_serialized(const Client& client,
                                                       const ModuleSource& source,
                                                       const CompileOptions& options,
                                                       CompileReport* report = nullptr);
  Result<CacheKey> compute_key(const Client& client, const ModuleSource& source,
                               const CompileOptions& options);

  int register_error_handler(CompileErrorHandler handler);
  void unregister_error_handler(int id);

  // The store lookups go to (local, or local + remote); null when the cache is disabled.
  CacheStore* store() const;
  // The local directory store alone (maintenance commands); null when disabled.
  DirectoryStore* local_store() const;
  const CompilationCacheOptions& options() const;
  // This cache's counts since it was opened, kept in memory (a read never writes to the store):
  // requests, hits (memory_hits of them from the memory tier), misses, writes, corrupt,
  // skipped_writes.<reason>, and with a remote tier remote_hits, remote_misses, remote_rejected,
  // remote_errors, remote_timeouts. Writes, evictions and corrupt entries are also counted in the
  // store's ledger (`kiln cache stats`).
  std::map<std::string, int64_t> counters() const;

  // Maintenance of the local directory: what `kiln cache ...` does, through the same object.
  // Each fails with kInvalidArgument when the cache is disabled.
  Result<CacheDirectoryStats> directory_stats() const;
  Result<std::vector<CacheEntrySummary>> list_entries() const;
  // Checks every entry (header, checksum, key, code structure; with `load`, maps its code too,
  // running its constructors) and removes the bad ones, counting them as corrupt.
  Result<CacheVerification> verify(bool load);
  Status clear();
  // Evicts least recently used entries until both bounds hold (-1: unbounded); with
  // `unused_since_micros` >= 0, also every entry last used before then.
  Status evict(int64_t max_size_bytes, int64_t max_entries, int64_t unused_since_micros = -1);
  // A portable bundle of every entry, signed with the remote secret when one is set.
  Result<std::string> export_bundle() const;
  Result<BundleImport> import_bundle(std::string_view bundle);

  // Internal: what open assembles (State is defined in the library only).
  struct State;
  explicit CompilationCache(std::unique_ptr<State> state);

 private:
  std::unique_ptr<State> state_;
};

}  // namespace kiln
