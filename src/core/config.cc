#include "kiln/config.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "kiln/options.h"

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
      {"KILN_CRASH_AT_STEP", "",
       "for crash tests: the process kills itself (SIGKILL) on reaching this named step "
       "(src/core/crash_point.h lists them)",
       false},
      {"KILN_VERIFY_RUNTIME", "false",
       "insert run-time checks (out-of-bounds accesses, bad casts, ...) that stop the program with "
       "mlir-runner's messages",
       true},
      {"KILN_VERIFY_RUNTIME_CONTINUE", "false",
       "with KILN_VERIFY_RUNTIME: a failed check prints its message and the program goes on (as "
       "mlir-opt -test-cf-assert), so one run shows every failure",
       true},
      {"KILN_MATRIX_DEFAULT_LAYOUT", "column-major",
       "the layout LLVM's matrix intrinsics (llvm.intr.matrix.*) assume (mlir-runner "
       "-matrix-default-layout)",
       true},
      {"KILN_MATRIX_ALLOW_CONTRACT", "false",
       "let matrix intrinsics' multiplies and adds fuse into fused multiply-adds (mlir-runner "
       "-matrix-allow-contract)",
       true},
      {"KILN_COMPILER_DETAILED_LOGGING_MIN_OPS", "10",
       "modules with at least this many operations get detailed compile logs", false},
      {"KILN_LOG_LEVEL", "warning", "debug, info, warning or error", false},
      {"KILN_COMPILER_ENABLE_REMAT_PASS", "", "false: disable rematerialising fusion", false},
      {"KILN_PROFILE_VERSION", "0",
       "FDO profile version: a positive value wins; otherwise the registered hook's version, or -1 "
       "(do not retrieve)",
       false},
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
      {"KILN_NUM_THREADS", "0",
       "threads a compiled program's parallel loops run on (0: the CPUs this process may use); "
       "read at run time, not part of the key",
       false},
      {"KILN_SHARE_BINARY_BETWEEN_HOSTS", "false",
       "in a multi-process job, the leader compiles and the others load its executable", false},
      {"KILN_SHARE_BINARY_BETWEEN_HOSTS_TIMEOUT_MS", "1200000",
       "how long followers wait for the leader's executable", false},
      {"KILN_CPU_DEVICE_COUNT", "1", "virtual CPU devices a client has", false},
      {"KILN_COMPILER_LIBRARY", "",
       "path of libkiln_compiler.so (default: next to libkiln), loaded on the first compile",
       false},
      {"KILN_ONNX_IMPORT_LIBRARY", "",
       "path of libkiln_onnx_import.so (default: next to libkiln), loaded on an ONNX miss", false},
      {"KILN_COORDINATOR", "",
       "redis://host:port of a multi-process job; with it, the process joins the job at start",
       false},
      {"KILN_NUM_PROCESSES", "1", "processes in the job", false},
      {"KILN_PROCESS_ID", "0", "this process's index in the job", false},
      {"KILN_JOB_ID", "", "names the job, so two jobs can share one coordinator", false},
  };
  return flags;
}

// What each flag's text must be. Flags not listed whose default is "true"/"false" are booleans;
// the rest are free text.
struct ValueRule {
  enum Kind { kText, kBool, kInt, kNumber, kChoice, kEffortLevel } kind = kText;
  double min = 0, max = 0;
  std::vector<std::string> choices;
};

