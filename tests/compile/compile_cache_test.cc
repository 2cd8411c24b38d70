// compile_or_get_cached with the real compiler and a real cache directory: hits, misses, write
// gates, error policy, verification, metrics, logs and the cache key's stability and sensitivity.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <set>
#include <thread>

#include "fault_env.h"
#include "kiln/cache.h"
#include "kiln/compile.h"
#include "kiln/config.h"
#include "kiln/file.h"
#include "kiln/logging.h"
#include "kiln/monitoring.h"
#include "test_support.h"

namespace kiln::testing {
namespace {

using ::testing::HasSubstr;

const char* kAdd = R"(module @adder {
  func.func @add(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
    %r = arith.addf %a, %b : tensor<4xf32>
    return %r : tensor<4xf32>
  }
})";

// The same program, reformatted, commented and with debug locations.
const char* kAddReformatted = R"(// a comment
module @adder {
func.func @add(%x: tensor<4xf32>,
               %y: tensor<4xf32>) -> tensor<4xf32> {
  %sum = arith.addf %x, %y : tensor<4xf32> loc("model.py":12:3)
  return %sum : tensor<4xf32> loc("model.py":13:3)
}
})";

// kAddReformatted after an edit elsewhere in its source file: the locations moved.
const char* kAddRelocated = R"(module @adder {
  func.func @add(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
    %r = arith.addf %a, %b : tensor<4xf32> loc("other/model.py":40:7)
    return %r : tensor<4xf32> loc(unknown)
  }
})";

const char* kMul = R"(module @multiplier {
  func.func @mul(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
    %r = arith.mulf %a, %b : tensor<4xf32>
    return %r : tensor<4xf32>
  }
})";

ModuleSource source(const char* text) { return ModuleSource{text, "<test>"}; }

class CompileCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config::reset();
    reset_compilation_cache_state();
    ASSERT_TRUE(config::set("KILN_CACHE_DIR", dir_.path()).ok());
    events_id_ = monitoring::add_event_listener([this](const std::string& e) { ++events_[e]; });
    durations_id_ = monitoring::add_duration_listener(
        [this](const std::string& e, double s) { durations_[e].push_back(s); });
    sink_id_ = log::add_sink(
        [this](log::Level level, const std::string& m) { logs_.emplace_back(level, m); });
  }
  void TearDown() override {
    monitoring::remove_listener(events_id_);
    monitoring::remove_listener(durations_id_);
    log::remove_sink(sink_id_);
    set_persistent_cache_env(nullptr);
    config::reset();
    reset_compilation_cache_state();
  }

  // A fresh process's view: no executables in memory, the same directory on disk.
  void forget_memory() {
    reset_compilation_cache_state();
    ASSERT_TRUE(config::set("KILN_CACHE_DIR", dir_.path()).ok());
  }

  Result<std::shared_ptr<Executable>> get(const char* text, CompileReport* report,
                                          CompileOptions options = {},
                                          const Client* client = nullptr) {
    return compile_or_get_cached(client ? *client : shared_client(), source(text), options, report);
  }

  std::vector<std::string> logs_at(log::Level level, const std::string& needle) {
    std::vector<std::string> out;
    for (const auto& [l, m] : logs_)
      if (l == level && m.find(needle) != std::string::npos) out.push_back(m);
    return out;
  }

  size_t entry_count() {
    auto names = Env::posix()->list_dir(dir_.path() + "/entries");
    size_t n = 0;
    if (names.ok())
      for (const auto& name : *names) n += name.rfind("alias-", 0) != 0;
    return n;
  }

  std::string entry_file(const std::string& key) {
    return dir_.path() + "/entries/" + key + ".kce";
  }

  TempDir dir_;
  std::map<std::string, int> events_;
  std::map<std::string, std::vector<double>> durations_;
  std::vector<std::pair<log::Level, std::string>> logs_;
  int events_id_ = 0, durations_id_ = 0, sink_id_ = 0;
};

