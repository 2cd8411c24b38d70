// Profile-guided latency estimation (PGLE) on the CPU: measured per-kernel costs that replace the
// backend's guesses.
//
// A first-pass build carries instrumentation: every kernel (each top-level computation after
// fusion) reports its time, and contractions carry several code variants ("candidates") that the
// profiling runs take in turn. A PgleProfiler collects N runs and aggregates them at a percentile
// into an FDO profile; compiling with that profile picks each contraction's fastest candidate and
// compiles kernels with a negligible share of the run time at low effort.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/export.h"
#include "kiln/status.h"

namespace kiln {

// A kernel of a compiled program, as its executable describes it.
struct KILN_EXPORT KernelInfo {
  // Stable across processes and compiles of the same module and options (profiles match by it).
  uint64_t fingerprint = 0;
  std::string name;                          // e.g. "main/matmul[100x300,300x77->100x77]"
  std::vector<std::string> candidate_names;  // empty: one way to build it
  int candidates() const { return candidate_names.empty() ? 1 : int(candidate_names.size()); }
};

// The FDO profile: a versioned, deterministic byte format (docs/PGLE.md).
inline constexpr uint32_t kProfileFormatVersion = 1;
inline constexpr int64_t kNotMeasured = -1;

struct KILN_EXPORT KernelProfile {
  uint64_t fingerprint = 0;
  std::string name;
  std::vector<std::string> candidate_names;
  std::vector<int64_t> candidate_ns;  // aggregated cost per candidate (kNotMeasured: no sample)
  uint32_t samples = 0;               // runs that measured this kernel
  // The cheapest measured candidate, or -1.
  int best_candidate() const;
  // The cost of the best candidate (0 when nothing was measured).
  int64_t best_ns() const;
};

struct KILN_EXPORT FdoProfile {
  uint32_t percentile = 90;
  uint32_t runs = 0;
  std::vector<KernelProfile> kernels;  // sorted by fingerprint
  int64_t total_ns() const;            // sum of every kernel's best cost
  const KernelProfile* find(uint64_t fingerprint) const;
};

KILN_EXPORT std::string encode_fdo_profile(const FdoProfile& profile);
// kInvalidArgument for bytes that are not a kiln profile or of another format version;
// kCorruption for damaged ones.
KILN_EXPORT Result<FdoProfile> decode_fdo_profile(std::string_view bytes);
// The hex digest a CompileReport's profile_digest shows for a build with these profile bytes.
KILN_EXPORT std::string fdo_profile_digest(std::string_view bytes);
// "850 ns", "12.3 us", "4.56 ms"; "-" when negative (not measured).
KILN_EXPORT std::string format_duration_ns(int64_t ns);
// A human-readable table, hottest kernel first.
KILN_EXPORT std::string format_fdo_profile(const FdoProfile& profile);

// Linear interpolation between the closest ranks (numpy's default): p in [0, 100].
// REQUIRES: samples is not empty.
KILN_EXPORT double percentile_of(std::vector<double> samples, double p);

// One kernel's measurement in one run.
struct KILN_EXPORT KernelSample {
  int candidate = 0;
  int64_t ns = 0;
  bool ran = false;
};

// Collects the per-kernel times of an instrumented executable's runs and aggregates them.
// Thread-safe: replicas of one executable record concurrently.
class KILN_EXPORT PgleProfiler {
 public:
  // `runs` profiling runs to collect after `warmup_runs` unrecorded ones; costs aggregate at
  // `percentile`.
  PgleProfiler(int runs, double percentile, int warmup_runs = 0);
  // From KILN_PGLE_PROFILING_RUNS, KILN_PGLE_AGGREGATION_PERCENTILE and KILN_PGLE_WARMUP_RUNS.
  static std::shared_ptr<PgleProfiler> from_flags();

  bool enabled() const;
  // No more profiling (e.g. the PGLE-optimised executable came from the cache).
  void disable();
  // Enough runs recorded to build the profile.
  bool done() const;
  int runs_recorded() const;
  // The next execution is a warm-up: run, but not measured.
  bool warming_up() const;
  int runs_wanted() const { return runs_; }

  // The rotation index an instrumented execution uses to pick candidates (one per call; warm-up
  // runs get 0 and run the default candidates).
  uint64_t begin_run();
  void record(const std::vector<KernelInfo>& kernels, const std::vector<KernelSample>& samples);

  FdoProfile aggregate() const;
  std::string fdo_profile() const { return encode_fdo_profile(aggregate()); }

 private:
  struct KernelSamples {
    std::string name;
    std::vector<std::string> candidate_names;
    std::vector<std::vector<double>> ns;  // per candidate
    uint32_t samples = 0;
  };
  int runs_;
  double percentile_;
  int warmup_;
  int discarded_ = 0;
  mutable std::mutex mutex_;
  bool enabled_ = true;
  int recorded_ = 0;
  uint64_t next_run_ = 0;
  std::map<uint64_t, KernelSamples> kernels_;
};

}  // namespace kiln
