#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <unordered_map>

#include "compile/text_canonical.h"
#include "core/digest.h"
#include "kiln/compile.h"
#include "kiln/config.h"
#include "kiln/distributed.h"
#include "kiln/kv_store.h"
#include "kiln/logging.h"
#include "kiln/monitoring.h"

namespace kiln {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

constexpr size_t kMemoryCacheCapacity = 64;

// Process-wide state of the compilation cache.
struct CacheState {
  std::mutex mutex;
  // Loaded executables by key, most recently used first (bounded).
  std::list<std::pair<std::string, std::shared_ptr<Executable>>> lru;
  std::unordered_map<std::string, decltype(lru)::iterator> by_key;
  // One compile per key at a time: later callers wait for the first.
  std::set<std::string> in_flight;
  std::condition_variable in_flight_done;
  std::set<std::string> verified_keys;  // check-contents: keys already compared in this process
  bool task_event_sent = false;
  std::unique_ptr<DirectoryStore> store;
  std::unique_ptr<TieredCacheStore> tiered;  // the local store + the remote tier, when configured
  std::string store_config;                  // the flags the stores were opened with
  Env* env = nullptr;                        // for the store; nullptr = POSIX
  std::map<int, CompileErrorHandler> error_handlers;
  int next_handler_id = 1;
};

CacheState& state() {
  static CacheState* s = new CacheState();
  return *s;
}

std::shared_ptr<Executable> memory_get(CacheState& s, const std::string& key) {
  auto it = s.by_key.find(key);
  if (it == s.by_key.end()) return nullptr;
  s.lru.splice(s.lru.begin(), s.lru, it->second);
  return it->second->second;
}

void memory_put(CacheState& s, const std::string& key, std::shared_ptr<Executable> exe) {
  if (auto it = s.by_key.find(key); it != s.by_key.end()) s.lru.erase(it->second);
  s.lru.emplace_front(key, std::move(exe));
  s.by_key[key] = s.lru.begin();
  while (s.lru.size() > kMemoryCacheCapacity) {
    s.by_key.erase(s.lru.back().first);
    s.lru.pop_back();
  }
}

std::string sanitized_module_name(const std::string& name) {
  std::string out;
  for (char c : name.substr(0, 64))
    out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-') ? c : '_';
  return out.empty() ? "module" : out;
}

// Options that never change generated code stay out of the key.
bool excluded_override(const std::string& name) {
  static const char* kExcluded[] = {"dump_to",
                                    "dump_ir_to",
                                    "log_level",
                                    "detailed_logging",
                                    "xla_force_host_platform_device_count",
                                    "device_count"};
  for (const char* e : kExcluded)
    if (name == e) return true;
  return false;
}

std::string options_description(const CompileOptions& o) {
  std::string disabled;
  for (const std::string& p : o.disabled_passes) disabled += (disabled.empty() ? "" : ",") + p;
  std::vector<std::pair<std::string, std::string>> overrides;
  for (const auto& kv : o.env_option_overrides)
    if (!excluded_override(kv.first)) overrides.push_back(kv);
  std::sort(overrides.begin(), overrides.end());
  std::string override_text;
  for (const auto& [k, v] : overrides) override_text += k + "=" + v + ",";
  std::string assignment;
  for (const auto& row : o.device_assignment) {
    assignment += "[";
    for (int d : row) assignment += std::to_string(d) + ",";
    assignment += "]";
  }
  return std::string("optimization_level=") + effort_level_name(o.optimization_level) +
         ";memory_fitting_level=" + effort_level_name(o.memory_fitting_level) +
         ";disabled_passes=" + disabled + ";num_replicas=" + std::to_string(o.num_replicas) +
         ";num_partitions=" + std::to_string(o.num_partitions) +
         ";device_assignment=" + assignment + ";overrides=" + override_text +
         ";profile_version=" + std::to_string(o.profile_version) +
         (o.target.is_host()
              ? ""
              : ";target=" + o.target.triple + "|" + o.target.cpu + "|" + o.target.features) +
         ";fdo_profile=" + (o.fdo_profile.empty() ? "none" : sha256_hex(o.fdo_profile));
}

KeyComponent component(std::string name, std::string description) {
  return KeyComponent{std::move(name), description, sha256_hex(description)};
}

// Every component except the module's; these need no MLIR.
std::vector<KeyComponent> environment_components(const Client& client, const CompileOptions& o) {
  std::string flags;
  for (const auto& [name, value] : config::codegen_flag_values()) flags += name + "=" + value + ";";
  std::string kinds;
  std::set<std::string> kind_set;
  for (const Device& d : client.devices()) kind_set.insert(d.kind);
  for (const std::string& k : kind_set) kinds += (kinds.empty() ? "" : ",") + k;
  return {
      component("versions", std::string("kiln ") + kiln_version() + "; llvm " + llvm_version()),
      component("platform", client.platform() + "; " + client.platform_version()),
      component("flags", flags),
      component("options", options_description(o)),
      component("devices", "count=" + std::to_string(client.devices().size()) + ";kinds=" + kinds),
      component("compression", "zstd"),
      component("tag", *config::get_string("KILN_CACHE_KEY_TAG")),
  };
}

CacheKey assemble_key(const std::string& module_name, std::vector<KeyComponent> components) {
  Sha256 h;
  for (const KeyComponent& c : components) {
    h.update_framed(c.name);
    h.update_framed(c.digest);
  }
  CacheKey key;
  key.module_name = module_name;
  key.key = sanitized_module_name(module_name) + "-" + h.hex();
  key.components = std::move(components);
  for (const KeyComponent& c : key.components)
    log::debug("cache key component " + c.name + ": " + c.digest);
  return key;
}

bool cache_enabled() { return config::get_bool("KILN_ENABLE_COMPILATION_CACHE"); }

Status open_store_locked(CacheState& s) {
  std::string dir = cache_directory();
  int64_t max_size = config::get_int("KILN_COMPILATION_CACHE_MAX_SIZE");
  int64_t max_entries = config::get_int("KILN_COMPILATION_CACHE_MAX_ENTRIES");
  std::string remote_url = *config::get_string("KILN_REMOTE_CACHE");
  std::string secret = *config::get_string("KILN_REMOTE_CACHE_SECRET");
  int64_t timeout_ms = config::get_int("KILN_REMOTE_CACHE_TIMEOUT_MS");
  bool read_only = config::get_bool("KILN_REMOTE_CACHE_READ_ONLY");
  bool trust_shared = config::get_bool("KILN_CACHE_TRUST_SHARED_DIR");
  std::string wanted = std::string(trust_shared ? "shared|" : "private|") + dir + "|" +
                       std::to_string(max_size) + "|" + std::to_string(max_entries) + "|" +
                       remote_url + "|" + sha256_hex(secret) + "|" + std::to_string(timeout_ms) +
                       "|" + (read_only ? "ro" : "rw");
  if (s.store && s.store_config == wanted) return Status();
  // A flag changed since the stores were opened (e.g. the directory): follow it.
  s.tiered.reset();
  DirectoryStoreOptions options{dir, max_size, max_entries, s.env, trust_shared};
  auto store = DirectoryStore::open(options);
  if (!store.ok()) return store.status();
  s.store = std::move(*store);
  if (!remote_url.empty()) {
    KILN_ASSIGN_OR_RETURN(RedisAddress address, parse_redis_url(remote_url));
    auto remote = std::make_unique<RemoteCacheStore>(
        RedisKeyValueStore::create_lazy(address, timeout_ms), secret, address.to_string());
    s.tiered = std::make_unique<TieredCacheStore>(s.store.get(), std::move(remote), read_only,
                                                  s.env ? s.env : Env::posix());
  }
  s.store_config = wanted;
  return Status();
}

// The clock and files the cache uses (tests substitute their own).
Env* cache_env() {
  CacheState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.env ? s.env : Env::posix();
}

Status run_error_handlers(const Status& error) {
  std::vector<CompileErrorHandler> handlers;
  {
    CacheState& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    for (auto& [id, h] : s.error_handlers) handlers.push_back(h);
  }
  for (const CompileErrorHandler& h : handlers) {
    if (std::optional<Status> replaced = h(error)) {
      return Status(replaced->code(), replaced->message() + "\ncaused by: " + error.to_string());
    }
  }
  return error;
}

Result<std::shared_ptr<Executable>> compile_uncached(const Client& client,
                                                     const ModuleSource& source,
                                                     const CompileOptions& options,
                                                     double* compile_ms) {
  // Timed with the Env's clock, so tests can make a compile look slow or fast.
  Env* env = cache_env();
  int64_t start = env->now_micros();
  auto exe = client.compile(source, options);
  double seconds = static_cast<double>(env->now_micros() - start) / 1e6;
  if (compile_ms) *compile_ms = seconds * 1000;
  if (!exe.ok()) return run_error_handlers(exe.status());
  monitoring::record_duration("backend_compile_duration", seconds);
  return exe;
}

std::string error_type(const Status& s) { return status_code_name(s.code()); }

struct SharePlan {
  bool active = false;
  bool leader = false;
  int leader_process = 0;
  std::shared_ptr<const distributed::JobContext> job;
};

// Sharing applies when KILN_SHARE_BINARY_BETWEEN_HOSTS is on, a job is initialised and the
// compile's devices span several processes. The leader owns the lowest-id device.
SharePlan plan_sharing(const Client& client, const CompileOptions& options,
                       bool require_flag = true) {
  SharePlan plan;
  plan.job = distributed::context();
  if (!plan.job || (require_flag && !config::get_bool("KILN_SHARE_BINARY_BETWEEN_HOSTS")))
    return plan;
  std::map<int, int> owner;  // device id → process
  for (const Device& d : client.devices()) owner[d.id] = d.process_index;
  std::set<int> ids;
  for (const auto& row : options.device_assignment)
    for (int id : row) ids.insert(id);
  if (ids.empty())
    for (const auto& [id, process] : owner) ids.insert(id);
  std::set<int> processes;
  for (int id : ids) processes.insert(owner.count(id) ? owner[id] : 0);
  if (processes.size() < 2) return plan;
  plan.active = true;
  plan.leader_process = owner.count(*ids.begin()) ? owner[*ids.begin()] : 0;
  plan.leader = client.process_index() == plan.leader_process;
  return plan;
}

// A shared value names the key it was published for and, with KILN_REMOTE_CACHE_SECRET set, carries
// an HMAC over both, exactly as remote-tier entries do: a follower loads code only from its leader.
//   [32-byte tag] key '\n' body
std::string seal_share_value(const std::string& key, const std::string& body) {
  std::string named = key + "\n" + body;
  std::string secret = *config::get_string("KILN_REMOTE_CACHE_SECRET");
  return secret.empty() ? named : hmac_tag(secret, "share", named) + named;
}

Result<std::string_view> open_share_value(const std::string& key, std::string_view value) {
  std::string secret = *config::get_string("KILN_REMOTE_CACHE_SECRET");
  if (!secret.empty()) {
    if (value.size() < kHmacTagSize ||
        !same_tag(value.substr(0, kHmacTagSize),
                  hmac_tag(secret, "share", value.substr(kHmacTagSize))))
      return corruption("the job's shared executable for key '" + key +
                        "' is not signed with KILN_REMOTE_CACHE_SECRET; refused");
    value.remove_prefix(kHmacTagSize);
  }
  if (value.size() <= key.size() || value.substr(0, key.size()) != key || value[key.size()] != '\n')
    return corruption("the job's shared value under key '" + key +
                      "' names another key (or none); refused");
  return value.substr(key.size() + 1);
}

// The leader publishes the compressed executable, or its compile error so followers fail fast.
void publish_to_followers(const SharePlan& plan, const CacheKey& key,
                          const Result<std::shared_ptr<Executable>>& compiled) {
  std::string body = compiled.ok() ? "X" + zstd_compress((*compiled)->serialize())
                                   : "E" + compiled.status().message();
  Status s = plan.job->kv->set(plan.job->key("share:" + key.key), seal_share_value(key.key, body));
  if (!s.ok())
    log::warning("could not share the executable of '" + key.module_name +
                 "' with the job: " + s.message());
}

Result<std::shared_ptr<Executable>> wait_for_leader(const SharePlan& plan, const CacheKey& key) {
  int64_t timeout_ms = config::get_int("KILN_SHARE_BINARY_BETWEEN_HOSTS_TIMEOUT_MS");
  std::string leader = "process " + std::to_string(plan.leader_process) + " (the leader)";
  auto value = plan.job->kv->blocking_get(plan.job->key("share:" + key.key), timeout_ms);
  if (!value.ok()) {
    return Status(StatusCode::kInternal,
                  "timed out after " + std::to_string(timeout_ms) + " ms waiting for " + leader +
                      " to share the executable of '" + key.module_name + "' with key '" + key.key +
                      "' (" + value.status().message() + ")");
  }
  KILN_ASSIGN_OR_RETURN(std::string_view body, open_share_value(key.key, *value));
  if (body.empty() || body[0] == 'E') {
    return compile_error(leader + " failed to compile '" + key.module_name +
                         "': " + std::string(body.empty() ? "" : body.substr(1)));
  }
  KILN_ASSIGN_OR_RETURN(std::string bytes, zstd_decompress(body.substr(1), size_t{4} << 30));
  return Executable::deserialize(bytes);
}

// Write gates, in the seed's order; each skip says why. Fails only in raise mode.
Status write_entry(const Client& client, CacheStore* store, const CacheKey& key,
                   CompileReport& report, bool expect_pgle,
                   const std::function<std::string()>& payload) {
  const std::string& module = key.module_name;
  bool explain = config::get_bool("KILN_EXPLAIN_CACHE_MISSES");
  bool raise_errors = config::get_bool("KILN_RAISE_PERSISTENT_CACHE_ERRORS");
  auto skip = [&](const std::string& reason, const std::string& counter) {
    report.skipped_write = reason;
    store->count("skipped_writes." + counter);
    std::string line = "Not writing persistent cache entry for '" + module + "': " + reason;
    explain ? log::warning(line) : log::debug(line);
  };
  int64_t writer = config::get_int("KILN_CACHE_WRITER");
  double min_compile_secs = config::get_double("KILN_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS");
  int64_t min_size = config::get_int("KILN_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES");
  // kiln improves on the seed: a leader that is not the writer process still persists what only it
  // compiled.
  if (client.process_index() != writer && report.shared != "leader") {
    skip("process " + std::to_string(client.process_index()) + " is not the cache writer (" +
             std::to_string(writer) + ")",
         "not_writer");
  } else if (report.compile_ms / 1000.0 < min_compile_secs) {
    skip("compile took " + std::to_string(report.compile_ms / 1000.0) +
             " s, less than "
             "KILN_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=" +
             std::to_string(min_compile_secs),
         "compile_time");
  } else {
    CacheEntryMetadata meta;
    meta.key = key.key;
    meta.module_name = module;
    meta.producer_version = kiln_version();
    meta.compile_time_ms = static_cast<int64_t>(report.compile_ms + 0.5);
    meta.created_micros = cache_env()->now_micros();
    meta.components = key.components;
    std::string entry = encode_cache_entry(meta, payload());
    if (static_cast<int64_t>(entry.size()) < min_size) {
      skip("entry of " + std::to_string(entry.size()) +
               " bytes is smaller than "
               "KILN_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=" +
               std::to_string(min_size),
           "entry_size");
    } else {
      Status put = store->put(key.key, entry);
      if (!put.ok()) {
        store->count("write_errors");
        std::string message = "Error writing persistent compilation cache entry for '" + module +
                              "': " + error_type(put) + ": " + put.message();
        if (raise_errors) return Status(put.code(), message);
        log::warning(message);
      } else {
        store->count("writes");
        monitoring::record_event("cache_writes");
        if (expect_pgle)
          log::warning("PERSISTENT CACHE WRITE with key '" + key.key + "' for '" + module +
                       "': this is unexpected because KILN_COMPILATION_CACHE_EXPECT_PGLE is "
                       "set; the run that filled the cache may not have run this program "
                       "enough times");
      }
    }
  }
  return Status();
}

}  // namespace

