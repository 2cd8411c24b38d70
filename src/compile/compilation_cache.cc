// CompilationCache: memory tier → persistent store → the job's leader → the compiler, with the
// seed's PGLE rules deciding which key a call uses.
#include "kiln/compilation_cache.h"

#include <chrono>
#include <condition_variable>
#include <set>

#include "cache/host_description_files.h"
#include "compile/cache_parts.h"
#include "kiln/compile.h"
#include "kiln/config.h"
#include "kiln/file.h"
#include "kiln/kv_store.h"
#include "kiln/logging.h"
#include "kiln/monitoring.h"

namespace kiln {

using cache_parts::ErrorHandlers;

struct CompilationCache::State {
  CompilationCacheOptions options;
  std::unique_ptr<DirectoryStore> local;
  std::unique_ptr<TieredCacheStore> tiered;  // local + the remote tier, when configured
  std::shared_ptr<ErrorHandlers> handlers;

  std::mutex mutex;
  cache_parts::MemoryTier memory{64};
  cache_parts::Counters counters;
  // One compile per key at a time: later callers wait for the first.
  std::set<std::string> in_flight;
  std::condition_variable in_flight_done;
  std::set<std::string> verified_keys;  // check-contents: keys already compared
  bool task_event_sent = false;

  Env* env() const { return options.env ? options.env : Env::posix(); }
  CacheStore* store() const {
    return tiered ? static_cast<CacheStore*>(tiered.get()) : local.get();
  }
  cache_parts::KeyPolicy key_policy() const {
    return {options.include_metadata_in_key, options.key_tag};
  }
  cache_parts::WritePolicy write_policy() const {
    return {options.writer_process,
            options.min_compile_time_secs,
            options.min_entry_size_bytes,
            options.raise_errors,
            options.explain_cache_misses,
            options.expect_pgle,
            options.env};
  }
  void task_event(monitoring::Event event) {
    std::lock_guard<std::mutex> lock(mutex);
    if (task_event_sent) return;
    task_event_sent = true;
    monitoring::record_event(event);
  }
};

namespace {

using Clock = std::chrono::steady_clock;

// As XLA does: a name the compiler does not know would change the key and nothing else.
// An optimised PGLE build without a profile would store a plain build under the PGLE key.
Status check_options(const CompileOptions& options) {
  if (!options.env_option_overrides.empty())
    return invalid_argument("No such compile option: '" + options.env_option_overrides[0].first +
                            "' (set effort levels and disabled passes on CompileOptions, or "
                            "through get_compile_options)");
  if (options.pgle_build == PgleBuild::kOptimized && options.fdo_profile.empty())
    return invalid_argument(
        "pgle_build is 'optimized' but no fdo_profile is given: an optimised PGLE build is "
        "compiled with the profile PGLE measured (leave pgle_build plain to compile without one)");
  return Status();
}

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

Result<std::shared_ptr<Executable>> compile_uncached(CompilationCache::State& s,
                                                     const Client& client,
                                                     const ModuleSource& source,
                                                     const CompileOptions& options,
                                                     CompileReport& report) {
  // Timed with the Env's clock, so tests can make a compile look slow or fast.
  int64_t start = s.env()->now_micros();
  auto exe = client.compile(source, options);
  double seconds = static_cast<double>(s.env()->now_micros() - start) / 1e6;
  report.compile_ms = seconds * 1000;
  report.compiled = true;
  if (!exe.ok()) return s.handlers->apply(exe.status());
  monitoring::record_duration(monitoring::DurationEvent::kBackendCompileDuration, seconds);
  return exe;
}

// Keys as the PGLE strategy asks for them when there is no store (no raw-bytes aliases).
cache_parts::KeyFunction uncached_key_function(CompilationCache::State& s, const Client& client,
                                               const ModuleSource& source) {
  return [&s, &client, &source](const CompileOptions& o) {
    return cache_parts::compute_key(client, source, o, s.key_policy(), nullptr);
  };
}

// $KILN_DUMP_IR_TO gets the module on a hit too (the compiler writes it, and every later stage,
// on a miss): DIR/<module file name>.0-input.mlir, as the compiler names it.
void dump_input_on_hit(const ModuleSource& source, const CacheKey& key) {
  std::string dir = *config::get_string("KILN_DUMP_IR_TO");
  if (dir.empty()) return;
  auto mlir = source.mlir();
  if (!mlir.ok()) return;  // dumps are a debugging aid; never fail a hit over them
  (void)Env::posix()->create_dirs(dir);
  (void)write_file(dir + "/" + file_name_for_module(key.module_name) + ".0-input.mlir",
                   mlir->bytes);
}

// The stored entry under `key`, decoded; a damaged one is counted, removed and reported absent.
Result<std::optional<DecodedCacheEntry>> read_entry(
    CompilationCache::State& s, const CacheKey& key,
    std::optional<std::pair<std::string, std::string>>& prefetched) {
  CacheStore& store = *s.store();
  const std::string& module = key.module_name;
  Result<std::optional<std::string>> bytes =
      prefetched && prefetched->first == key.key
          ? Result<std::optional<std::string>>(
                std::optional<std::string>(std::move(prefetched->second)))
          : store.get(key.key);
  if (!bytes.ok()) {
    store.count(StoreCounter::kReadErrors);
    std::string message = "Error reading persistent compilation cache entry for '" + module +
                          "': " + status_code_name(bytes.status().code()) + ": " +
                          bytes.status().message();
    if (s.options.raise_errors) return Status(bytes.status().code(), message);
    log::warning(message);
    return std::optional<DecodedCacheEntry>();
  }
  if (!bytes->has_value()) return std::optional<DecodedCacheEntry>();
  auto decoded = decode_cache_entry(**bytes, key.key);
  if (!decoded.ok()) {
    monitoring::record_event(monitoring::Event::kCacheCorrupt);
    store.count(StoreCounter::kCorrupt);
    s.counters.add("corrupt");
    log::warning("Persistent compilation cache entry for '" + module + "' with key '" + key.key +
                 "' is corrupt (" + decoded.status().message() + "); recompiling");
    (void)store.remove(key.key);  // the recompile writes a good one
    return std::optional<DecodedCacheEntry>();
  }
  return std::optional<DecodedCacheEntry>(std::move(*decoded));
}

// A persistent hit: the report, counters, log line and events (both paths, loading and AOT).
void record_hit(CompilationCache::State& s, const CacheKey& key, const DecodedCacheEntry& stored,
                Clock::time_point read_start, CompileReport& report) {
  double retrieval_ms = ms_since(read_start);
  report.cache = CacheOutcome::kHit;
  report.retrieval_ms = retrieval_ms;
  s.counters.add("hits");
  std::string line =
      "Persistent compilation cache hit for '" + key.module_name + "' with key '" + key.key + "'";
  s.options.log_compiles ? log::warning(line) : log::debug(line);
  monitoring::record_event(monitoring::Event::kCacheHits);
  monitoring::record_duration(monitoring::DurationEvent::kCompileTimeSavedSec,
                              (stored.metadata.compile_time_ms - retrieval_ms) / 1000.0);
  monitoring::record_duration(monitoring::DurationEvent::kCacheRetrievalTimeSec,
                              retrieval_ms / 1000.0);
}

void record_miss(CompilationCache::State& s, const CacheKey& key, CompileReport& report) {
  report.cache = CacheOutcome::kMiss;
  std::string miss =
      "PERSISTENT COMPILATION CACHE MISS for '" + key.module_name + "' with key '" + key.key + "'";
  s.options.explain_cache_misses ? log::warning(miss) : log::debug(miss);
  monitoring::record_event(monitoring::Event::kCacheMisses);
  s.counters.add("misses");
}

// Loads a stored entry; null (after counting it corrupt and removing it) when it does not load.
std::shared_ptr<Executable> load_entry(CompilationCache::State& s, const CacheKey& key,
                                       const DecodedCacheEntry& stored,
                                       Clock::time_point read_start, CompileReport& report) {
  CacheStore& store = *s.store();
  const std::string& module = key.module_name;
  auto exe = Executable::deserialize(stored.payload);
  if (!exe.ok()) {
    monitoring::record_event(monitoring::Event::kCacheCorrupt);
    store.count(StoreCounter::kCorrupt);
    s.counters.add("corrupt");
    log::warning("Persistent compilation cache entry for '" + module + "' does not load (" +
                 exe.status().message() + "); recompiling");
    (void)store.remove(key.key);
    return nullptr;
  }
  record_hit(s, key, stored, read_start, report);
  return *exe;
}

// The in-flight mark of one key, released (and waiters woken) however the call ends.
struct InFlight {
  CompilationCache::State& s;
  const std::string& key;
  ~InFlight() {
    std::lock_guard<std::mutex> l(s.mutex);
    s.in_flight.erase(key);
    s.in_flight_done.notify_all();
  }
};

// A miss: the job's leader shares its compile, or this process compiles (and stores).
Result<std::shared_ptr<Executable>> compile_missing(
    CompilationCache::State& s, const Client& client, const ModuleSource& source,
    const CompileOptions& options, const CacheKey& key,
    const std::optional<DecodedCacheEntry>& stored, CompileReport& report) {
  const std::string& module = key.module_name;
  cache_parts::SharePlan share =
      cache_parts::plan_sharing(client, options, s.options.share_binary_between_hosts);
  if (share.active && !share.leader) {
    report.shared = SharedRole::kFollower;
    return cache_parts::wait_for_leader(share, key, s.options.remote_secret,
                                        s.options.share_timeout_ms);
  }
  if (s.options.log_compiles) log::warning("Compiling '" + module + "'");
  auto compiled = compile_uncached(s, client, source, options, report);
  if (share.active) {
    report.shared = SharedRole::kLeader;
    cache_parts::publish_to_followers(share, key, compiled, s.options.remote_secret);
  }
  if (!compiled.ok()) return compiled.status();
  std::shared_ptr<Executable> exe = std::move(compiled).value();
  if (stored) {  // check-contents: the stored entry must be what this compile produced
    auto previous = Executable::deserialize(stored->payload);
    if (!previous.ok() || (*previous)->code_bytes() != exe->code_bytes()) {
      return Status(StatusCode::kCorruption,
                    "cache verification failed for '" + module + "' with key '" + key.key +
                        "': the stored executable differs from a fresh compile of the same key");
    }
    return exe;  // verified: the entry is already there
  }
  KILN_RETURN_IF_ERROR(cache_parts::write_entry(client, *s.store(), s.counters, key, report,
                                                s.write_policy(),
                                                [&] { return exe->serialize(); }));
  return exe;
}

}  // namespace

Status cache_parts::ErrorHandlers::apply(const Status& error) {
  std::vector<CompileErrorHandler> in_order;
  {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto& [id, h] : handlers) in_order.push_back(h);
  }
  for (const CompileErrorHandler& h : in_order) {
    if (std::optional<Status> replaced = h(error))
      return Status(replaced->code(), replaced->message() + "\ncaused by: " + error.to_string());
  }
  return error;
}

