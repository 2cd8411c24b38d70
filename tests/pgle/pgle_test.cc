// PGLE: the profile format and aggregation, the profile-guided flow, the seed's three cases with
// the sentinel key, expect-PGLE warnings, profile sharing across a Redis job, and the command line.
#include "kiln/pgle.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "kiln/compile.h"
#include "kiln/config.h"
#include "kiln/env.h"
#include "kiln/file.h"
#include "kiln/logging.h"
#include "kiln/profile_guided.h"
#include "redis_fixture.h"
#include "test_support.h"

namespace kiln {
namespace {

using testing::kiln_binary;
using testing::program_path;
using testing::random_f32;
using testing::run_process;
using testing::TempDir;

// ---- profile format and aggregation -------------------------------------------------------

TEST(PgleProfileTest, PercentileInterpolatesBetweenClosestRanks) {
  std::vector<double> samples = {40, 10, 30, 20};
  EXPECT_DOUBLE_EQ(percentile_of(samples, 90), 37);  // rank 2.7: 30 + 0.7 × 10
  EXPECT_DOUBLE_EQ(percentile_of(samples, 50), 25);
  EXPECT_DOUBLE_EQ(percentile_of(samples, 0), 10);
  EXPECT_DOUBLE_EQ(percentile_of(samples, 100), 40);
  EXPECT_DOUBLE_EQ(percentile_of({7}, 90), 7);
}

std::vector<KernelInfo> two_kernels() {
  return {{0x50, "main/matmul[4x4,4x4->4x4]", {"8x32", "6x64"}}, {0x30, "main/fill[4x4]", {}}};
}

TEST(PgleProfileTest, ProfilerAggregatesEachCandidateAcrossRunsAndDevices) {
  PgleProfiler profiler(4, 90);
  auto kernels = two_kernels();
  // Four runs from two "devices" at once: candidate costs 100/300 (c0) and 50/70 (c1).
  std::thread a([&] {
    profiler.record(kernels, {{0, 100, true}, {0, 10, true}});
    profiler.record(kernels, {{1, 50, true}, {0, 20, true}});
  });
  std::thread b([&] {
    profiler.record(kernels, {{0, 300, true}, {0, 30, true}});
    profiler.record(kernels, {{1, 70, true}, {0, 40, true}});
  });
  a.join();
  b.join();
  EXPECT_TRUE(profiler.done());
  FdoProfile p = profiler.aggregate();
  EXPECT_EQ(p.runs, 4u);
  EXPECT_EQ(p.percentile, 90u);
  ASSERT_EQ(p.kernels.size(), 2u);
  const KernelProfile* matmul = p.find(0x50);
  ASSERT_NE(matmul, nullptr);
  EXPECT_EQ(matmul->candidate_ns, (std::vector<int64_t>{280, 68}));  // 100+0.9×200, 50+0.9×20
  EXPECT_EQ(matmul->best_candidate(), 1);
  const KernelProfile* fill = p.find(0x30);
  ASSERT_NE(fill, nullptr);
  EXPECT_EQ(fill->candidate_ns, (std::vector<int64_t>{37}));
  EXPECT_EQ(fill->samples, 4u);
}

TEST(PgleProfileTest, WarmUpRunsAreNeitherRecordedNorRotated) {
  PgleProfiler profiler(2, 50, /*warmup_runs=*/1);
  auto kernels = two_kernels();
  EXPECT_TRUE(profiler.warming_up());
  EXPECT_EQ(profiler.begin_run(), 0u);  // the warm-up runs the default candidates
  profiler.record(kernels, {{0, 9999, true}, {0, 9999, true}});
  EXPECT_FALSE(profiler.warming_up());
  EXPECT_EQ(profiler.runs_recorded(), 0);
  EXPECT_EQ(profiler.begin_run(), 0u);
  profiler.record(kernels, {{0, 100, true}, {0, 10, true}});
  EXPECT_EQ(profiler.begin_run(), 1u);
  profiler.record(kernels, {{1, 60, true}, {0, 20, true}});
  EXPECT_TRUE(profiler.done());
  FdoProfile p = profiler.aggregate();
  EXPECT_EQ(p.runs, 2u);
  EXPECT_EQ(p.find(0x50)->candidate_ns, (std::vector<int64_t>{100, 60}));
  EXPECT_EQ(p.find(0x30)->candidate_ns, (std::vector<int64_t>{15}));
}

TEST(PgleProfileTest, BytesAreDeterministicAndRoundTrip) {
  auto kernels = two_kernels();
  std::vector<KernelInfo> reversed = {kernels[1], kernels[0]};
  PgleProfiler first(2, 90), second(2, 90);
  first.record(kernels, {{0, 100, true}, {0, 10, true}});
  first.record(kernels, {{1, 60, true}, {0, 12, true}});
  second.record(reversed, {{0, 12, true}, {1, 60, true}});
  second.record(reversed, {{0, 10, true}, {0, 100, true}});
  EXPECT_EQ(first.fdo_profile(), second.fdo_profile());
  auto decoded = decode_fdo_profile(first.fdo_profile());
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(encode_fdo_profile(*decoded), first.fdo_profile());
  EXPECT_EQ(decoded->find(0x50)->candidate_names, (std::vector<std::string>{"8x32", "6x64"}));
  EXPECT_EQ(decoded->find(0x50)->name, "main/matmul[4x4,4x4->4x4]");
}

TEST(PgleProfileTest, DamagedOrForeignProfilesAreRejectedWithAClearError) {
  PgleProfiler profiler(1, 90);
  profiler.record(two_kernels(), {{0, 100, true}, {0, 10, true}});
  std::string bytes = profiler.fdo_profile();
  for (size_t i = 12; i < bytes.size(); ++i) {  // past magic and version: the checksum catches it
    std::string flipped = bytes;
    flipped[i] = static_cast<char>(flipped[i] ^ 0x10);
    auto decoded = decode_fdo_profile(flipped);
    ASSERT_FALSE(decoded.ok()) << "byte " << i;
    EXPECT_EQ(decoded.status().code(), StatusCode::kCorruption);
  }
  EXPECT_EQ(decode_fdo_profile(bytes.substr(0, bytes.size() - 3)).status().code(),
            StatusCode::kCorruption);
  std::string foreign = bytes;
  foreign[8] = 2;  // format version 2
  auto decoded = decode_fdo_profile(foreign);
  EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(decoded.status().message().find("format version 2 is not supported"),
            std::string::npos);
  EXPECT_NE(decode_fdo_profile("not a profile").status().message().find("bad magic"),
            std::string::npos);
}

// ---- the flow through compile_or_get_cached ---------------------------------------------------

class PgleFlowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config::reset();
    reset_compilation_cache_state();
    ASSERT_TRUE(config::set("KILN_CACHE_DIR", dir_.path()).ok());
    ASSERT_TRUE(config::set("KILN_ENABLE_PGLE", "true").ok());
    sink_ = log::add_sink([this](log::Level level, const std::string& m) {
      std::lock_guard<std::mutex> lock(mutex_);
      logs_.emplace_back(level, m);
    });
    auto src = ModuleSource::from_file(program_path("pgle_mlp.mlir"));
    ASSERT_TRUE(src.ok());
    source_ = *src;
    inputs_ = {random_f32({37, 53}, 1), random_f32({53, 70}, 2), random_f32({37, 70}, 3),
               random_f32({70, 29}, 4)};
  }
  void TearDown() override {
    log::remove_sink(sink_);
    config::reset();
    reset_compilation_cache_state();
  }
  void forget_memory() {
    reset_compilation_cache_state();
    ASSERT_TRUE(config::set("KILN_CACHE_DIR", dir_.path()).ok());
  }
  bool logged(log::Level level, const std::string& text) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [l, m] : logs_)
      if (l == level && m.find(text) != std::string::npos) return true;
    return false;
  }
  std::unique_ptr<ProfileGuidedProgram> program() {
    auto p = ProfileGuidedProgram::create(testing::shared_client(), source_, CompileOptions());
    EXPECT_TRUE(p.ok()) << p.status().to_string();
    return p.ok() ? std::move(*p) : nullptr;
  }
  // Runs the full flow once: the PGLE-optimised entry is in the cache afterwards.
  void run_flow(int runs) {
    auto p = program();
    ASSERT_NE(p, nullptr);
    for (int i = 0; i < runs; ++i) ASSERT_TRUE(p->execute("main", inputs_).ok());
    ASSERT_EQ(p->recompiles(), 1);
  }

  TempDir dir_;
  ModuleSource source_;
  std::vector<Buffer> inputs_;
  int sink_ = 0;
  std::mutex mutex_;
  std::vector<std::pair<log::Level, std::string>> logs_;
};