ValueRule rule_for(const FlagInfo& flag) {
  constexpr double kBig = 9.0e18;  // what an int64 holds, near enough for a bound
  static const std::map<std::string, ValueRule> rules = {
      {"KILN_COMPILATION_CACHE_MAX_SIZE", {ValueRule::kInt, -1, kBig, {}}},
      {"KILN_COMPILATION_CACHE_MAX_ENTRIES", {ValueRule::kInt, -1, kBig, {}}},
      {"KILN_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", {ValueRule::kNumber, 0, 1e9, {}}},
      {"KILN_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", {ValueRule::kInt, 0, kBig, {}}},
      {"KILN_CACHE_WRITER", {ValueRule::kInt, -1, 65535, {}}},
      {"KILN_OPTIMIZATION_LEVEL", {ValueRule::kEffortLevel, 0, 0, {}}},
      {"KILN_MEMORY_FITTING_LEVEL", {ValueRule::kEffortLevel, 0, 0, {}}},
      {"KILN_COMPILER_DETAILED_LOGGING_MIN_OPS", {ValueRule::kInt, 0, kBig, {}}},
      {"KILN_LOG_LEVEL", {ValueRule::kChoice, 0, 0, {"debug", "info", "warning", "error"}}},
      {"KILN_MATRIX_DEFAULT_LAYOUT", {ValueRule::kChoice, 0, 0, {"column-major", "row-major"}}},
      {"KILN_COMPILER_ENABLE_REMAT_PASS", {ValueRule::kChoice, 0, 0, {"", "true", "false"}}},
      {"KILN_PROFILE_VERSION", {ValueRule::kInt, -1, kBig, {}}},
      {"KILN_REMOTE_CACHE_TIMEOUT_MS", {ValueRule::kInt, 1, 3600000, {}}},
      {"KILN_PGLE_PROFILING_RUNS", {ValueRule::kInt, 0, 1000000, {}}},
      {"KILN_NUM_THREADS", {ValueRule::kInt, 0, 1024, {}}},
      {"KILN_PGLE_WARMUP_RUNS", {ValueRule::kInt, 0, 1000000, {}}},
      {"KILN_PGLE_AGGREGATION_PERCENTILE", {ValueRule::kNumber, 0, 100, {}}},
      {"KILN_PGLE_COLD_SHARE_PERCENT", {ValueRule::kNumber, 0, 100, {}}},
      {"KILN_PGLE_COLD_MAX_NS", {ValueRule::kInt, 0, kBig, {}}},
      {"KILN_SHARE_BINARY_BETWEEN_HOSTS_TIMEOUT_MS", {ValueRule::kInt, 0, 86400000, {}}},
      {"KILN_CPU_DEVICE_COUNT", {ValueRule::kInt, 1, 4096, {}}},
      {"KILN_NUM_PROCESSES", {ValueRule::kInt, 1, 65536, {}}},
      {"KILN_PROCESS_ID", {ValueRule::kInt, 0, 65535, {}}},
  };
  if (auto it = rules.find(flag.name); it != rules.end()) return it->second;
  if (flag.default_value == "true" || flag.default_value == "false")
    return {ValueRule::kBool, 0, 0, {}};
  return {};
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), ::tolower);
  return text;
}

std::string format_bound(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.15g", v);
  return text;
}

Status check_value(const FlagInfo& flag, const std::string& value) {
  ValueRule rule = rule_for(flag);
  auto bad = [&](const std::string& want) {
    return invalid_argument(flag.name + "='" + value + "' is not valid: " + want);
  };
  switch (rule.kind) {
    case ValueRule::kText:
      return Status();
    case ValueRule::kBool: {
      static const char* kWords[] = {"1", "0", "true", "false", "yes", "no", "on", "off"};
      for (const char* w : kWords)
        if (lower(value) == w) return Status();
      return bad("use true or false");
    }
    case ValueRule::kInt:
    case ValueRule::kNumber: {
      std::string range = " from " + format_bound(rule.min) + " to " + format_bound(rule.max);
      char* end = nullptr;
      errno = 0;
      double v = rule.kind == ValueRule::kInt
                     ? static_cast<double>(std::strtoll(value.c_str(), &end, 10))
                     : std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v))
        return bad(std::string(rule.kind == ValueRule::kInt ? "use an integer" : "use a number") +
                   range);
      if (v < rule.min || v > rule.max) return bad("use a value" + range);
      return Status();
    }
    case ValueRule::kChoice: {
      std::string listed;
      for (const std::string& c : rule.choices) {
        if (lower(value) == c) return Status();
        if (!c.empty()) listed += (listed.empty() ? "" : ", ") + c;
      }
      return bad("use one of " + listed);
    }
    case ValueRule::kEffortLevel: {
      auto level = parse_effort_level(value);
      if (!level.ok()) return bad(level.status().message());
      return Status();
    }
  }
  return Status();
}