std::shared_ptr<ErrorHandlers> cache_parts::process_error_handlers() {
  static auto* handlers = new std::shared_ptr<ErrorHandlers>(std::make_shared<ErrorHandlers>());
  return *handlers;
}

Result<std::shared_ptr<CompilationCache>> cache_parts::open_with_handlers(
    const CompilationCacheOptions& options, std::shared_ptr<ErrorHandlers> handlers) {
  auto state = std::make_unique<CompilationCache::State>();
  state->options = options;
  state->handlers = std::move(handlers);
  state->memory = MemoryTier(options.memory_capacity);
  if (options.enabled) {
    DirectoryStoreOptions local{options.directory.empty() ? cache_directory() : options.directory,
                                options.max_size_bytes, options.max_entries, options.env,
                                options.trust_shared_directory};
    KILN_ASSIGN_OR_RETURN(state->local, DirectoryStore::open(local));
    // The cache also keeps this host's description (the seed's side cache), so later processes
    // describe the host without loading the compiler.
    cpu::install_host_description_cache(host_description_files(
        local.directory, options.writer_process, options.trust_shared_directory));
    if (!options.remote_url.empty()) {
      KILN_ASSIGN_OR_RETURN(RedisAddress address, parse_redis_url(options.remote_url));
      auto remote = std::make_unique<RemoteCacheStore>(
          RedisKeyValueStore::create_lazy(address, options.remote_timeout_ms),
          options.remote_secret, address.to_string());
      state->tiered = std::make_unique<TieredCacheStore>(state->local.get(), std::move(remote),
                                                         options.remote_read_only, state->env());
    }
  }
  return std::shared_ptr<CompilationCache>(new CompilationCache(std::move(state)));
}