CompileOptions resolve_compile_options(const CompileOptions& options) {
  CompileOptions o = options;
  if (o.optimization_level == EffortLevel::kUnknown) {
    auto level = parse_effort_level(*config::get_string("KILN_OPTIMIZATION_LEVEL"));
    if (level.ok()) o.optimization_level = *level;
  }
  if (o.memory_fitting_level == EffortLevel::kUnknown) {
    auto level = parse_effort_level(*config::get_string("KILN_MEMORY_FITTING_LEVEL"));
    o.memory_fitting_level = level.ok() ? *level : EffortLevel::kO2;
  }
  o.optimization_level = resolve_effort_level(o.optimization_level);
  if (config::get_bool("KILN_DISABLE_MOST_OPTIMIZATIONS")) o.optimization_level = EffortLevel::kO0;
  std::vector<std::string> passes;
  for (std::string p : o.disabled_passes) {
    p.erase(0, p.find_first_not_of(" \t"));
    p.erase(p.find_last_not_of(" \t") + 1);
    if (!p.empty()) passes.push_back(p);
  }
  std::sort(passes.begin(), passes.end());
  passes.erase(std::unique(passes.begin(), passes.end()), passes.end());
  o.disabled_passes = passes;
  return o;
}

Result<CacheKey> compute_cache_key(const Client& client, const ModuleSource& source,
                                   const CompileOptions& raw_options, CacheStore* store) {
  CompileOptions options = resolve_compile_options(raw_options);
  bool keep_locations = config::get_bool("KILN_COMPILATION_CACHE_INCLUDE_METADATA_IN_KEY");
  std::vector<KeyComponent> rest = environment_components(client, options);

  // Raw-bytes alias: the same bytes under the same other components map to the same key, so a
  // repeat run neither loads MLIR nor parses.
  Sha256 alias_hash;
  alias_hash.update_framed("raw-bytes-alias-v1");
  alias_hash.update_framed(keep_locations ? "locations kept" : "locations stripped");
  alias_hash.update_framed(source.bytes);
  for (const KeyComponent& c : rest) alias_hash.update_framed(c.digest);
  std::string alias_key = "alias-" + alias_hash.hex();
  if (store != nullptr) {
    auto hit = store->get(alias_key);
    if (hit.ok() && hit->has_value()) {
      // "<module name>\n<module digest>\n<module description>"
      std::stringstream lines(**hit);
      std::string name, digest, description;
      if (std::getline(lines, name) && std::getline(lines, digest) &&
          std::getline(lines, description) && digest.size() == 64) {
        std::vector<KeyComponent> components{{"module", description, digest}};
        components.insert(components.end(), rest.begin(), rest.end());
        return assemble_key(name, std::move(components));
      }
    }
  }
  // Text is canonicalised by a scan (no MLIR); bytecode, and text the scan does not handle, by
  // parsing. The form is hashed too, so the two never share a key.
  CanonicalModule canonical;
  std::string form = "canonical text";
  KILN_ASSIGN_OR_RETURN(ModuleSource mlir, source.mlir());
  if (auto text = canonicalize_mlir_text(mlir.bytes, keep_locations)) {
    canonical.module_name = std::move(text->module_name);
    canonical.text = std::move(text->text);
  } else {
    KILN_ASSIGN_OR_RETURN(canonical, client.canonicalize(mlir, keep_locations));
    form = "canonical bytecode";
  }
  Sha256 module_hash;
  module_hash.update_framed(keep_locations ? "locations kept" : "locations stripped");
  module_hash.update_framed(form);
  module_hash.update_framed(canonical.text);
  std::string description = "module '" + canonical.module_name + "', " +
                            std::to_string(canonical.text.size()) + " " + form +
                            " bytes, locations " + (keep_locations ? "kept" : "stripped");
  std::vector<KeyComponent> components{{"module", description, module_hash.hex()}};
  components.insert(components.end(), rest.begin(), rest.end());
  CacheKey key = assemble_key(canonical.module_name, std::move(components));
  if (store != nullptr) {
    (void)store->put(alias_key, canonical.module_name + "\n" + key.components[0].digest + "\n" +
                                    description + "\n");
  }
  return key;
}