TEST_F(CompileCacheTest, MissWritesThenAFreshProcessHitsWithIdenticalResults) {
  CompileReport first;
  auto compiled = get(kAdd, &first);
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  EXPECT_EQ(first.cache, kiln::CacheOutcome::kMiss);
  EXPECT_EQ(first.module_name, "adder");
  EXPECT_EQ(first.key.rfind("adder-", 0), 0u);
  EXPECT_EQ(entry_count(), 1u);
  EXPECT_EQ(events_["cache_misses"], 1);
  EXPECT_EQ(events_["cache_writes"], 1);
  EXPECT_EQ(events_["compile_requests_use_cache"], 1);
  EXPECT_EQ(durations_["backend_compile_duration"].size(), 1u);

  forget_memory();
  CompileReport second;
  auto loaded = get(kAdd, &second);
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(second.cache, kiln::CacheOutcome::kHit);
  EXPECT_FALSE(second.from_memory);
  EXPECT_EQ(second.key, first.key);
  EXPECT_EQ(events_["cache_hits"], 1);
  EXPECT_EQ(events_["compile_requests_use_cache"], 2);
  ASSERT_EQ(durations_["cache_retrieval_time_sec"].size(), 1u);
  ASSERT_EQ(durations_["compile_time_saved_sec"].size(), 1u);

  // The stored compile time is the measured one, in milliseconds.
  auto bytes = read_file(entry_file(first.key));
  ASSERT_TRUE(bytes.ok());
  auto meta = decode_cache_entry_metadata(*bytes, first.key);
  ASSERT_TRUE(meta.ok());
  EXPECT_NEAR(meta->compile_time_ms, first.compile_ms, 1.0);
  EXPECT_NEAR(durations_["compile_time_saved_sec"][0],
              meta->compile_time_ms / 1000.0 - durations_["cache_retrieval_time_sec"][0], 1e-9);

  Buffer a = random_f32({4}, 1), b = random_f32({4}, 2);
  auto r1 = (*compiled)->execute("add", {a, b});
  auto r2 = (*loaded)->execute("add", {a, b});
  ASSERT_TRUE(r1.ok() && r2.ok());
  for (int i = 0; i < 4; ++i) EXPECT_EQ((*r1)[0].as<float>()[i], (*r2)[0].as<float>()[i]);
}

// The events kiln records are JAX's compilation-cache events: listeners receive JAX's name
// without its prefix, and jax_event_name gives the full one (docs/CACHE.md's table); kiln's own
// events have no JAX name.
TEST(MonitoringEventsTest, EveryEventIsNamedAsJaxNamesIt) {
  using monitoring::DurationEvent;
  using monitoring::Event;
  for (Event e : {Event::kCompileRequestsUseCache, Event::kCacheHits, Event::kCacheMisses,
                  Event::kTasksUsingCache, Event::kTaskDisabledCache})
    EXPECT_EQ(std::string(monitoring::jax_event_name(e)),
              std::string("/jax/compilation_cache/") + monitoring::event_name(e));
  for (Event e : {Event::kCacheWrites, Event::kCacheCorrupt})
    EXPECT_EQ(std::string(monitoring::jax_event_name(e)), "") << monitoring::event_name(e);
  for (DurationEvent e :
       {DurationEvent::kCompileTimeSavedSec, DurationEvent::kCacheRetrievalTimeSec})
    EXPECT_EQ(std::string(monitoring::jax_event_name(e)),
              std::string("/jax/compilation_cache/") + monitoring::event_name(e));
  EXPECT_EQ(std::string(monitoring::jax_event_name(DurationEvent::kBackendCompileDuration)),
            "/jax/core/compile/backend_compile_duration");
  EXPECT_EQ(std::string(monitoring::event_name(Event::kCacheHits)), "cache_hits");
  // A recorded enum reaches listeners under its name.
  std::vector<std::string> seen;
  int id = monitoring::add_event_listener([&](const std::string& e) { seen.push_back(e); });
  monitoring::record_event(Event::kCacheMisses);
  monitoring::remove_listener(id);
  EXPECT_EQ(seen, std::vector<std::string>{"cache_misses"});
}

TEST_F(CompileCacheTest, RepeatInOneProcessIsAMemoryHit) {
  CompileReport first, second;
  ASSERT_TRUE(get(kAdd, &first).ok());
  auto again = get(kAdd, &second);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(second.cache, kiln::CacheOutcome::kHit);
  EXPECT_TRUE(second.from_memory);
  EXPECT_EQ(events_["tasks_using_cache"], 1);  // once per process
}