Result<std::shared_ptr<CompilationCache>> CompilationCache::open(
    const CompilationCacheOptions& options) {
  return cache_parts::open_with_handlers(options, std::make_shared<ErrorHandlers>());
}

CompilationCache::CompilationCache(std::unique_ptr<State> state) : state_(std::move(state)) {}
CompilationCache::~CompilationCache() = default;

CacheStore* CompilationCache::store() const { return state_->store(); }
DirectoryStore* CompilationCache::local_store() const { return state_->local.get(); }
const CompilationCacheOptions& CompilationCache::options() const { return state_->options; }
std::map<std::string, int64_t> CompilationCache::counters() const {
  std::map<std::string, int64_t> counters = state_->counters.snapshot();
  if (state_->tiered)
    for (const auto& [name, value] : state_->tiered->remote_counters()) counters[name] += value;
  return counters;
}

int CompilationCache::register_error_handler(CompileErrorHandler handler) {
  ErrorHandlers& h = *state_->handlers;
  std::lock_guard<std::mutex> lock(h.mutex);
  h.handlers[h.next_id] = std::move(handler);
  return h.next_id++;
}

void CompilationCache::unregister_error_handler(int id) {
  ErrorHandlers& h = *state_->handlers;
  std::lock_guard<std::mutex> lock(h.mutex);
  h.handlers.erase(id);
}