void expect_close(const Buffer& a, const Buffer& b) {
  ASSERT_EQ(a.shape(), b.shape());
  for (int64_t i = 0; i < a.element_count(); ++i)
    ASSERT_NEAR(a.as<float>()[i], b.as<float>()[i], 1e-4 * (1 + std::fabs(a.as<float>()[i])))
        << "element " << i;
}

TEST_F(PgleFlowTest, ProfilesNRunsRecompilesOnceAndNeverAgain) {
  auto p = program();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->first_report().pgle, kiln::PgleStage::kFirstPass);
  EXPECT_TRUE(p->first_report().compiled);
  std::shared_ptr<Executable> first_pass = p->executable();
  // Every kernel after fusion: two fills, two contractions (three candidates each), bias+ReLU.
  const auto& kernels = first_pass->info().kernels;
  ASSERT_EQ(kernels.size(), 5u);
  int contractions = 0;
  for (const KernelInfo& k : kernels)
    if (k.name.find("/matmul[") != std::string::npos) {
      ++contractions;
      EXPECT_EQ(k.candidates(), 3) << k.name;
    }
  EXPECT_EQ(contractions, 2);

  std::vector<Buffer> first_result, last_result;
  for (int run = 1; run <= 8; ++run) {
    auto out = p->execute("main", inputs_);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    if (run == 1) first_result = *out;
    last_result = *out;
    // One warm-up execution (KILN_PGLE_WARMUP_RUNS), then three profiling runs.
    EXPECT_EQ(p->recompiles(), run < 4 ? 0 : 1) << "after run " << run;
  }
  EXPECT_EQ(p->last_report().pgle, kiln::PgleStage::kOptimised);
  EXPECT_TRUE(p->last_report().compiled);
  EXPECT_NE(p->executable(), first_pass);
  EXPECT_NE(p->last_report().key, p->first_report().key);
  expect_close(first_result[0], last_result[0]);

  // The profile names every kernel of the program, each contraction with all its candidates.
  auto profile = decode_fdo_profile(p->fdo_profile());
  ASSERT_TRUE(profile.ok()) << profile.status().to_string();
  EXPECT_EQ(profile->runs, 3u);
  ASSERT_EQ(profile->kernels.size(), kernels.size());
  for (const KernelInfo& k : kernels) {
    const KernelProfile* measured = profile->find(k.fingerprint);
    ASSERT_NE(measured, nullptr) << k.name;
    EXPECT_EQ(measured->name, k.name);
    for (int64_t ns : measured->candidate_ns) EXPECT_GT(ns, 0) << k.name;
  }
  // The optimised build keeps the kernels' fingerprints (profiles from other builds match).
  ASSERT_EQ(p->executable()->info().kernels.size(), kernels.size());
  for (size_t i = 0; i < kernels.size(); ++i)
    EXPECT_EQ(p->executable()->info().kernels[i].fingerprint, kernels[i].fingerprint);
}

