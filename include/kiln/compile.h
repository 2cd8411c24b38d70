// compile_or_get_cached: one call that returns a loaded executable — from this process's memory,
// from the persistent cache, or by compiling (and then storing it). Behaviour follows JAX's
// compiler interface, with kiln's improvements (see docs/CACHE.md).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "kiln/cache.h"
#include "kiln/client.h"
#include "kiln/compilation_cache.h"
#include "kiln/executable.h"
#include "kiln/export.h"
#include "kiln/options.h"
#include "kiln/pgle.h"
#include "kiln/status.h"

namespace kiln {

// Whether the persistent cache was in play, and whether it held the executable.
enum class CacheOutcome { kOff, kMiss, kHit };
// This process's part in a compile shared by the processes of a job.
enum class SharedRole { kNone, kLeader, kFollower };
// PGLE's part in a compile: none, the instrumented first pass, the build optimised with a
// profile (compiled now, or found in the cache), or a profile refused (compiled without it).
enum class PgleStage { kNone, kFirstPass, kOptimised, kOptimisedCached, kProfileRejected };
// Why a compiled executable was not written to the persistent cache: it was (kNone), this process
// is not the job's cache writer, the compile was faster than
// KILN_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS, or the entry smaller than
// KILN_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES.
enum class WriteSkip { kNone, kNotWriter, kCompileTime, kEntrySize };

// The words logs, `kiln run`, --json and Python use: "off" / "miss" / "hit"; "" / "leader" /
// "follower"; "" / "first pass" / "optimised" / "optimised (cached)" / "profile rejected";
// "" / "not_writer" / "compile_time" / "entry_size" (the cache's skipped_writes.<reason>
// counters).
KILN_EXPORT const char* to_string(CacheOutcome outcome);
KILN_EXPORT const char* to_string(SharedRole role);
KILN_EXPORT const char* to_string(PgleStage stage);
KILN_EXPORT const char* to_string(WriteSkip skip);
inline std::ostream& operator<<(std::ostream& os, CacheOutcome v) { return os << to_string(v); }
inline std::ostream& operator<<(std::ostream& os, SharedRole v) { return os << to_string(v); }
inline std::ostream& operator<<(std::ostream& os, PgleStage v) { return os << to_string(v); }
inline std::ostream& operator<<(std::ostream& os, WriteSkip v) { return os << to_string(v); }

// What happened in one compile_or_get_cached call.
struct KILN_EXPORT CompileReport {
  CacheOutcome cache = CacheOutcome::kOff;
  bool from_memory = false;  // the hit came from this process's executable cache
  std::string key;
  std::string module_name;
  WriteSkip write_skip = WriteSkip::kNone;  // why a compiled executable was not stored
  std::string skipped_write;                // the same, in words with the numbers ("" if stored)
  bool compiled = false;                    // this process ran the compiler
  SharedRole shared = SharedRole::kNone;
  double key_ms = 0;
  double retrieval_ms = 0;
  double compile_ms = 0;
  PgleStage pgle = PgleStage::kNone;
  // SHA-256 of the FDO profile this compile used (after sharing in a job); "" without one.
  std::string profile_digest;
};

// The options actually compiled with: UNKNOWN levels resolved from KILN_OPTIMIZATION_LEVEL /
// KILN_MEMORY_FITTING_LEVEL, KILN_DISABLE_MOST_OPTIMIZATIONS applied, disabled passes trimmed,
// de-duplicated and sorted.
KILN_EXPORT CompileOptions resolve_compile_options(const CompileOptions& options);

// The pass pipeline `level` (resolved as resolve_compile_options does) runs, one step per line:
// each pass list as an mlir-opt --pass-pipeline, kiln's own steps by name between them, and the
// LLVM optimisation level last (what `kiln pipeline` prints).
KILN_EXPORT Result<std::string> describe_pipeline(EffortLevel level,
                                                  const std::vector<std::string>& disabled_passes);

// The key of `source` under `options` on `client`'s devices. Loads the compiler library only when
// the raw bytes were never seen with these options (`store` remembers raw-bytes aliases).
KILN_EXPORT Result<CacheKey> compute_cache_key(const Client& client, const ModuleSource& source,
                                               const CompileOptions& options,
                                               CacheStore* store = nullptr);

// With PGLE (KILN_ENABLE_PGLE or KILN_COMPILATION_CACHE_EXPECT_PGLE) the seed's three cases
// apply: a cached PGLE-optimised entry is used and `profiler` disabled (1); options carrying a
// profile compile under the PGLE key (2); otherwise the instrumented first pass is built (3).
// ProfileGuidedProgram drives the whole flow.
KILN_EXPORT Result<std::shared_ptr<Executable>> compile_or_get_cached(
    const Client& client, const ModuleSource& source, const CompileOptions& options,
    CompileReport* report = nullptr, PgleProfiler* profiler = nullptr);

// The same for clients that load nothing (Client::create_compile_only): the serialised executable
// from the persistent cache, or compiled (not loaded) and stored under the key a real client of
// the target computes, so importing the entries on such a machine makes its runs hits.
KILN_EXPORT Result<std::string> compile_or_get_cached_serialized(const Client& client,
                                                                 const ModuleSource& source,
                                                                 const CompileOptions& options,
                                                                 CompileReport* report = nullptr);

// FDO profile sharing in a multi-process job (PGLE): every process must compile with the same
// profile. The leader publishes `profile` under the key of the empty-profile options + "_fdo_sync";
// the others wait (KILN_SHARE_BINARY_BETWEEN_HOSTS_TIMEOUT_MS) and return the leader's bytes.
// Without a job (or in a one-process job) returns `profile` unchanged.
KILN_EXPORT Result<std::string> sync_fdo_profile(const Client& client,
                                                 const CompileOptions& options,
                                                 const CacheKey& empty_profile_key,
                                                 std::string profile);

// Handlers of the process default cache (CompileErrorHandler: kiln/compilation_cache.h).
KILN_EXPORT int register_compile_error_handler(CompileErrorHandler handler);
KILN_EXPORT void unregister_compile_error_handler(int id);

// The cache compile_or_get_cached uses now: opened from the KILN_* flags, and opened anew when
// they change (callers holding the old one keep it).
KILN_EXPORT Result<std::shared_ptr<CompilationCache>> default_compilation_cache();
// The persistent store of the default cache (valid until the cache flags change), or null when
// the cache is off.
KILN_EXPORT Result<CacheStore*> persistent_cache_store();
// The local directory store alone (for maintenance commands), even when a remote tier is set.
KILN_EXPORT Result<DirectoryStore*> local_cache_store();

// The Env the persistent store does its I/O through (nullptr: the POSIX Env). Takes effect when
// the store is next opened; tests inject faults this way.
KILN_EXPORT void set_persistent_cache_env(Env* env);

// Drops the default cache (its loaded executables, store, once-per-task events and check-contents
// memory); the next call opens a new one. For tests.
KILN_EXPORT void reset_compilation_cache_state();

}  // namespace kiln