TEST_F(CompileCacheTest, ConcurrentRequestsForOneKeyCompileOnce) {
  std::vector<std::thread> threads;
  std::vector<std::string> outcomes(6);
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&, i] {
      CompileReport r;
      auto exe = get(kAdd, &r);
      outcomes[i] = exe.ok()
                        ? kiln::to_string(r.cache) + std::string(r.from_memory ? "/memory" : "")
                        : exe.status().to_string();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(durations_["backend_compile_duration"].size(), 1u);
  EXPECT_EQ(std::count(outcomes.begin(), outcomes.end(), "miss"), 1);
  EXPECT_EQ(std::count(outcomes.begin(), outcomes.end(), "hit/memory"), 5);
}

TEST_F(CompileCacheTest, TwoProgramsMakeTwoEntries) {
  CompileReport r;
  ASSERT_TRUE(get(kAdd, &r).ok());
  ASSERT_TRUE(get(kMul, &r).ok());
  EXPECT_EQ(entry_count(), 2u);
}

TEST_F(CompileCacheTest, MinCompileTimeGateUsesTheEnvClock) {
  FaultEnv env;
  set_persistent_cache_env(&env);
  ASSERT_TRUE(config::set("KILN_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "5").ok());
  ASSERT_TRUE(config::set("KILN_EXPLAIN_CACHE_MISSES", "true").ok());
  env.step = 2'000'000;  // every clock read advances 2 s: the compile "takes" 2 s
  CompileReport fast;
  ASSERT_TRUE(get(kAdd, &fast).ok());
  EXPECT_EQ(fast.write_skip, WriteSkip::kCompileTime);
  EXPECT_THAT(fast.skipped_write,
              HasSubstr("less than KILN_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"));
  EXPECT_EQ(entry_count(), 0u);
  EXPECT_EQ(logs_at(log::Level::kWarning, "Not writing persistent cache entry for 'adder'").size(),
            1u);
  env.step = 10'000'000;  // a 10 s compile is stored
  CompileReport slow;
  ASSERT_TRUE(get(kMul, &slow).ok());
  EXPECT_EQ(slow.write_skip, WriteSkip::kNone);
  EXPECT_EQ(slow.skipped_write, "");
  EXPECT_EQ(entry_count(), 1u);
}

TEST_F(CompileCacheTest, MinEntrySizeGate) {
  ASSERT_TRUE(config::set("KILN_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "100000000").ok());
  CompileReport r;
  ASSERT_TRUE(get(kAdd, &r).ok());
  EXPECT_EQ(r.write_skip, WriteSkip::kEntrySize);
  EXPECT_THAT(r.skipped_write,
              HasSubstr("smaller than KILN_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"));
  EXPECT_EQ(entry_count(), 0u);
  // Without explain, skips are logged at debug level only.
  EXPECT_EQ(logs_at(log::Level::kWarning, "Not writing").size(), 0u);
  EXPECT_EQ(logs_at(log::Level::kDebug, "Not writing persistent cache entry for 'adder'").size(),
            1u);
}

TEST_F(CompileCacheTest, OnlyTheWriterProcessWrites) {
  auto follower = Client::create_cpu(1, /*process_index=*/1);
  ASSERT_TRUE(follower.ok());
  CompileReport r;
  ASSERT_TRUE(get(kAdd, &r, {}, follower->get()).ok());
  EXPECT_EQ(r.write_skip, WriteSkip::kNotWriter);
  EXPECT_THAT(r.skipped_write, HasSubstr("process 1 is not the cache writer (0)"));
  EXPECT_EQ(entry_count(), 0u);
  ASSERT_TRUE(config::set("KILN_CACHE_WRITER", "1").ok());
  ASSERT_TRUE(get(kMul, &r, {}, follower->get()).ok());
  EXPECT_EQ(entry_count(), 1u);
}

TEST_F(CompileCacheTest, ReadErrorIsAWarningAndTheCompileGoesOn) {
  CompileReport r;
  ASSERT_TRUE(get(kAdd, &r).ok());
  FaultEnv env;
  env.fail_entry_reads = true;
  set_persistent_cache_env(&env);
  forget_memory();
  auto exe = get(kAdd, &r);
  ASSERT_TRUE(exe.ok());
  EXPECT_EQ(r.cache, kiln::CacheOutcome::kMiss);
  auto warnings =
      logs_at(log::Level::kWarning,
              "Error reading persistent compilation cache entry for 'adder': IoError: ");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("Input/output error"));

  ASSERT_TRUE(config::set("KILN_RAISE_PERSISTENT_CACHE_ERRORS", "true").ok());
  forget_memory();
  auto raised = get(kAdd, &r);
  ASSERT_FALSE(raised.ok());
  EXPECT_THAT(raised.status().message(),
              HasSubstr("Error reading persistent compilation cache entry for 'adder'"));
}

TEST_F(CompileCacheTest, WriteErrorIsAWarningAndTheCompileGoesOn) {
  FaultEnv env;
  env.fail_entry_writes = true;
  set_persistent_cache_env(&env);
  CompileReport r;
  auto exe = get(kAdd, &r);
  ASSERT_TRUE(exe.ok());
  auto warnings =
      logs_at(log::Level::kWarning,
              "Error writing persistent compilation cache entry for 'adder': IoError: ");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("No space left on device"));

  ASSERT_TRUE(config::set("KILN_RAISE_PERSISTENT_CACHE_ERRORS", "true").ok());
  auto raised = get(kMul, &r);
  ASSERT_FALSE(raised.ok());
  EXPECT_THAT(raised.status().message(),
              HasSubstr("Error writing persistent compilation cache entry for 'multiplier'"));
}

TEST_F(CompileCacheTest, ReadOnlyCacheDirectoryDegradesToCompileWithOneWarning) {
  CompileReport r;
  ASSERT_TRUE(get(kMul, &r).ok());  // the directory exists and holds an entry
  FaultEnv env;
  env.deny_writes = true;
  set_persistent_cache_env(&env);
  forget_memory();
  size_t warnings_before = logs_at(log::Level::kWarning, "").size();
  auto exe = get(kAdd, &r);
  ASSERT_TRUE(exe.ok());
  EXPECT_EQ(r.cache, kiln::CacheOutcome::kMiss);
  EXPECT_EQ(logs_at(log::Level::kWarning, "").size() - warnings_before, 1u);
  EXPECT_EQ(logs_at(log::Level::kWarning, "Permission denied").size(), 1u);
  auto hit = get(kMul, &r);  // reading still works
  ASSERT_TRUE(hit.ok());
  EXPECT_EQ(r.cache, kiln::CacheOutcome::kHit);
}

TEST_F(CompileCacheTest, CorruptEntryIsAMissCountedAndHealedByTheNextWrite) {
  CompileReport r;
  ASSERT_TRUE(get(kAdd, &r).ok());
  std::string path = entry_file(r.key);
  std::string bytes = *read_file(path);
  bytes[bytes.size() / 2] ^= 0x10;
  ASSERT_TRUE(write_file(path, bytes).ok());
  forget_memory();
  CompileReport corrupt;
  ASSERT_TRUE(get(kAdd, &corrupt).ok());
  EXPECT_EQ(corrupt.cache, kiln::CacheOutcome::kMiss);
  EXPECT_EQ(events_["cache_corrupt"], 1);
  EXPECT_EQ(logs_at(log::Level::kWarning, "is corrupt").size(), 1u);
  forget_memory();
  CompileReport healed;
  ASSERT_TRUE(get(kAdd, &healed).ok());
  EXPECT_EQ(healed.cache, kiln::CacheOutcome::kHit);
}

TEST_F(CompileCacheTest, CheckContentsRaisesOnAMismatchEvenWithoutRaiseMode) {
  CompileReport add_report, mul_report;
  ASSERT_TRUE(get(kAdd, &add_report).ok());
  ASSERT_TRUE(get(kMul, &mul_report).ok());
  // Poison: the adder's key now holds the multiplier's code in an entry that names the adder's
  // key, as a writer with access to the directory could plant it.
  auto mul_entry = decode_cache_entry(*read_file(entry_file(mul_report.key)), mul_report.key);
  ASSERT_TRUE(mul_entry.ok()) << mul_entry.status().to_string();
  CacheEntryMetadata forged = mul_entry->metadata;
  forged.key = add_report.key;
  ASSERT_TRUE(
      write_file(entry_file(add_report.key), encode_cache_entry(forged, mul_entry->payload)).ok());
  ASSERT_TRUE(config::set("KILN_COMPILATION_CACHE_CHECK_CONTENTS", "true").ok());
  forget_memory();
  CompileReport r;
  auto checked = get(kAdd, &r);
  ASSERT_FALSE(checked.ok());
  EXPECT_THAT(checked.status().message(), HasSubstr("cache verification failed for 'adder'"));
  // An honest entry verifies.
  forget_memory();
  ASSERT_TRUE(config::set("KILN_COMPILATION_CACHE_CHECK_CONTENTS", "true").ok());
  auto honest = get(kMul, &r);
  EXPECT_TRUE(honest.ok()) << honest.status().to_string();
}

TEST_F(CompileCacheTest, HitAndMissLogLevelsFollowExplainAndLogCompiles) {
  CompileReport r;
  ASSERT_TRUE(get(kAdd, &r).ok());
  EXPECT_EQ(logs_at(log::Level::kDebug,
                    "PERSISTENT COMPILATION CACHE MISS for 'adder' with key '" + r.key + "'")
                .size(),
            1u);
  ASSERT_TRUE(config::set("KILN_EXPLAIN_CACHE_MISSES", "true").ok());
  ASSERT_TRUE(get(kMul, &r).ok());
  EXPECT_EQ(
      logs_at(log::Level::kWarning, "PERSISTENT COMPILATION CACHE MISS for 'multiplier'").size(),
      1u);
  forget_memory();
  ASSERT_TRUE(get(kAdd, &r).ok());
  EXPECT_EQ(logs_at(log::Level::kDebug, "Persistent compilation cache hit for 'adder'").size(), 1u);
  forget_memory();
  ASSERT_TRUE(config::set("KILN_LOG_COMPILES", "true").ok());
  ASSERT_TRUE(get(kAdd, &r).ok());
  EXPECT_EQ(logs_at(log::Level::kWarning, "Persistent compilation cache hit for 'adder'").size(),
            1u);
}

TEST_F(CompileCacheTest, CacheOffComputesNoKeyAndSendsTheDisabledEventOnce) {
  ASSERT_TRUE(config::set("KILN_ENABLE_COMPILATION_CACHE", "false").ok());
  CompileReport r;
  ASSERT_TRUE(get(kAdd, &r).ok());
  ASSERT_TRUE(get(kMul, &r).ok());
  EXPECT_EQ(r.cache, kiln::CacheOutcome::kOff);
  EXPECT_EQ(r.key, "");
  EXPECT_EQ(events_["task_disabled_cache"], 1);
  EXPECT_EQ(events_["compile_requests_use_cache"], 0);
  EXPECT_FALSE(Env::posix()->file_exists(dir_.path() + "/entries"));
}

TEST_F(CompileCacheTest, CacheDirectorySetAfterStartUpIsFollowed) {
  CompileReport r;
  ASSERT_TRUE(get(kAdd, &r).ok());
  TempDir other;
  ASSERT_TRUE(config::set("KILN_CACHE_DIR", other.path()).ok());
  ASSERT_TRUE(get(kMul, &r).ok());
  EXPECT_TRUE(Env::posix()->file_exists(other.path() + "/entries/" + r.key + ".kce"));
  EXPECT_FALSE(Env::posix()->file_exists(entry_file(r.key)));
}

TEST_F(CompileCacheTest, ErrorHandlersReplaceCompileErrorsInOrder) {
  int first = register_compile_error_handler([](const Status& s) -> std::optional<Status> {
    if (s.message().find("custom.op") == std::string::npos) return std::nullopt;
    return invalid_argument("this model uses an op kiln cannot compile; see docs");
  });
  int second = register_compile_error_handler(
      [](const Status&) -> std::optional<Status> { return internal_error("never reached"); });
  CompileReport r;
  auto bad = get(R"(func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
    %y = "custom.op"(%x) : (tensor<4xf32>) -> tensor<4xf32>
    return %y : tensor<4xf32>
  })",
                 &r);
  unregister_compile_error_handler(first);
  unregister_compile_error_handler(second);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("this model uses an op kiln cannot compile"));
  EXPECT_THAT(bad.status().message(), HasSubstr("caused by:"));
}