// Cached executables are immutable: a program profiling its runs does not turn the shared
// executable into a profiled one for everybody else who got it from the cache.
TEST_F(PgleFlowTest, ProfilingIsPerCallNotStateOfTheSharedExecutable) {
  auto profiled = program();
  ASSERT_NE(profiled, nullptr);
  ASSERT_TRUE(profiled->profiling());
  CompileReport report;
  auto shared = compile_or_get_cached(testing::shared_client(), source_, CompileOptions(), &report);
  ASSERT_TRUE(shared.ok()) << shared.status().to_string();
  ASSERT_TRUE(report.from_memory);
  ASSERT_EQ(*shared, profiled->executable()) << "the cache should hand out the same executable";
  for (int i = 0; i < 6; ++i) ASSERT_TRUE((*shared)->execute("main", inputs_).ok());
  EXPECT_EQ(profiled->profiler()->runs_recorded(), 0)
      << "another caller's runs were recorded into this program's profile";
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(profiled->execute("main", inputs_).ok());
  EXPECT_EQ(profiled->profiler()->runs_recorded(), 3);  // after one warm-up run
  EXPECT_EQ(profiled->recompiles(), 1);
}

TEST_F(PgleFlowTest, Case1ThePgleEntryIsLoadedAndNothingIsProfiled) {
  run_flow(4);
  forget_memory();
  auto p = program();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->first_report().pgle, kiln::PgleStage::kOptimisedCached);
  EXPECT_EQ(p->first_report().cache, kiln::CacheOutcome::kHit);
  EXPECT_FALSE(p->first_report().compiled);
  EXPECT_FALSE(p->profiling());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(p->execute("main", inputs_).ok());
  EXPECT_EQ(p->recompiles(), 0);
  EXPECT_EQ(p->profiler()->runs_recorded(), 0);
}