Result<CacheStore*> persistent_cache_store() {
  if (!cache_enabled()) return static_cast<CacheStore*>(nullptr);
  CacheState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  KILN_RETURN_IF_ERROR(open_store_locked(s));
  if (s.tiered) return static_cast<CacheStore*>(s.tiered.get());
  return static_cast<CacheStore*>(s.store.get());
}

Result<DirectoryStore*> local_cache_store() {
  if (!cache_enabled()) return invalid_argument("the compilation cache is disabled");
  CacheState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  KILN_RETURN_IF_ERROR(open_store_locked(s));
  return s.store.get();
}

Result<std::shared_ptr<Executable>> compile_or_get_cached(const Client& client,
                                                          const ModuleSource& source,
                                                          const CompileOptions& raw_options,
                                                          CompileReport* report_out,
                                                          PgleProfiler* profiler) {
  CompileReport local_report;
  CompileReport& report = report_out ? *report_out : local_report;
  report = CompileReport();
  CompileOptions options = resolve_compile_options(raw_options);
  // A profile that cannot be used is refused here, loudly, and the plain build is made: it must
  // never be stored under the PGLE key.
  if (!options.fdo_profile.empty() && options.fdo_profile != kPgleProfiledSentinel) {
    if (auto profile = decode_fdo_profile(options.fdo_profile); !profile.ok()) {
      log::warning("the FDO profile given for " + source.name + " cannot be used: " +
                   profile.status().message() + "; compiling the plain build without it");
      options.fdo_profile.clear();
      report.pgle = "profile rejected";
    }
  }
  bool auto_pgle =
      config::get_bool("KILN_ENABLE_PGLE") && config::get_int("KILN_PGLE_PROFILING_RUNS") > 0;
  bool expect_pgle = config::get_bool("KILN_COMPILATION_CACHE_EXPECT_PGLE");
  // The first pass of PGLE is instrumented, so its options (and key) differ from the plain
  // build's; like the seed, expect-PGLE runs use them too so they find what PGLE runs stored.
  bool pgle_rules = (auto_pgle || expect_pgle) && report.pgle.empty();
  bool with_profile = auto_pgle && !options.fdo_profile.empty() && report.pgle.empty();
  CompileOptions first_pass = options;
  if (pgle_rules) first_pass.env_option_overrides.emplace_back(kPgleInstrumentOverride, "true");
  CacheState& s = state();
  bool explain = config::get_bool("KILN_EXPLAIN_CACHE_MISSES");
  bool log_compiles = config::get_bool("KILN_LOG_COMPILES");
  bool raise_errors = config::get_bool("KILN_RAISE_PERSISTENT_CACHE_ERRORS");

  if (!cache_enabled()) {
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      if (!s.task_event_sent) {
        s.task_event_sent = true;
        monitoring::record_event("task_disabled_cache");
      }
    }
    report.compiled = true;
    if (pgle_rules) report.pgle = with_profile ? "optimised" : "first pass";
    return compile_uncached(client, source, with_profile ? options : first_pass,
                            &report.compile_ms);
  }

  auto store_or = persistent_cache_store();
  if (!store_or.ok()) {
    log::warning("the persistent compilation cache is unavailable (" + store_or.status().message() +
                 "); compiling without it");
    if (raise_errors) return store_or.status();
    report.compiled = true;
    return compile_uncached(client, source, options, &report.compile_ms);
  }
  CacheStore* store = *store_or;

  auto key_start = Clock::now();
  Result<CacheKey> key_or = internal_error("no cache key");
  std::optional<std::pair<std::string, std::string>> prefetched;  // key, entry bytes
  if (!pgle_rules) {
    key_or = compute_cache_key(client, source, options, store);
  } else {
    // The seed's three cases. The PGLE-optimised entry lives under the key whose profile is the
    // fixed sentinel, so it does not depend on the profile's bytes.
    CompileOptions sentinel = options;
    sentinel.fdo_profile = kPgleProfiledSentinel;
    auto pgle_key = compute_cache_key(client, source, sentinel, store);
    auto plain_key = compute_cache_key(client, source, first_pass, store);
    key_or = plain_key;
    if (pgle_key.ok() && plain_key.ok()) {
      // An entry found here is kept, so a case-1 hit does not read the store twice.
      auto present = [&](const std::string& key) {
        auto bytes = store->get(key);
        if (!bytes.ok() || !bytes->has_value()) return false;
        prefetched.emplace(key, std::move(**bytes));
        return true;
      };
      if (present(pgle_key->key)) {
        // Case 1: use it, and stop profiling.
        if (expect_pgle)
          log::info("PGLE-optimized " + pgle_key->module_name + " loaded from compilation cache");
        if (profiler != nullptr) profiler->disable();
        report.pgle = "optimised (cached)";
        key_or = pgle_key;
      } else {
        if (expect_pgle && present(plain_key->key)) {
          // Case 1b: the user said the PGLE-optimised entry would be there.
          log::warning("PERSISTENT CACHE MISS for PGLE-optimized " + pgle_key->module_name +
                       " despite non-PGLE hit; it may not have been executed enough times when "
                       "the cache was populated");
        }
        if (with_profile) {
          // Case 2: every process of a job compiles with the same (the leader's) profile.
          CompileOptions no_profile = options;
          no_profile.fdo_profile.clear();
          auto empty_key = compute_cache_key(client, source, no_profile, store);
          if (empty_key.ok()) {
            KILN_ASSIGN_OR_RETURN(
                options.fdo_profile,
                sync_fdo_profile(client, options, *empty_key, std::move(options.fdo_profile)));
          }
          report.pgle = "optimised";
          report.profile_digest = sha256_hex(options.fdo_profile);
          key_or = pgle_key;
        } else {
          // Case 3: still collecting (or only expecting): the instrumented first pass.
          report.pgle = "first pass";
          options = first_pass;
        }
      }
    } else if (!with_profile) {
      options = first_pass;
    }
  }
  report.key_ms = seconds_since(key_start) * 1000;
  if (!key_or.ok()) {
    // A module that does not parse fails in the compiler with the user-facing diagnostics.
    if (key_or.status().code() != StatusCode::kInvalidArgument)
      log::error("cannot compute the compilation cache key: " + key_or.status().to_string());
    report.compiled = true;
    return compile_uncached(client, source, options, &report.compile_ms);
  }
  const CacheKey& key = *key_or;
  report.key = key.key;
  report.module_name = key.module_name;

  // One compile per key in this process; the in-memory executable cache answers repeats.
  std::unique_lock<std::mutex> lock(s.mutex);
  s.in_flight_done.wait(lock, [&] { return s.in_flight.count(key.key) == 0; });
  if (auto exe = memory_get(s, key.key)) {
    report.cache = "hit";
    report.from_memory = true;
    return exe;
  }
  s.in_flight.insert(key.key);
  bool check_contents = config::get_bool("KILN_COMPILATION_CACHE_CHECK_CONTENTS") &&
                        s.verified_keys.insert(key.key).second;
  if (!s.task_event_sent) {
    s.task_event_sent = true;
    monitoring::record_event("tasks_using_cache");
  }
  lock.unlock();
  struct Release {
    CacheState& s;
    const std::string& key;
    ~Release() {
      std::lock_guard<std::mutex> l(s.mutex);
      s.in_flight.erase(key);
      s.in_flight_done.notify_all();
    }
  } release{s, key.key};

  monitoring::record_event("compile_requests_use_cache");
  const std::string& module = key.module_name;

  // Read.
  std::optional<DecodedCacheEntry> stored;
  auto read_start = Clock::now();
  Result<std::optional<std::string>> bytes =
      prefetched && prefetched->first == key.key
          ? Result<std::optional<std::string>>(
                std::optional<std::string>(std::move(prefetched->second)))
          : store->get(key.key);
  if (!bytes.ok()) {
    store->count("read_errors");
    std::string message = "Error reading persistent compilation cache entry for '" + module +
                          "': " + error_type(bytes.status()) + ": " + bytes.status().message();
    if (raise_errors) return Status(bytes.status().code(), message);
    log::warning(message);
  } else if (bytes->has_value()) {
    auto decoded = decode_cache_entry(**bytes, key.key);
    if (!decoded.ok()) {
      monitoring::record_event("cache_corrupt");
      store->count("corrupt");
      log::warning("Persistent compilation cache entry for '" + module + "' with key '" + key.key +
                   "' is corrupt (" + decoded.status().message() + "); recompiling");
      (void)store->remove(key.key);  // the recompile below writes a good one
    } else {
      stored = std::move(*decoded);
    }
  }

  if (stored && !check_contents) {
    auto exe = Executable::deserialize(stored->payload);
    if (exe.ok()) {
      double retrieval = seconds_since(read_start);
      report.cache = "hit";
      report.retrieval_ms = retrieval * 1000;
      store->count("hits");
      std::string line = "Persistent compilation cache hit for '" + module + "'";
      log_compiles ? log::warning(line) : log::debug(line);
      monitoring::record_event("cache_hits");
      monitoring::record_duration("compile_time_saved_sec",
                                  stored->metadata.compile_time_ms / 1000.0 - retrieval);
      monitoring::record_duration("cache_retrieval_time_sec", retrieval);
      std::lock_guard<std::mutex> l(s.mutex);
      memory_put(s, key.key, *exe);
      return *exe;
    }
    monitoring::record_event("cache_corrupt");
    store->count("corrupt");
    log::warning("Persistent compilation cache entry for '" + module + "' does not load (" +
                 exe.status().message() + "); recompiling");
    (void)store->remove(key.key);
    stored.reset();
  }

  // Miss: compile.
  report.cache = "miss";
  std::string miss =
      "PERSISTENT COMPILATION CACHE MISS for '" + module + "' with key '" + key.key + "'";
  explain ? log::warning(miss) : log::debug(miss);
  monitoring::record_event("cache_misses");
  store->count("misses");

  // Several processes: the leader (owner of the lowest-id device) compiles and shares.
  SharePlan share = plan_sharing(client, options);
  if (share.active && !share.leader) {
    report.shared = "follower";
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<Executable> shared_exe, wait_for_leader(share, key));
    std::lock_guard<std::mutex> l(s.mutex);
    memory_put(s, key.key, shared_exe);
    return shared_exe;
  }
  if (log_compiles) log::warning("Compiling '" + module + "'");
  auto compiled = compile_uncached(client, source, options, &report.compile_ms);
  report.compiled = true;
  if (share.active) {
    report.shared = "leader";
    publish_to_followers(share, key, compiled);
  }
  if (!compiled.ok()) return compiled.status();
  std::shared_ptr<Executable> exe = std::move(compiled).value();

  if (check_contents && stored) {
    auto previous = Executable::deserialize(stored->payload);
    if (!previous.ok() || (*previous)->code_bytes() != exe->code_bytes()) {
      return Status(StatusCode::kCorruption,
                    "cache verification failed for '" + module + "' with key '" + key.key +
                        "': the stored executable differs from a fresh compile of the same key");
    }
  }

  KILN_RETURN_IF_ERROR(
      write_entry(client, store, key, report, expect_pgle, [&] { return exe->serialize(); }));
  std::lock_guard<std::mutex> l(s.mutex);
  memory_put(s, key.key, exe);
  return exe;
}