const FlagInfo* find_flag(const std::string& name) {
  for (const FlagInfo& f : flag_table())
    if (f.name == name) return &f;
  return nullptr;
}

struct Registry {
  std::mutex mutex;
  std::map<std::string, std::string> values;   // resolved: override > environment > default
  std::map<std::string, std::string> sources;  // where each value came from
  bool loaded = false;

  std::vector<Status> environment_errors;
  std::map<std::string, Status> environment_error_of;  // by flag name

  // A value from the environment that is not valid is not used (the default is), and is
  // reported by check_environment, which the command line turns into an error.
  void load_locked() {
    if (loaded) return;
    environment_errors.clear();
    environment_error_of.clear();
    for (const FlagInfo& f : flag_table()) {
      const char* env = std::getenv(f.name.c_str());
      values[f.name] = f.default_value;
      sources[f.name] = "default";
      if (env == nullptr) continue;
      if (Status valid = check_value(f, env); !valid.ok()) {
        environment_errors.push_back(valid);
        environment_error_of[f.name] = valid;
      } else {
        values[f.name] = env;
        sources[f.name] = "environment";
      }
    }
    loaded = true;
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

bool parse_bool(const std::string& text) {
  std::string t = lower(text);
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
  KILN_RETURN_IF_ERROR(check_value(*find_flag(name), value));
  it->second = value;
  r.sources[name] = "set";
  return Status();
}

Status check_environment() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.load_locked();
  if (r.environment_errors.empty()) return Status();
  std::string message = r.environment_errors[0].message();
  if (r.environment_errors.size() > 1)
    message += " (and " + std::to_string(r.environment_errors.size() - 1) + " more)";
  return invalid_argument("in the environment: " + message);
}

Status check_environment_of(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.load_locked();
  auto it = r.environment_error_of.find(name);
  if (it == r.environment_error_of.end()) return Status();
  return invalid_argument("in the environment: " + it->second.message());
}

void reset() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.loaded = false;
  r.values.clear();
  r.sources.clear();
}

const std::vector<FlagInfo>& all_flags() { return flag_table(); }

std::vector<FlagState> flag_states() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.load_locked();
  std::vector<FlagState> states;
  for (const FlagInfo& f : flag_table()) {
    ValueRule rule = rule_for(f);
    std::string type = "text";
    if (rule.kind == ValueRule::kBool) type = "boolean";
    if (rule.kind == ValueRule::kInt || rule.kind == ValueRule::kNumber)
      type = std::string(rule.kind == ValueRule::kInt ? "integer" : "number") + " from " +
             format_bound(rule.min) + " to " + format_bound(rule.max);
    if (rule.kind == ValueRule::kEffortLevel) type = "effort level (O0..O3, UNKNOWN)";
    if (rule.kind == ValueRule::kChoice) {
      type = "one of ";
      for (size_t k = 0; k < rule.choices.size(); ++k)
        type += (k ? ", " : "") + (rule.choices[k].empty() ? "\"\"" : rule.choices[k]);
    }
    std::string in_key = f.affects_codegen ? "as a flag" : "no";
    static const std::map<std::string, std::string> kOtherwise = {
        {"KILN_OPTIMIZATION_LEVEL", "through the compile options"},
        {"KILN_MEMORY_FITTING_LEVEL", "through the compile options"},
        {"KILN_DISABLE_MOST_OPTIMIZATIONS", "through the compile options"},
        {"KILN_COMPILER_ENABLE_REMAT_PASS", "through the compile options"},
        {"KILN_PROFILE_VERSION", "through the compile options"},
        {"KILN_CACHE_KEY_TAG", "as the key's tag"},
        {"KILN_COMPILATION_CACHE_INCLUDE_METADATA_IN_KEY", "in how the module is hashed"},
    };
    if (auto it = kOtherwise.find(f.name); it != kOtherwise.end()) in_key = it->second;
    states.push_back({f, type, r.values[f.name], r.sources[f.name], in_key});
  }
  return states;
}

std::map<std::string, std::string> codegen_flag_values() {
  std::map<std::string, std::string> out;
  for (const FlagInfo& f : flag_table())
    if (f.affects_codegen) out[f.name] = *get_string(f.name);
  return out;
}

}  // namespace kiln::config