TEST_F(PgleFlowTest, ThePgleKeyDoesNotDependOnTheProfileBytes) {
  PgleProfiler a(1, 90), b(1, 90);
  a.record(two_kernels(), {{0, 100, true}, {0, 10, true}});
  b.record(two_kernels(), {{1, 999, true}, {0, 77, true}});
  CompileOptions with_a, with_b;
  with_a.fdo_profile = a.fdo_profile();
  with_b.fdo_profile = b.fdo_profile();
  CompileReport first, second;
  ASSERT_TRUE(compile_or_get_cached(testing::shared_client(), source_, with_a, &first).ok());
  EXPECT_EQ(first.pgle, kiln::PgleStage::kOptimised);
  EXPECT_EQ(first.profile_digest.size(), 64u);
  forget_memory();
  ASSERT_TRUE(compile_or_get_cached(testing::shared_client(), source_, with_b, &second).ok());
  EXPECT_EQ(second.key, first.key);
  EXPECT_EQ(second.cache, kiln::CacheOutcome::kHit);
  EXPECT_EQ(second.pgle, kiln::PgleStage::kOptimisedCached);
}

TEST_F(PgleFlowTest, FirstPassPgleAndPlainBuildsHaveThreeDifferentKeys) {
  CompileReport first_pass, plain;
  ASSERT_TRUE(
      compile_or_get_cached(testing::shared_client(), source_, CompileOptions(), &first_pass).ok());
  run_flow(4);
  CompileReport optimised;
  forget_memory();
  ASSERT_TRUE(
      compile_or_get_cached(testing::shared_client(), source_, CompileOptions(), &optimised).ok());
  ASSERT_TRUE(config::set("KILN_ENABLE_PGLE", "false").ok());
  ASSERT_TRUE(
      compile_or_get_cached(testing::shared_client(), source_, CompileOptions(), &plain).ok());
  EXPECT_EQ(plain.pgle, kiln::PgleStage::kNone);
  EXPECT_NE(first_pass.key, optimised.key);
  EXPECT_NE(first_pass.key, plain.key);
  EXPECT_NE(optimised.key, plain.key);
}

// Which PGLE build a compile is travels as a typed field of the options, not as an option
// override or a stand-in profile: the optimised build's key stands for "some PGLE profile" (two
// profiles, one entry), a plain build's for the profile's bytes, and the instrumented first pass
// is its own entry. The old override spelling is an unknown option like any other.
TEST_F(PgleFlowTest, TheBuildKindIsATypedOptionAndOnlyTheOptimisedKeyIgnoresTheProfileBytes) {
  PgleProfiler a(1, 90), b(1, 90);
  a.record(two_kernels(), {{0, 100, true}, {0, 10, true}});
  b.record(two_kernels(), {{0, 300, true}, {0, 10, true}});
  ASSERT_NE(a.fdo_profile(), b.fdo_profile());
  auto key_of = [&](PgleBuild build, const std::string& profile) {
    CompileOptions options;
    options.pgle_build = build;
    options.fdo_profile = profile;
    auto key = compute_cache_key(testing::shared_client(), source_, options);
    EXPECT_TRUE(key.ok()) << key.status().to_string();
    return key.ok() ? key->key : std::string();
  };
  EXPECT_EQ(key_of(PgleBuild::kOptimized, a.fdo_profile()),
            key_of(PgleBuild::kOptimized, b.fdo_profile()));
  EXPECT_NE(key_of(PgleBuild::kPlain, a.fdo_profile()), key_of(PgleBuild::kPlain, b.fdo_profile()));
  EXPECT_NE(key_of(PgleBuild::kInstrumented, ""), key_of(PgleBuild::kPlain, ""));
  EXPECT_NE(key_of(PgleBuild::kOptimized, a.fdo_profile()), key_of(PgleBuild::kPlain, ""));

  ASSERT_TRUE(config::set("KILN_ENABLE_PGLE", "false").ok());
  CompileOptions no_profile;
  no_profile.pgle_build = PgleBuild::kOptimized;
  auto refused = compile_or_get_cached(testing::shared_client(), source_, no_profile);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), ::testing::HasSubstr("no fdo_profile"));
  CompileOptions old_spelling;
  old_spelling.env_option_overrides = {{"pgle_instrument", "true"}};
  auto unknown = compile_or_get_cached(testing::shared_client(), source_, old_spelling);
  EXPECT_THAT(unknown.status().message(),
              ::testing::HasSubstr("No such compile option: 'pgle_instrument'"));

  CompileOptions instrumented;
  instrumented.pgle_build = PgleBuild::kInstrumented;
  auto first_pass = compile_or_get_cached(testing::shared_client(), source_, instrumented);
  ASSERT_TRUE(first_pass.ok()) << first_pass.status().to_string();
  EXPECT_FALSE((*first_pass)->info().kernels.empty());  // timers and candidates are in it
}