Result<CacheKey> CompilationCache::compute_key(const Client& client, const ModuleSource& source,
                                               const CompileOptions& options) {
  return cache_parts::compute_key(client, source, resolve_compile_options(options),
                                  state_->key_policy(), state_->store());
}

namespace {

// A profile that cannot be used is refused here, loudly, and the plain build is made: it must never
// be stored under the PGLE key.
void drop_unusable_profile(const ModuleSource& source, CompileOptions& options,
                           CompileReport& report) {
  if (options.fdo_profile.empty()) return;
  auto profile = decode_fdo_profile(options.fdo_profile);
  if (profile.ok()) return;
  log::warning("the FDO profile given for " + source.name + " cannot be used: " +
               profile.status().message() + "; compiling the plain build without it");
  options.fdo_profile.clear();
  options.pgle_build = PgleBuild::kPlain;
  report.pgle = PgleStage::kProfileRejected;
}

// One compile per key: waits for a compile of `key` in flight, then answers from the memory tier,
// or claims the key (released when `claim` goes) and says whether to check the stored contents.
std::shared_ptr<Executable> claim_or_get_from_memory(CompilationCache::State& s,
                                                     const ModuleSource& source,
                                                     const CacheKey& key, CompileReport& report,
                                                     std::unique_ptr<InFlight>& claim,
                                                     bool& check_contents) {
  std::unique_lock<std::mutex> lock(s.mutex);
  s.in_flight_done.wait(lock, [&] { return s.in_flight.count(key.key) == 0; });
  if (auto exe = s.memory.get(key.key)) {
    lock.unlock();
    dump_input_on_hit(source, key);
    report.cache = CacheOutcome::kHit;
    report.from_memory = true;
    s.counters.add("requests");
    s.counters.add("hits");
    s.counters.add("memory_hits");
    return exe;
  }
  s.in_flight.insert(key.key);
  check_contents = s.options.check_contents && s.verified_keys.insert(key.key).second;
  lock.unlock();
  claim.reset(new InFlight{s, key.key});
  return nullptr;
}

}  // namespace

