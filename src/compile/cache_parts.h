// The parts CompilationCache is assembled from, one concept per file: the key (cache_key.cc),
// the memory tier (memory_tier.cc), sharing a compile in a job (job_sharing.cc), the write policy
// (write_policy.cc) and the PGLE strategy (pgle_strategy.cc). compilation_cache.cc orchestrates
// them.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/compilation_cache.h"
#include "kiln/compile.h"
#include "kiln/distributed.h"

namespace kiln::cache_parts {

// --- key (cache_key.cc)

struct KeyPolicy {
  bool include_metadata = false;  // keep debug locations in the module's component
  std::string tag;                // extra text mixed into every key
};

// The key of `source`; `store` (optional) remembers raw-bytes aliases so repeats need no MLIR.
Result<CacheKey> compute_key(const Client& client, const ModuleSource& source,
                             const CompileOptions& resolved_options, const KeyPolicy& policy,
                             CacheStore* store);

// --- memory tier (memory_tier.cc)

// Loaded executables by key, least recently used dropped beyond `capacity`. Not thread-safe: the
// cache calls it under its own lock.
class MemoryTier {
 public:
  explicit MemoryTier(size_t capacity) : capacity_(capacity) {}
  std::shared_ptr<Executable> get(const std::string& key);
  void put(const std::string& key, std::shared_ptr<Executable> executable);

 private:
  size_t capacity_;
  std::list<std::pair<std::string, std::shared_ptr<Executable>>> lru_;
  std::unordered_map<std::string, decltype(lru_)::iterator> by_key_;
};

// --- sharing a compile between the processes of a job (job_sharing.cc)

struct SharePlan {
  bool active = false;
  bool leader = false;
  int leader_process = 0;
  std::shared_ptr<const distributed::JobContext> job;
};

// Sharing applies when `share` is on, a job is initialised and the compile's devices span several
// processes. The leader owns the lowest-id device.
SharePlan plan_sharing(const Client& client, const CompileOptions& options, bool share);
// The leader publishes the compressed executable, or its compile error so followers fail fast;
// with `secret`, signed.
void publish_to_followers(const SharePlan& plan, const CacheKey& key,
                          const Result<std::shared_ptr<Executable>>& compiled,
                          const std::string& secret);
Result<std::shared_ptr<Executable>> wait_for_leader(const SharePlan& plan, const CacheKey& key,
                                                    const std::string& secret, int64_t timeout_ms);
Result<std::string> sync_profile(const Client& client, const CompileOptions& options,
                                 const CacheKey& empty_profile_key, std::string profile,
                                 int64_t timeout_ms);

// --- which key a call looks up, and which build it compiles, under PGLE (pgle_strategy.cc)
using KeyFunction = std::function<Result<CacheKey>(const CompileOptions&)>;
struct KeyChoice {
  Result<CacheKey> key = internal_error("no cache key");
  CompileOptions options;                                         // what to compile on a miss
  std::optional<std::pair<std::string, std::string>> prefetched;  // key, entry bytes
};
// The seed's three cases: (1) a stored PGLE-optimised entry is used and `profiler` disabled;
// (2) options carrying a profile compile the optimised build under the PGLE key, with the job
// leader's profile; (3) otherwise the instrumented first pass. Without PGLE: the plain key.
Result<KeyChoice> choose_key(const CompilationCacheOptions& cache_options,
                             const KeyFunction& key_of, CacheStore* store, const Client& client,
                             CompileOptions options, CompileReport& report, PgleProfiler* profiler);
// The same rules with the cache off: the first pass is instrumented, and every process of a job
// recompiles with the leader's profile.
Status prepare_uncached_pgle(const CompilationCacheOptions& cache_options,
                             const KeyFunction& key_of, const Client& client,
                             CompileOptions& options, CompileReport& report);

// --- counters of one cache, in memory: reads never write to the store (memory_tier.cc)

class Counters {
 public:
  void add(const std::string& name, int64_t delta = 1);
  std::map<std::string, int64_t> snapshot() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, int64_t> values_;
};

// --- write policy (write_policy.cc)

struct WritePolicy {
  int64_t writer_process = 0;
  double min_compile_time_secs = 0;
  int64_t min_entry_size_bytes = 0;
  bool raise_errors = false;
  bool explain = false;
  bool expect_pgle = false;
  Env* env = nullptr;
};

// Writes the entry unless a gate (in the seed's order) says not to; each skip is recorded in
// `report.skipped_write` with its reason. Fails only with `raise_errors`.
// Skips are counted in `counters` ("skipped_writes.<reason>"): a process that does not write
// leaves the store untouched.
Status write_entry(const Client& client, CacheStore& store, Counters& counters, const CacheKey& key,
                   CompileReport& report, const WritePolicy& policy,
                   const std::function<std::string()>& payload);

// --- error handlers, shared by the process default's successive instances

struct ErrorHandlers {
  std::mutex mutex;
  std::map<int, CompileErrorHandler> handlers;
  int next_id = 1;
  Status apply(const Status& error);
};
std::shared_ptr<ErrorHandlers> process_error_handlers();

Result<std::shared_ptr<CompilationCache>> open_with_handlers(
    const CompilationCacheOptions& options, std::shared_ptr<ErrorHandlers> handlers);

}  // namespace kiln::cache_parts