TEST_F(PgleFlowTest, ACorruptOrForeignProfileIsRefusedAndThePlainBuildIsUsed) {
  CompileReport plain;
  ASSERT_TRUE(config::set("KILN_ENABLE_PGLE", "false").ok());
  auto plain_exe =
      compile_or_get_cached(testing::shared_client(), source_, CompileOptions(), &plain);
  ASSERT_TRUE(plain_exe.ok());
  ASSERT_TRUE(config::set("KILN_ENABLE_PGLE", "true").ok());
  PgleProfiler profiler(1, 90);
  profiler.record(two_kernels(), {{0, 100, true}, {0, 10, true}});
  std::string foreign = profiler.fdo_profile();
  foreign[8] = 9;
  for (const std::string& bad : {std::string("garbage bytes"), foreign}) {
    CompileOptions options;
    options.fdo_profile = bad;
    CompileReport report;
    auto exe = compile_or_get_cached(testing::shared_client(), source_, options, &report);
    ASSERT_TRUE(exe.ok()) << exe.status().to_string();
    EXPECT_EQ(report.pgle, kiln::PgleStage::kProfileRejected);
    EXPECT_EQ(report.key, plain.key);  // the plain build, never the PGLE entry
    EXPECT_TRUE((*exe)->info().kernels.empty());
  }
  EXPECT_TRUE(logged(log::Level::kWarning,
                     "cannot be used: not a kiln PGLE profile (bad magic); "
                     "compiling the plain build without it"));
  EXPECT_TRUE(logged(log::Level::kWarning, "format version 9 is not supported"));
}

TEST_F(PgleFlowTest, Case1bExpectPgleWarnsWhenOnlyThePlainEntryIsThere) {
  ASSERT_TRUE(
      compile_or_get_cached(testing::shared_client(), source_, CompileOptions(), nullptr).ok());
  forget_memory();
  ASSERT_TRUE(config::set("KILN_ENABLE_PGLE", "false").ok());
  ASSERT_TRUE(config::set("KILN_COMPILATION_CACHE_EXPECT_PGLE", "true").ok());
  CompileReport report;
  ASSERT_TRUE(
      compile_or_get_cached(testing::shared_client(), source_, CompileOptions(), &report).ok());
  EXPECT_EQ(report.cache, kiln::CacheOutcome::kHit);
  EXPECT_TRUE(logged(log::Level::kWarning,
                     "PERSISTENT CACHE MISS for PGLE-optimized pgle_mlp despite non-PGLE hit; it "
                     "may not have been executed enough times when the cache was populated"));
}