Result<std::shared_ptr<Executable>> CompilationCache::compile_or_get_cached(
    const Client& client, const ModuleSource& source, const CompileOptions& raw_options,
    CompileReport* report_out, PgleProfiler* profiler) {
  State& s = *state_;
  CompileReport local_report;
  CompileReport& report = report_out ? *report_out : local_report;
  report = CompileReport();
  KILN_RETURN_IF_ERROR(check_options(raw_options));
  CompileOptions options = resolve_compile_options(raw_options);
  drop_unusable_profile(source, options, report);
  if (s.store() == nullptr) {
    s.task_event(monitoring::Event::kTaskDisabledCache);
    KILN_RETURN_IF_ERROR(cache_parts::prepare_uncached_pgle(
        s.options, uncached_key_function(s, client, source), client, options, report));
    return compile_uncached(s, client, source, options, report);
  }

  auto key_start = Clock::now();
  cache_parts::KeyFunction key_of = [&](const CompileOptions& o) {
    return compute_key(client, source, o);
  };
  KILN_ASSIGN_OR_RETURN(
      cache_parts::KeyChoice choice,
      cache_parts::choose_key(s.options, key_of, s.store(), client, options, report, profiler));
  report.key_ms = ms_since(key_start);
  if (!choice.key.ok()) {
    // A module that does not parse fails in the compiler with the user-facing diagnostics.
    if (choice.key.status().code() != StatusCode::kInvalidArgument)
      log::error("cannot compute the compilation cache key: " + choice.key.status().to_string());
    return compile_uncached(s, client, source, choice.options, report);
  }
  const CacheKey& key = *choice.key;
  report.key = key.key;
  report.module_name = key.module_name;

  std::unique_ptr<InFlight> claim;
  bool check_contents = false;
  if (auto exe = claim_or_get_from_memory(s, source, key, report, claim, check_contents))
    return exe;
  s.counters.add("requests");
  s.task_event(monitoring::Event::kTasksUsingCache);
  monitoring::record_event(monitoring::Event::kCompileRequestsUseCache);

  auto read_start = Clock::now();
  KILN_ASSIGN_OR_RETURN(std::optional<DecodedCacheEntry> stored,
                        read_entry(s, key, choice.prefetched));
  if (stored && !check_contents) {
    if (auto exe = load_entry(s, key, *stored, read_start, report)) {
      dump_input_on_hit(source, key);
      std::lock_guard<std::mutex> l(s.mutex);
      s.memory.put(key.key, exe);
      return exe;
    }
    stored.reset();
  }

  record_miss(s, key, report);
  KILN_ASSIGN_OR_RETURN(
      std::shared_ptr<Executable> exe,
      compile_missing(s, client, source, choice.options, key,
                      check_contents ? stored : std::optional<DecodedCacheEntry>(), report));
  std::lock_guard<std::mutex> l(s.mutex);
  s.memory.put(key.key, exe);
  return exe;
}