Result<std::string> compile_or_get_cached_serialized(const Client& client,
                                                     const ModuleSource& source,
                                                     const CompileOptions& raw_options,
                                                     CompileReport* report_out) {
  CompileReport local_report;
  CompileReport& report = report_out ? *report_out : local_report;
  report = CompileReport();
  CompileOptions options = resolve_compile_options(raw_options);
  auto compile = [&]() -> Result<std::string> {
    auto start = Clock::now();
    auto bytes = client.compile_serialized(source, options);
    report.compile_ms = seconds_since(start) * 1000;
    report.compiled = true;
    if (!bytes.ok()) return run_error_handlers(bytes.status());
    return bytes;
  };
  KILN_ASSIGN_OR_RETURN(CacheStore * store, persistent_cache_store());
  if (store == nullptr) return compile();
  KILN_ASSIGN_OR_RETURN(CacheKey key, compute_cache_key(client, source, options, store));
  report.key = key.key;
  report.module_name = key.module_name;
  auto bytes = store->get(key.key);
  if (bytes.ok() && bytes->has_value()) {
    auto decoded = decode_cache_entry(**bytes, key.key);
    if (decoded.ok()) {
      report.cache = "hit";
      store->count("hits");
      return std::move(decoded->payload);
    }
    store->count("corrupt");
    (void)store->remove(key.key);
  }
  report.cache = "miss";
  store->count("misses");
  KILN_ASSIGN_OR_RETURN(std::string serialized, compile());
  KILN_RETURN_IF_ERROR(write_entry(client, store, key, report,
                                   config::get_bool("KILN_COMPILATION_CACHE_EXPECT_PGLE"),
                                   [&] { return serialized; }));
  return serialized;
}