TEST_F(PgleFlowTest, ExpectPgleWarnsWhenItWritesAndLoadsThePgleEntry) {
  ASSERT_TRUE(config::set("KILN_COMPILATION_CACHE_EXPECT_PGLE", "true").ok());
  CompileReport report;
  ASSERT_TRUE(
      compile_or_get_cached(testing::shared_client(), source_, CompileOptions(), &report).ok());
  EXPECT_EQ(report.cache, kiln::CacheOutcome::kMiss);
  EXPECT_TRUE(logged(log::Level::kWarning,
                     "PERSISTENT CACHE WRITE with key '" + report.key +
                         "' for 'pgle_mlp': this is unexpected because "
                         "KILN_COMPILATION_CACHE_EXPECT_PGLE is set; the run that filled the cache "
                         "may not have run this program enough times"));
  // With the PGLE entry stored, an expect-PGLE process without PGLE loads it.
  ASSERT_TRUE(config::set("KILN_COMPILATION_CACHE_EXPECT_PGLE", "false").ok());
  forget_memory();
  run_flow(4);
  forget_memory();
  ASSERT_TRUE(config::set("KILN_ENABLE_PGLE", "false").ok());
  ASSERT_TRUE(config::set("KILN_COMPILATION_CACHE_EXPECT_PGLE", "true").ok());
  ASSERT_TRUE(
      compile_or_get_cached(testing::shared_client(), source_, CompileOptions(), &report).ok());
  EXPECT_EQ(report.pgle, kiln::PgleStage::kOptimisedCached);
  EXPECT_EQ(report.cache, kiln::CacheOutcome::kHit);
  EXPECT_TRUE(logged(log::Level::kInfo, "PGLE-optimized pgle_mlp loaded from compilation cache"));
}

TEST_F(PgleFlowTest, ColdKernelsCompiledAtLowEffortComputeTheSameResults) {
  // A share this large makes most kernels cold, so outlining is exercised on every kind.
  ASSERT_TRUE(config::set("KILN_PGLE_COLD_SHARE_PERCENT", "60").ok());
  auto p = program();
  ASSERT_NE(p, nullptr);
  auto reference = p->execute("main", inputs_);
  ASSERT_TRUE(reference.ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(p->execute("main", inputs_).ok());
  ASSERT_EQ(p->recompiles(), 1);  // the reference run was the warm-up
  auto out = p->execute("main", inputs_);
  ASSERT_TRUE(out.ok());
  expect_close((*reference)[0], (*out)[0]);
  std::lock_guard<std::mutex> lock(mutex_);
  std::regex cold("PGLE: ([0-9]+) of 5 kernels of 'pgle_mlp' compiled at low effort");
  int outlined = -1;
  for (const auto& [level, m] : logs_) {
    std::smatch match;
    if (std::regex_search(m, match, cold)) outlined = std::stoi(match[1]);
  }
  EXPECT_GE(outlined, 2);
}

// ---- processes ------------------------------------------------------------------------------

// A module's name decides no path: "../../escaped" keeps its profile inside the cache directory.
TEST(PgleCliTest, AModuleNamedLikeAPathKeepsItsProfileInsideTheCache) {
  TempDir dir;
  std::string text = *read_file(program_path("pgle_mlp.mlir"));
  text.replace(text.find("module @pgle_mlp"), 16, "module @\"../../escaped\"");
  ASSERT_TRUE(write_file(dir.file("named.mlir"), text).ok());
  std::string cache = dir.file("a/b/cache");
  auto run = run_process({kiln_binary(), "--cache-dir", cache, "run", dir.file("named.mlir"),
                          "--pgle", "--repeat", "5"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_FALSE(Env::posix()->file_exists(dir.file("escaped.kprof")));
  EXPECT_FALSE(Env::posix()->file_exists(dir.file("a/escaped.kprof")));
  auto stored = Env::posix()->list_dir(cache + "/profiles");
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->size(), 1u);
  EXPECT_EQ((*stored)[0], file_name_for_module("../../escaped") + ".kprof");
  EXPECT_EQ((*stored)[0].find('/'), std::string::npos);
  auto show =
      run_process({kiln_binary(), "--cache-dir", cache, "profile", "show", "../../escaped"});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("kiln PGLE profile: format 1"), std::string::npos) << show.out;
}

TEST(PgleCliTest, RunPgleProfilesRecompilesAndAFreshProcessLoadsTheResult) {
  TempDir dir;
  std::vector<std::string> base = {
      kiln_binary(), "--cache-dir", dir.file("cache"), "run", program_path("pgle_mlp.mlir"),
      "--pgle"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = base;
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  };
  auto first = run_process(with({"--repeat", "5"}));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_NE(first.out.find("built the instrumented first pass"), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("run  3:"), std::string::npos);
  EXPECT_NE(first.out.find("pgle: recompiled with the profile of 3 runs"), std::string::npos);
  EXPECT_NE(first.out.find("hottest kernels"), std::string::npos);
  EXPECT_NE(first.out.find("main/matmul[37x53,53x70,37x70->37x70]"), std::string::npos);
  EXPECT_NE(first.out.find("runs: median"), std::string::npos);

  auto show =
      run_process({kiln_binary(), "--cache-dir", dir.file("cache"), "profile", "show", "pgle_mlp"});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("kiln PGLE profile: format 1, 5 kernels, 3 runs aggregated at p90"),
            std::string::npos)
      << show.out;
  EXPECT_NE(show.out.find("main/matmul[37x70,70x29,37x29->37x29] (8x32: "), std::string::npos);

  // Case 1 in a fresh process: loaded, nothing profiled, nothing compiled.
  auto second = run_process(with({"--repeat", "5"}));
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_NE(second.out.find("came from the cache; nothing to profile (hit,"), std::string::npos)
      << second.out;
  EXPECT_EQ(second.out.find("recompiled"), std::string::npos);

  // Without --pgle, --expect-pgle loads the PGLE-optimised entry (case 1) with no warning.
  auto expected = run_process({kiln_binary(), "--cache-dir", dir.file("cache"), "run",
                               program_path("pgle_mlp.mlir"), "--expect-pgle", "--json"});
  ASSERT_EQ(expected.exit_code, 0) << expected.err;
  EXPECT_NE(expected.out.find("\"cache\":\"hit\""), std::string::npos) << expected.out;
  EXPECT_EQ(expected.err.find("PERSISTENT CACHE"), std::string::npos) << expected.err;

  auto missing = run_process(
      {kiln_binary(), "--cache-dir", dir.file("cache"), "profile", "show", "no_such_module"});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("no stored profile for module 'no_such_module'"), std::string::npos)
      << missing.err;
  auto compiled = run_process(
      {kiln_binary(), "compile", program_path("pgle_mlp.mlir"), "-o", dir.file("m.kx")});
  ASSERT_EQ(compiled.exit_code, 0) << compiled.err;
  auto refused = run_process({kiln_binary(), "run", dir.file("m.kx"), "--pgle"});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("--pgle recompiles the program, so it needs the MLIR file"),
            std::string::npos)
      << refused.err;
}