// Key stability and sensitivity.
class CacheKeyTest : public CompileCacheTest {
 protected:
  std::string key(const char* text, CompileOptions options = {}, const Client* client = nullptr) {
    auto k = compute_cache_key(client ? *client : shared_client(), source(text), options, nullptr);
    EXPECT_TRUE(k.ok()) << k.status().to_string();
    return k.ok() ? k->key : "";
  }
};

// Location contents are ignored; where a location stands is not (a `loc` where MLIR allows none
// must not share the key of the program without it), so adding locations is a new key.
TEST_F(CacheKeyTest, SameInputsSameKeyAndFormattingCommentsLocationsIgnored) {
  EXPECT_EQ(key(kAdd), key(kAdd));
  EXPECT_EQ(key(kAddRelocated), key(kAddReformatted));
  ASSERT_TRUE(config::set("KILN_COMPILATION_CACHE_INCLUDE_METADATA_IN_KEY", "true").ok());
  EXPECT_NE(key(kAddRelocated), key(kAddReformatted));
}

TEST_F(CacheKeyTest, ModuleEffortLevelsDisabledPassesDevicesAndTagChangeTheKey) {
  std::set<std::string> keys;
  keys.insert(key(kAdd));
  keys.insert(key(kMul));
  for (EffortLevel level : {EffortLevel::kO0, EffortLevel::kO1, EffortLevel::kO3}) {
    CompileOptions o;
    o.optimization_level = level;
    keys.insert(key(kAdd, o));
  }
  CompileOptions disabled;
  disabled.disabled_passes = {"canonicalize", "linalg-fuse-elementwise-ops"};
  keys.insert(key(kAdd, disabled));
  auto four = Client::create_cpu(4);
  keys.insert(key(kAdd, {}, four->get()));
  ASSERT_TRUE(config::set("KILN_CACHE_KEY_TAG", "experiment-7").ok());
  keys.insert(key(kAdd));
  EXPECT_EQ(keys.size(), 8u);  // two modules, three more levels, passes, devices, tag
}