Result<std::string> sync_fdo_profile(const Client& client, const CompileOptions& options,
                                     const CacheKey& empty_profile_key, std::string profile) {
  SharePlan plan = plan_sharing(client, options, /*require_flag=*/false);
  if (!plan.active) return profile;
  std::string sync_key = plan.job->key("fdo:" + empty_profile_key.key + "_fdo_sync");
  if (plan.leader) {
    KILN_RETURN_IF_ERROR(plan.job->kv->set(sync_key, profile));
    return profile;
  }
  int64_t timeout_ms = config::get_int("KILN_SHARE_BINARY_BETWEEN_HOSTS_TIMEOUT_MS");
  auto shared = plan.job->kv->blocking_get(sync_key, timeout_ms);
  if (!shared.ok()) {
    return Status(StatusCode::kInternal,
                  "timed out after " + std::to_string(timeout_ms) + " ms waiting for process " +
                      std::to_string(plan.leader_process) + " (the leader) to share the FDO " +
                      "profile of '" + empty_profile_key.module_name + "'");
  }
  return std::move(*shared);
}

int register_compile_error_handler(CompileErrorHandler handler) {
  CacheState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.error_handlers[s.next_handler_id] = std::move(handler);
  return s.next_handler_id++;
}

void unregister_compile_error_handler(int id) {
  CacheState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.error_handlers.erase(id);
}

void set_persistent_cache_env(Env* env) {
  CacheState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.env = env;
  s.tiered.reset();
  s.store.reset();
  s.store_config.clear();
}

void reset_compilation_cache_state() {
  CacheState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.lru.clear();
  s.by_key.clear();
  s.verified_keys.clear();
  s.task_event_sent = false;
  s.tiered.reset();
  s.store.reset();
  s.store_config.clear();
}

}  // namespace kiln