// Mirrors JAX's PGLE tests of profile sharing in a job: every process compiles with the leader's
// profile, with the persistent cache on or off.
class PgleJobTest : public ::testing::TestWithParam<bool> {};

TEST_P(PgleJobTest, Case2EveryProcessCompilesWithTheLeadersProfile) {
  bool cache_on = GetParam();
  testing::RedisServer server;
  TempDir dir;
  constexpr int kProcesses = 3;
  std::vector<pid_t> pids;
  for (int i = 0; i < kProcesses; ++i) {
    std::vector<std::string> argv = {kiln_binary(),
                                     "--cache-dir",
                                     dir.file("cache" + std::to_string(i)),
                                     "run",
                                     program_path("pgle_mlp.mlir"),
                                     "--pgle",
                                     "--repeat",
                                     "4",
                                     "--coordinator",
                                     server.url(),
                                     "--num-processes",
                                     std::to_string(kProcesses),
                                     "--process-id",
                                     std::to_string(i),
                                     "--job",
                                     "pgle-job"};
    if (!cache_on) argv.push_back("--no-cache");
    pids.push_back(testing::spawn_process(argv, {}, dir.file(std::to_string(i) + ".out"),
                                          dir.file(std::to_string(i) + ".err")));
  }
  std::vector<std::string> measured(kProcesses), used(kProcesses);
  std::regex digests("profile measured here ([0-9a-f]{16}), compiled with ([0-9a-f]{16})");
  for (int i = 0; i < kProcesses; ++i) {
    ASSERT_EQ(testing::wait_process(pids[i]), 0)
        << *read_file(dir.file(std::to_string(i) + ".err"));
    std::string out = *read_file(dir.file(std::to_string(i) + ".out"));
    std::smatch match;
    ASSERT_TRUE(std::regex_search(out, match, digests)) << out;
    measured[i] = match[1];
    used[i] = match[2];
  }
  for (int i = 0; i < kProcesses; ++i) EXPECT_EQ(used[i], measured[0]) << "process " << i;
}

INSTANTIATE_TEST_SUITE_P(CacheOnOrOff, PgleJobTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "CacheOn" : "CacheOff"; });

}  // namespace
}  // namespace kiln