// The compile-only path follows the loading path's rules: the same logs, events, counters,
// read-error policy and check-contents; only the memory tier and job sharing do not apply.
Result<std::string> CompilationCache::compile_or_get_cached_serialized(
    const Client& client, const ModuleSource& source, const CompileOptions& raw_options,
    CompileReport* report_out) {
  State& s = *state_;
  CompileReport local_report;
  CompileReport& report = report_out ? *report_out : local_report;
  report = CompileReport();
  KILN_RETURN_IF_ERROR(check_options(raw_options));
  CompileOptions options = resolve_compile_options(raw_options);
  auto compile = [&]() -> Result<std::string> {
    int64_t start = s.env()->now_micros();
    auto bytes = client.compile_serialized(source, options);
    report.compile_ms = static_cast<double>(s.env()->now_micros() - start) / 1000;
    report.compiled = true;
    if (!bytes.ok()) return s.handlers->apply(bytes.status());
    monitoring::record_duration(monitoring::DurationEvent::kBackendCompileDuration,
                                report.compile_ms / 1000);
    return bytes;
  };
  if (s.store() == nullptr) {
    s.task_event(monitoring::Event::kTaskDisabledCache);
    return compile();
  }
  auto key_start = Clock::now();
  KILN_ASSIGN_OR_RETURN(CacheKey key, compute_key(client, source, options));
  report.key_ms = ms_since(key_start);
  report.key = key.key;
  report.module_name = key.module_name;
  bool check_contents;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    check_contents = s.options.check_contents && s.verified_keys.insert(key.key).second;
  }
  s.counters.add("requests");
  s.task_event(monitoring::Event::kTasksUsingCache);
  monitoring::record_event(monitoring::Event::kCompileRequestsUseCache);
  auto read_start = Clock::now();
  std::optional<std::pair<std::string, std::string>> none;
  KILN_ASSIGN_OR_RETURN(std::optional<DecodedCacheEntry> stored, read_entry(s, key, none));
  if (stored && !check_contents) {
    record_hit(s, key, *stored, read_start, report);
    return std::move(stored->payload);
  }
  record_miss(s, key, report);
  KILN_ASSIGN_OR_RETURN(std::string serialized, compile());
  if (check_contents && stored) {
    auto before = Executable::serialized_code(stored->payload);
    auto now = Executable::serialized_code(serialized);
    if (!before.ok() || !now.ok() || *before != *now)
      return Status(StatusCode::kCorruption,
                    "cache verification failed for '" + key.module_name + "' with key '" + key.key +
                        "': the stored executable differs from a fresh compile of the same key");
    return serialized;  // verified: the entry is already there
  }
  KILN_RETURN_IF_ERROR(cache_parts::write_entry(client, *s.store(), s.counters, key, report,
                                                s.write_policy(), [&] { return serialized; }));
  return serialized;
}

CompilationCacheOptions CompilationCacheOptions::from_flags() {
  CompilationCacheOptions o;
  o.enabled = config::get_bool("KILN_ENABLE_COMPILATION_CACHE");
  o.directory = cache_directory();
  o.max_size_bytes = config::get_int("KILN_COMPILATION_CACHE_MAX_SIZE");
  o.max_entries = config::get_int("KILN_COMPILATION_CACHE_MAX_ENTRIES");
  o.min_compile_time_secs = config::get_double("KILN_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS");
  o.min_entry_size_bytes = config::get_int("KILN_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES");
  o.raise_errors = config::get_bool("KILN_RAISE_PERSISTENT_CACHE_ERRORS");
  o.check_contents = config::get_bool("KILN_COMPILATION_CACHE_CHECK_CONTENTS");
  o.explain_cache_misses = config::get_bool("KILN_EXPLAIN_CACHE_MISSES");
  o.log_compiles = config::get_bool("KILN_LOG_COMPILES");
  o.include_metadata_in_key = config::get_bool("KILN_COMPILATION_CACHE_INCLUDE_METADATA_IN_KEY");
  o.key_tag = *config::get_string("KILN_CACHE_KEY_TAG");
  o.trust_shared_directory = config::get_bool("KILN_CACHE_TRUST_SHARED_DIR");
  o.writer_process = config::get_int("KILN_CACHE_WRITER");
  o.remote_url = *config::get_string("KILN_REMOTE_CACHE");
  o.remote_secret = *config::get_string("KILN_REMOTE_CACHE_SECRET");
  o.remote_timeout_ms = config::get_int("KILN_REMOTE_CACHE_TIMEOUT_MS");
  o.remote_read_only = config::get_bool("KILN_REMOTE_CACHE_READ_ONLY");
  o.share_binary_between_hosts = config::get_bool("KILN_SHARE_BINARY_BETWEEN_HOSTS");
  o.share_timeout_ms = config::get_int("KILN_SHARE_BINARY_BETWEEN_HOSTS_TIMEOUT_MS");
  o.enable_pgle = config::get_bool("KILN_ENABLE_PGLE");
  o.pgle_profiling_runs = config::get_int("KILN_PGLE_PROFILING_RUNS");
  o.expect_pgle = config::get_bool("KILN_COMPILATION_CACHE_EXPECT_PGLE");
  return o;
}

}  // namespace kiln
