// PGLE's part in a compile: which key a call looks up and which build it compiles (the seed's
// three cases), with the cache on or off. Every process of a job compiles with the same profile.
#include "compile/cache_parts.h"
#include "core/digest.h"
#include "kiln/logging.h"

namespace kiln::cache_parts {

namespace {

// Case 2 of choose_key: every process of a job compiles the optimised build with the same (the
// leader's) profile.
Status use_jobs_profile(const CompilationCacheOptions& o, const KeyFunction& key_of,
                        const Client& client, const CompileOptions& options, KeyChoice& choice,
                        CompileReport& report) {
  CompileOptions no_profile = options;
  no_profile.fdo_profile.clear();
  auto empty_key = key_of(no_profile);
  if (empty_key.ok()) {
    KILN_ASSIGN_OR_RETURN(choice.options.fdo_profile,
                          sync_profile(client, options, *empty_key,
                                       std::move(choice.options.fdo_profile), o.share_timeout_ms));
  }
  report.pgle = PgleStage::kOptimised;
  report.profile_digest = sha256_hex(choice.options.fdo_profile);
  choice.options.pgle_build = PgleBuild::kOptimized;
  return Status();
}

}  // namespace

Result<KeyChoice> choose_key(const CompilationCacheOptions& o, const KeyFunction& key_of,
                             CacheStore* store, const Client& client, CompileOptions options,
                             CompileReport& report, PgleProfiler* profiler) {
  bool auto_pgle = o.enable_pgle && o.pgle_profiling_runs > 0;
  bool pgle_rules = (auto_pgle || o.expect_pgle) && report.pgle == PgleStage::kNone;
  bool with_profile = auto_pgle && !options.fdo_profile.empty() && report.pgle == PgleStage::kNone;
  // The first pass of PGLE is instrumented, so its options (and key) differ from the plain
  // build's; like the seed, expect-PGLE runs use them too so they find what PGLE runs stored.
  CompileOptions first_pass = options;
  if (pgle_rules) first_pass.pgle_build = PgleBuild::kInstrumented;
  KeyChoice choice;
  choice.options = options;
  if (!pgle_rules) {
    choice.key = key_of(options);
    return choice;
  }
  // The PGLE-optimised entry's key does not depend on the profile's bytes (there are none yet on
  // the runs that look it up).
  CompileOptions optimized = options;
  optimized.pgle_build = PgleBuild::kOptimized;
  auto pgle_key = key_of(optimized);
  auto plain_key = key_of(first_pass);
  choice.key = plain_key;
  if (!pgle_key.ok() || !plain_key.ok()) {
    if (!with_profile) choice.options = first_pass;
    return choice;
  }
  // An entry found here is kept, so a case-1 hit does not read the store twice.
  auto present = [&](const std::string& key) {
    auto bytes = store->get(key);
    if (!bytes.ok() || !bytes->has_value()) return false;
    choice.prefetched.emplace(key, std::move(**bytes));
    return true;
  };
  if (present(pgle_key->key)) {
    // Case 1: use it, and stop profiling.
    if (o.expect_pgle)
      log::info("PGLE-optimized " + pgle_key->module_name + " loaded from compilation cache");
    if (profiler != nullptr) profiler->disable();
    report.pgle = PgleStage::kOptimisedCached;
    choice.key = pgle_key;
    return choice;
  }
  if (o.expect_pgle && present(plain_key->key)) {
    // Case 1b: the user said the PGLE-optimised entry would be there.
    log::warning("PERSISTENT CACHE MISS for PGLE-optimized " + pgle_key->module_name +
                 " despite non-PGLE hit; it may not have been executed enough times when the "
                 "cache was populated");
  }
  if (!with_profile) {
    // Case 3: still collecting (or only expecting): the instrumented first pass.
    report.pgle = PgleStage::kFirstPass;
    choice.options = first_pass;
    return choice;
  }
  KILN_RETURN_IF_ERROR(use_jobs_profile(o, key_of, client, options, choice, report));
  choice.key = pgle_key;
  return choice;
}

Status prepare_uncached_pgle(const CompilationCacheOptions& o, const KeyFunction& key_of,
                             const Client& client, CompileOptions& options, CompileReport& report) {
  bool auto_pgle = o.enable_pgle && o.pgle_profiling_runs > 0;
  if (!(auto_pgle || o.expect_pgle) || report.pgle != PgleStage::kNone) return Status();
  if (!auto_pgle || options.fdo_profile.empty()) {
    report.pgle = PgleStage::kFirstPass;
    options.pgle_build = PgleBuild::kInstrumented;
    return Status();
  }
  report.pgle = PgleStage::kOptimised;
  options.pgle_build = PgleBuild::kOptimized;
  CompileOptions no_profile = options;
  no_profile.pgle_build = PgleBuild::kPlain;
  no_profile.fdo_profile.clear();
  auto empty_key = key_of(no_profile);
  if (empty_key.ok()) {
    KILN_ASSIGN_OR_RETURN(options.fdo_profile,
                          sync_profile(client, options, *empty_key, std::move(options.fdo_profile),
                                       o.share_timeout_ms));
  }
  report.profile_digest = sha256_hex(options.fdo_profile);
  return Status();
}

}  // namespace kiln::cache_parts