TEST_F(CacheKeyTest, FdoProfileProfileVersionAndOverridesChangeTheKeyButDetailedLoggingDoesNot) {
  CompileOptions base;
  std::string plain = key(kAdd, base);
  CompileOptions profiled = base;
  profiled.fdo_profile = "profile bytes";
  CompileOptions other_profile = base;
  other_profile.fdo_profile = "other profile bytes";
  CompileOptions versioned = base;
  versioned.profile_version = 3;
  CompileOptions overridden = base;
  overridden.env_option_overrides = {{"unroll", "4"}};
  std::set<std::string> keys = {plain, key(kAdd, profiled), key(kAdd, other_profile),
                                key(kAdd, versioned), key(kAdd, overridden)};
  EXPECT_EQ(keys.size(), 5u);
  CompileOptions logged = base;
  logged.detailed_logging = true;
  logged.env_option_overrides = {{"dump_to", "/tmp/x"}};  // excluded from the key
  EXPECT_EQ(key(kAdd, logged), plain);
  CompileOptions reordered = overridden;
  reordered.env_option_overrides = {{"b", "1"}, {"a", "2"}};
  CompileOptions ordered = overridden;
  ordered.env_option_overrides = {{"a", "2"}, {"b", "1"}};
  EXPECT_EQ(key(kAdd, reordered), key(kAdd, ordered));
}

