// The process default CompilationCache, built from the KILN_* flags, and the free functions of
// kiln/compile.h over it. When the flags change, the next call gets a new cache opened from them
// (calls in flight keep the one they started with); it shares nothing with the old one but the
// error handlers registered through register_compile_error_handler.
#include <mutex>

#include "compile/cache_parts.h"
#include "kiln/compilation_cache.h"
#include "kiln/compile.h"
#include "kiln/logging.h"

namespace kiln {
namespace {

struct DefaultCache {
  std::mutex mutex;
  std::shared_ptr<CompilationCache> cache;  // opened with cache->options()
  Env* env = nullptr;                       // set_persistent_cache_env
};

DefaultCache& default_cache_state() {
  static DefaultCache* d = new DefaultCache();
  return *d;
}

// The default cache for the flags as they are now; a store that cannot be opened is an error.
Result<std::shared_ptr<CompilationCache>> default_cache() {
  DefaultCache& d = default_cache_state();
  std::lock_guard<std::mutex> lock(d.mutex);
  CompilationCacheOptions options = CompilationCacheOptions::from_flags();
  options.env = d.env;
  if (d.cache && d.cache->options() == options) return d.cache;
  KILN_ASSIGN_OR_RETURN(
      d.cache, cache_parts::open_with_handlers(options, cache_parts::process_error_handlers()));
  return d.cache;
}

// The default cache, or (the store being unusable and errors not raised) one that compiles
// without a store, after a warning.
Result<std::shared_ptr<CompilationCache>> default_cache_or_uncached() {
  auto cache = default_cache();
  if (cache.ok()) return cache;
  log::warning("the persistent compilation cache is unavailable (" + cache.status().message() +
               "); compiling without it");
  CompilationCacheOptions options = CompilationCacheOptions::from_flags();
  if (options.raise_errors) return cache.status();
  options.enabled = false;
  options.env = default_cache_state().env;
  return cache_parts::open_with_handlers(options, cache_parts::process_error_handlers());
}

}  // namespace

Result<CacheKey> compute_cache_key(const Client& client, const ModuleSource& source,
                                   const CompileOptions& options, CacheStore* store) {
  CompilationCacheOptions flags = CompilationCacheOptions::from_flags();
  return cache_parts::compute_key(client, source, resolve_compile_options(options),
                                  {flags.include_metadata_in_key, flags.key_tag}, store);
}

const char* to_string(CacheOutcome outcome) {
  switch (outcome) {
    case CacheOutcome::kOff:
      return "off";
    case CacheOutcome::kMiss:
      return "miss";
    case CacheOutcome::kHit:
      return "hit";
  }
  return "?";
}

const char* to_string(SharedRole role) {
  switch (role) {
    case SharedRole::kNone:
      return "";
    case SharedRole::kLeader:
      return "leader";
    case SharedRole::kFollower:
      return "follower";
  }
  return "?";
}

const char* to_string(PgleStage stage) {
  switch (stage) {
    case PgleStage::kNone:
      return "";
    case PgleStage::kFirstPass:
      return "first pass";
    case PgleStage::kOptimised:
      return "optimised";
    case PgleStage::kOptimisedCached:
      return "optimised (cached)";
    case PgleStage::kProfileRejected:
      return "profile rejected";
  }
  return "?";
}

const char* to_string(WriteSkip skip) {
  switch (skip) {
    case WriteSkip::kNone:
      return "";
    case WriteSkip::kNotWriter:
      return "not_writer";
    case WriteSkip::kCompileTime:
      return "compile_time";
    case WriteSkip::kEntrySize:
      return "entry_size";
  }
  return "?";
}

Result<std::shared_ptr<Executable>> compile_or_get_cached(const Client& client,
                                                          const ModuleSource& source,
                                                          const CompileOptions& options,
                                                          CompileReport* report,
                                                          PgleProfiler* profiler) {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<CompilationCache> cache, default_cache_or_uncached());
  return cache->compile_or_get_cached(client, source, options, report, profiler);
}

Result<std::string> compile_or_get_cached_serialized(const Client& client,
                                                     const ModuleSource& source,
                                                     const CompileOptions& options,
                                                     CompileReport* report) {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<CompilationCache> cache, default_cache());
  return cache->compile_or_get_cached_serialized(client, source, options, report);
}

Result<std::string> sync_fdo_profile(const Client& client, const CompileOptions& options,
                                     const CacheKey& empty_profile_key, std::string profile) {
  return cache_parts::sync_profile(client, options, empty_profile_key, std::move(profile),
                                   CompilationCacheOptions::from_flags().share_timeout_ms);
}

int register_compile_error_handler(CompileErrorHandler handler) {
  cache_parts::ErrorHandlers& h = *cache_parts::process_error_handlers();
  std::lock_guard<std::mutex> lock(h.mutex);
  h.handlers[h.next_id] = std::move(handler);
  return h.next_id++;
}

void unregister_compile_error_handler(int id) {
  cache_parts::ErrorHandlers& h = *cache_parts::process_error_handlers();
  std::lock_guard<std::mutex> lock(h.mutex);
  h.handlers.erase(id);
}

Result<std::shared_ptr<CompilationCache>> default_compilation_cache() { return default_cache(); }

Result<CacheStore*> persistent_cache_store() {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<CompilationCache> cache, default_cache());
  return cache->store();
}

Result<DirectoryStore*> local_cache_store() {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<CompilationCache> cache, default_cache());
  if (cache->local_store() == nullptr) return invalid_argument("the compilation cache is disabled");
  return cache->local_store();
}

void set_persistent_cache_env(Env* env) {
  DefaultCache& d = default_cache_state();
  std::lock_guard<std::mutex> lock(d.mutex);
  d.env = env;
  d.cache.reset();
}

void reset_compilation_cache_state() {
  DefaultCache& d = default_cache_state();
  std::lock_guard<std::mutex> lock(d.mutex);
  d.cache.reset();
}

}  // namespace kiln
