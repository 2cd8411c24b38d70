#include "kiln/config.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>

namespace kiln::config {
namespace {

const std::vector<FlagInfo>& flag_table() {
  static const std::vector<FlagInfo> flags = {
      {"KILN_ENABLE_COMPILATION_CACHE", "true", "use the persistent compilation cache", false},
      {"KILN_CACHE_DIR", "", "cache directory (default $XDG_CACHE_HOME/kiln or ~/.cache/kiln)",
       false},
      {"KILN_COMPILATION_CACHE_MAX_SIZE", "-1", "cache size bound in bytes; -1 unbounded, 0 off",
       false},
      {"KILN_COMPILATION_CACHE_MAX_ENTRIES", "-1", "cache entry count bound; -1 unbounded", false},
      {"KILN_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0",
       "only cache programs that took at least this long to compile", false},
      {"KILN_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0", "only cache entries at least this big",
       false},
      {"KILN_RAISE_PERSISTENT_CACHE_ERRORS", "false", "cache read/write errors fail the compile",
       false},
      {"KILN_COMPILATION_CACHE_CHECK_CONTENTS", "false",
       "recompile on the first lookup of each key and compare with the stored entry", false},
      {"KILN_EXPLAIN_CACHE_MISSES", "false", "log cache misses and skipped writes as warnings",
       false},
      {"KILN_LOG_COMPILES", "false", "log every compile and cache hit as a warning", false},
      {"KILN_CACHE_KEY_TAG", "", "extra text mixed into every cache key", false},
      {"KILN_COMPILATION_CACHE_INCLUDE_METADATA_IN_KEY", "false",
       "keep debug locations in the module's key", false},
      {"KILN_CACHE_TRUST_SHARED_DIR", "false",
       "load code from a cache directory other users own or may write (a shared team cache)",
       false},
      {"KILN_CACHE_WRITER", "0", "the process index allowed to write the cache", false},
      // These three reach the key through the resolved compile options, not as flags.
      {"KILN_OPTIMIZATION_LEVEL", "UNKNOWN", "default effort level", false},
      {"KILN_MEMORY_FITTING_LEVEL", "O2", "default memory fitting effort level", false},
      {"KILN_DISABLE_MOST_OPTIMIZATIONS", "false", "compile at O0 with expensive passes off",
       false},
      {"KILN_DUMP_IR_TO", "", "dump the module at each compile stage into this directory", false},
      {"KILN_COMPILER_DETAILED_LOGGING_MIN_OPS", "10",
       "modules with at least this many operations get detailed compile logs", false},
      {"KILN_LOG_LEVEL", "warning", "debug, info, warning or error", false},
      {"KILN_COMPILER_ENABLE_REMAT_PASS", "", "false: disable rematerialising fusion", false},
      {"KILN_PROFILE_VERSION", "0", "FDO profile version (0 none, -1 never fetch)", false},
      {"KILN_REMOTE_CACHE", "", "remote cache tier: redis://[user:pass@]host:port[/db]", false},
      {"KILN_REMOTE_CACHE_SECRET", "", "HMAC secret every remote entry must be signed with", false},
      {"KILN_REMOTE_CACHE_TIMEOUT_MS", "500", "per-request timeout of the remote cache", false},
      {"KILN_REMOTE_CACHE_READ_ONLY", "false", "never write to the remote cache", false},
      {"KILN_ENABLE_PGLE", "false",
       "profile-guided recompilation: profile the first runs, then recompile with the profile",
       false},
      {"KILN_PGLE_PROFILING_RUNS", "3", "runs to profile before the PGLE recompile", false},
      {"KILN_PGLE_WARMUP_RUNS", "1",
       "executions of the first pass before the profiling runs, not measured (cold caches and "
       "pages would dominate); 0 counts like the seed",
       false},
      {"KILN_PGLE_AGGREGATION_PERCENTILE", "90",
       "percentile at which per-kernel costs of the profiling runs are aggregated", false},
      {"KILN_COMPILATION_CACHE_EXPECT_PGLE", "false",
       "expect PGLE-optimised entries in the cache; warn when one is missing or written", false},
      {"KILN_PGLE_COLD_SHARE_PERCENT", "2",
       "PGLE compiles the cheapest kernels, together up to this share of the run time, at low "
       "effort",
       true},
      {"KILN_PGLE_COLD_MAX_NS", "10000",
       "only kernels costing at most this many nanoseconds may be compiled at low effort", true},
      {"KILN_SHARE_BINARY_BETWEEN_HOSTS", "false",
       "in a multi-process job, the leader compiles and the others load its executable", false},
      {"KILN_SHARE_BINARY_BETWEEN_HOSTS_TIMEOUT_MS", "1200000",
       "how long followers wait for the leader's executable", false},
  };
  return flags;
}

struct Registry {
  std::mutex mutex;
  std::map<std::string, std::string> values;  // resolved: override > environment > default
  bool loaded = false;

  void load_locked() {
    if (loaded) return;
    for (const FlagInfo& f : flag_table()) {
      const char* env = std::getenv(f.name.c_str());
      values[f.name] = env ? env : f.default_value;
    }
    loaded = true;
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

bool parse_bool(const std::string& text) {
  std::string t = text;
  std::transform(t.begin(), t.end(), t.begin(), ::tolower);
  return t == "1" || t == "true" || t == "yes" || t == "on";
}

}  // namespace

Result<std::string> get_string(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.load_locked();
  auto it = r.values.find(name);
  if (it == r.values.end()) return not_found("unknown kiln flag " + name);
  return it->second;
}

bool get_bool(const std::string& name) {
  auto v = get_string(name);
  return v.ok() && parse_bool(*v);
}

int64_t get_int(const std::string& name) {
  auto v = get_string(name);
  if (!v.ok() || v->empty()) return 0;
  return std::strtoll(v->c_str(), nullptr, 10);
}

double get_double(const std::string& name) {
  auto v = get_string(name);
  if (!v.ok() || v->empty()) return 0;
  return std::strtod(v->c_str(), nullptr);
}

Status set(const std::string& name, const std::string& value) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.load_locked();
  auto it = r.values.find(name);
  if (it == r.values.end()) return invalid_argument("unknown kiln flag " + name);
  it->second = value;
  return Status();
}

void reset() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.loaded = false;
  r.values.clear();
}

const std::vector<FlagInfo>& all_flags() { return flag_table(); }

std::map<std::string, std::string> codegen_flag_values() {
  std::map<std::string, std::string> out;
  for (const FlagInfo& f : flag_table())
    if (f.affects_codegen) out[f.name] = *get_string(f.name);
  return out;
}

}  // namespace kiln::config