TEST_F(CacheKeyTest, DisabledPassOrderAndDuplicatesAndUnknownLevelDoNotMatter) {
  CompileOptions a, b;
  a.disabled_passes = {"canonicalize", "linalg-fuse-elementwise-ops"};
  b.disabled_passes = {" linalg-fuse-elementwise-ops", "canonicalize", "canonicalize"};
  EXPECT_EQ(key(kAdd, a), key(kAdd, b));
  CompileOptions o2;
  o2.optimization_level = EffortLevel::kO2;
  EXPECT_EQ(key(kAdd), key(kAdd, o2));  // UNKNOWN resolves to the backend default
  ASSERT_TRUE(config::set("KILN_LOG_COMPILES", "true").ok());  // not a codegen flag
  EXPECT_EQ(key(kAdd), key(kAdd, o2));
}

TEST_F(CacheKeyTest, RawBytesAliasGivesTheSameKeyWithoutTheCompiler) {
  auto store = persistent_cache_store();
  ASSERT_TRUE(store.ok() && *store != nullptr);
  auto first = compute_cache_key(shared_client(), source(kAdd), {}, *store);
  auto second = compute_cache_key(shared_client(), source(kAdd), {}, *store);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->key, second->key);
  EXPECT_EQ(first->components.size(), second->components.size());
  EXPECT_EQ(first->components[0].description, second->components[0].description);
}

}  // namespace
}  // namespace kiln::testing
