// CompilationCache as an object an application holds: two caches in one process are two tenants
// that never see each other's entries, handlers or counters; the process default follows the flags.
#include "kiln/compilation_cache.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "kiln/compile.h"
#include "kiln/config.h"
#include "kiln/file.h"
#include "kiln/logging.h"
#include "test_support.h"

namespace kiln::testing {
namespace {

using ::testing::HasSubstr;

const char* kScale = R"(module @scale {
  func.func @scale(%a: tensor<8xf32>) -> tensor<8xf32> {
    %r = arith.addf %a, %a : tensor<8xf32>
    return %r : tensor<8xf32>
  }
})";

const char* kBroken = R"(module @broken {
  func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
    %r = "custom.op"(%a) : (tensor<4xf32>) -> tensor<4xf32>
    return %r : tensor<4xf32>
  }
})";

std::shared_ptr<CompilationCache> open_cache(const std::string& directory) {
  CompilationCacheOptions options;
  options.directory = directory;
  auto cache = CompilationCache::open(options);
  EXPECT_TRUE(cache.ok()) << cache.status().to_string();
  return cache.ok() ? *cache : nullptr;
}

size_t entries_in(const std::string& directory) {
  auto names = Env::posix()->list_dir(directory + "/entries");
  size_t n = 0;
  if (names.ok())
    for (const auto& name : *names) n += name.rfind("alias-", 0) != 0;
  return n;
}

// The bug this object fixes: a library with cache directory B got `hit (memory)` for a module
// only directory A had stored.
TEST(CompilationCacheTest, TwoCachesInOneProcessNeverSeeEachOthersEntries) {
  TempDir a_dir, b_dir;
  auto a = open_cache(a_dir.path());
  auto b = open_cache(b_dir.path());
  ASSERT_TRUE(a && b);
  ModuleSource source{kScale, "<test>"};
  CompileReport report;
  ASSERT_TRUE(a->compile_or_get_cached(shared_client(), source, {}, &report).ok());
  EXPECT_EQ(report.cache, kiln::CacheOutcome::kMiss);
  ASSERT_TRUE(a->compile_or_get_cached(shared_client(), source, {}, &report).ok());
  EXPECT_TRUE(report.from_memory);

  ASSERT_TRUE(b->compile_or_get_cached(shared_client(), source, {}, &report).ok());
  EXPECT_EQ(report.cache, kiln::CacheOutcome::kMiss) << "B served an executable only A had";
  EXPECT_FALSE(report.from_memory);
  EXPECT_TRUE(report.compiled);
  EXPECT_EQ(entries_in(a_dir.path()), 1u);
  EXPECT_EQ(entries_in(b_dir.path()), 1u);

  EXPECT_EQ(a->counters()["misses"], 1);
  EXPECT_EQ(a->counters()["memory_hits"], 1);
  EXPECT_EQ(b->counters()["misses"], 1);
  EXPECT_EQ(b->counters()["hits"], 0);

  // A fresh cache on A's directory (another process, or a restart) loads A's entry from disk.
  auto a_again = open_cache(a_dir.path());
  ASSERT_TRUE(a_again->compile_or_get_cached(shared_client(), source, {}, &report).ok());
  EXPECT_EQ(report.cache, kiln::CacheOutcome::kHit);
  EXPECT_FALSE(report.from_memory);
}

// The maintenance `kiln cache` does is the cache object's own: stats, listing, verification,
// eviction, export and import, clearing, each on that cache's directory only.
TEST(CompilationCacheTest, MaintenanceIsDoneThroughTheCacheObjectOnItsOwnDirectory) {
  TempDir a_dir, b_dir;
  auto a = open_cache(a_dir.path());
  auto b = open_cache(b_dir.path());
  ASSERT_TRUE(a && b);
  const char* kDouble = R"(module @double {
  func.func @double(%a: tensor<8xf32>) -> tensor<8xf32> {
    %r = arith.mulf %a, %a : tensor<8xf32>
    return %r : tensor<8xf32>
  }
})";
  CompileReport scale_report;
  ASSERT_TRUE(
      a->compile_or_get_cached(shared_client(), {kScale, "<test>"}, {}, &scale_report).ok());
  ASSERT_TRUE(a->compile_or_get_cached(shared_client(), {kDouble, "<test>"}, {}).ok());

  auto stats = a->directory_stats();
  ASSERT_TRUE(stats.ok()) << stats.status().to_string();
  EXPECT_EQ(stats->directory, a_dir.path());
  EXPECT_EQ(stats->executables, 2);
  EXPECT_GT(stats->bytes, 0);
  EXPECT_EQ(stats->counters.at("writes"), 2);
  EXPECT_EQ(b->directory_stats()->executables, 0);  // the other tenant is untouched

  auto entries = a->list_entries();
  ASSERT_TRUE(entries.ok());
  std::set<std::string> modules;
  for (const CacheEntrySummary& e : *entries) {
    EXPECT_TRUE(e.problem.ok()) << e.problem.to_string();
    modules.insert(e.metadata.module_name);
  }
  EXPECT_EQ(modules, (std::set<std::string>{"scale", "double"}));

  // A bundle carries both entries to the other cache, which then hits without compiling.
  auto bundle = a->export_bundle();
  ASSERT_TRUE(bundle.ok()) << bundle.status().to_string();
  auto imported = b->import_bundle(*bundle);
  ASSERT_TRUE(imported.ok()) << imported.status().to_string();
  EXPECT_EQ(imported->imported, 2);
  CompileReport from_bundle;
  ASSERT_TRUE(b->compile_or_get_cached(shared_client(), {kScale, "<test>"}, {}, &from_bundle).ok());
  EXPECT_FALSE(from_bundle.compiled);

  // A damaged entry is found and removed by verify, and only that one.
  std::string path = a->local_store()->entry_path(scale_report.key);
  auto bytes = read_file(path);
  ASSERT_TRUE(bytes.ok());
  std::string damaged = *bytes;
  damaged[damaged.size() / 2] ^= 0x5a;
  ASSERT_TRUE(Env::posix()->remove_file(path).ok());
  ASSERT_TRUE(Env::posix()->write_file(path, damaged, false).ok());
  auto verified = a->verify(/*load=*/false);
  ASSERT_TRUE(verified.ok()) << verified.status().to_string();
  EXPECT_EQ(verified->verified, 2);
  ASSERT_EQ(verified->removed.size(), 1u);
  EXPECT_EQ(verified->removed[0].first, scale_report.key);
  EXPECT_EQ(a->directory_stats()->executables, 1);
  EXPECT_EQ(a->directory_stats()->counters.at("corrupt"), 1);

  ASSERT_TRUE(b->evict(-1, 1).ok());
  EXPECT_EQ(b->directory_stats()->executables, 1);
  ASSERT_TRUE(b->clear().ok());
  EXPECT_EQ(b->directory_stats()->executables, 0);
  EXPECT_EQ(a->directory_stats()->executables, 1);

  CompilationCacheOptions off;
  off.enabled = false;
  auto disabled = CompilationCache::open(off);
  ASSERT_TRUE(disabled.ok());
  EXPECT_EQ((*disabled)->directory_stats().status().code(), StatusCode::kInvalidArgument);
}

TEST(CompilationCacheTest, ErrorHandlersBelongToTheirCache) {
  TempDir a_dir, b_dir;
  auto a = open_cache(a_dir.path());
  auto b = open_cache(b_dir.path());
  ASSERT_TRUE(a && b);
  a->register_error_handler([](const Status&) -> std::optional<Status> {
    return invalid_argument("tenant A's message");
  });
  ModuleSource source{kBroken, "<test>"};
  auto from_a = a->compile_or_get_cached(shared_client(), source, {});
  auto from_b = b->compile_or_get_cached(shared_client(), source, {});
  ASSERT_FALSE(from_a.ok());
  ASSERT_FALSE(from_b.ok());
  EXPECT_THAT(from_a.status().message(), HasSubstr("tenant A's message"));
  EXPECT_THAT(from_b.status().message(), ::testing::Not(HasSubstr("tenant A's message")));
}

TEST(CompilationCacheTest, ADisabledCacheCompilesEveryTimeAndWritesNothing) {
  TempDir dir;
  CompilationCacheOptions options;
  options.enabled = false;
  options.directory = dir.path();
  auto cache = CompilationCache::open(options);
  ASSERT_TRUE(cache.ok());
  EXPECT_EQ((*cache)->store(), nullptr);
  ModuleSource source{kScale, "<test>"};
  for (int i = 0; i < 2; ++i) {
    CompileReport report;
    ASSERT_TRUE((*cache)->compile_or_get_cached(shared_client(), source, {}, &report).ok());
    EXPECT_EQ(report.cache, kiln::CacheOutcome::kOff);
    EXPECT_TRUE(report.compiled);
  }
  EXPECT_FALSE(Env::posix()->file_exists(dir.file("entries")));
}

TEST(CompilationCacheTest, AnUnusableDirectoryIsAnErrorWhenOpened) {
  TempDir dir;
  ASSERT_TRUE(write_file(dir.file("a-file"), "not a directory").ok());
  CompilationCacheOptions options;
  options.directory = dir.file("a-file") + "/cache";
  auto cache = CompilationCache::open(options);
  ASSERT_FALSE(cache.ok());
  EXPECT_THAT(cache.status().message(), HasSubstr(dir.file("a-file")));
}

// With explain-cache-misses on, a write is logged like a miss; a hit's line names the key.
TEST(CompilationCacheTest, ExplainingLogsWritesAndHitsCarryTheKey) {
  TempDir dir;
  std::vector<std::pair<log::Level, std::string>> logs;
  int sink = log::add_sink([&](log::Level l, const std::string& m) { logs.emplace_back(l, m); });
  CompilationCacheOptions options;
  options.directory = dir.path();
  options.explain_cache_misses = true;
  options.log_compiles = true;
  auto cache = CompilationCache::open(options);
  ASSERT_TRUE(cache.ok());
  ModuleSource source{kScale, "<test>"};
  CompileReport miss;
  ASSERT_TRUE((*cache)->compile_or_get_cached(shared_client(), source, {}, &miss).ok());
  auto second = CompilationCache::open(options);
  CompileReport hit;
  ASSERT_TRUE((*second)->compile_or_get_cached(shared_client(), source, {}, &hit).ok());
  log::remove_sink(sink);
  ASSERT_EQ(hit.cache, kiln::CacheOutcome::kHit);
  bool wrote = false, hit_with_key = false;
  for (const auto& [level, message] : logs) {
    wrote =
        wrote || (message.find("to persistent compilation cache with key") != std::string::npos &&
                  message.find(miss.key) != std::string::npos);
    hit_with_key = hit_with_key || (message.find("cache hit") != std::string::npos &&
                                    message.find(hit.key) != std::string::npos);
  }
  EXPECT_TRUE(wrote);
  EXPECT_TRUE(hit_with_key);
}

// The default cache follows the flags; a call in flight keeps the cache it started with.
TEST(CompilationCacheTest, TheDefaultCacheIsOpenedAnewWhenItsFlagsChange) {
  config::reset();
  reset_compilation_cache_state();
  TempDir first, second;
  ASSERT_TRUE(config::set("KILN_CACHE_DIR", first.path()).ok());
  auto before = default_compilation_cache();
  ASSERT_TRUE(before.ok());
  auto same = default_compilation_cache();
  EXPECT_EQ(before->get(), same->get());
  ASSERT_TRUE(config::set("KILN_CACHE_DIR", second.path()).ok());
  auto after = default_compilation_cache();
  ASSERT_TRUE(after.ok());
  EXPECT_NE(before->get(), after->get());
  EXPECT_EQ((*before)->options().directory, first.path());
  EXPECT_EQ((*after)->options().directory, second.path());
  // The old one still works for whoever holds it.
  CompileReport report;
  ASSERT_TRUE(
      (*before)->compile_or_get_cached(shared_client(), {kScale, "<test>"}, {}, &report).ok());
  EXPECT_EQ(entries_in(first.path()), 1u);
  EXPECT_EQ(entries_in(second.path()), 0u);
  config::reset();
  reset_compilation_cache_state();
}

// Many threads of one application on one cache: one compile, everyone gets the same executable.
TEST(CompilationCacheTest, ConcurrentCallersShareOneCompile) {
  TempDir dir;
  auto cache = open_cache(dir.path());
  ASSERT_TRUE(cache);
  std::vector<std::thread> threads;
  std::vector<std::shared_ptr<Executable>> got(4);
  std::vector<CompileReport> reports(4);
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      auto exe = cache->compile_or_get_cached(shared_client(), {kScale, "<test>"}, {}, &reports[i]);
      if (exe.ok()) got[i] = *exe;
    });
  for (auto& t : threads) t.join();
  int compiled = 0;
  for (int i = 0; i < 4; ++i) {
    ASSERT_NE(got[i], nullptr);
    EXPECT_EQ(got[i], got[0]);
    compiled += reports[i].compiled;
  }
  EXPECT_EQ(compiled, 1);
}

// As XLA does, a compile option override the compiler does not know is refused, not keyed.
TEST(CompilationCacheTest, UnknownCompileOptionOverridesAreRefused) {
  TempDir dir;
  auto cache = open_cache(dir.path());
  ASSERT_TRUE(cache);
  CompileOptions options;
  options.env_option_overrides = {{"unroll", "4"}};
  auto exe = cache->compile_or_get_cached(shared_client(), {kScale, "<test>"}, options);
  ASSERT_FALSE(exe.ok());
  EXPECT_EQ(exe.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(exe.status().message(), HasSubstr("No such compile option: 'unroll'"));
  EXPECT_EQ(entries_in(dir.path()), 0u);
}

// Mirrors JAX's LRU cache tests: with eviction off a hit writes nothing (no ledger update, no
// access-time touch); with a bound set, one O(1) touch of that entry's time and nothing else.
TEST(CompilationCacheTest, ReadsDoNotWrite) {
  for (bool bounded : {false, true}) {
    TempDir dir;
    CompilationCacheOptions options;
    options.directory = dir.path();
    if (bounded) options.max_size_bytes = int64_t{1} << 30;
    ModuleSource source{kScale, "<test>"};
    {
      auto writer = CompilationCache::open(options);
      ASSERT_TRUE((*writer)->compile_or_get_cached(shared_client(), source, {}).ok());
    }
    auto names = Env::posix()->list_dir(dir.file("entries"));
    ASSERT_TRUE(names.ok());
    std::string entry;
    for (const std::string& n : *names)
      if (n.rfind("alias-", 0) != 0) entry = dir.file("entries/" + n);
    ASSERT_FALSE(entry.empty());
    ASSERT_TRUE(Env::posix()->set_mtime_micros(entry, 1'000'000).ok());
    auto ledger_before = read_file(dir.file("ledger.json"));
    ASSERT_TRUE(ledger_before.ok());

    auto reader = CompilationCache::open(options);  // another process, say
    CompileReport report;
    ASSERT_TRUE((*reader)->compile_or_get_cached(shared_client(), source, {}, &report).ok());
    ASSERT_EQ(report.cache, kiln::CacheOutcome::kHit);
    EXPECT_EQ((*reader)->counters()["hits"], 1);
    EXPECT_EQ(*read_file(dir.file("ledger.json")), *ledger_before) << "a hit rewrote the ledger";
    auto mtime = Env::posix()->mtime_micros(entry);
    ASSERT_TRUE(mtime.ok());
    if (bounded) {
      EXPECT_GT(*mtime, 1'000'000) << "with eviction on, a hit records its use";
    } else {
      EXPECT_EQ(*mtime, 1'000'000) << "with eviction off, a hit touched the entry";
    }
  }
}

// As JAX dumps the module before looking it up, KILN_DUMP_IR_TO gets the input on a hit too, under
// the name the compiler gives it on a miss.
TEST(CompilationCacheTest, IrDumpsHappenOnHitsToo) {
  config::reset();
  TempDir dir, dumps;
  ASSERT_TRUE(config::set("KILN_DUMP_IR_TO", dumps.path()).ok());
  auto cache = open_cache(dir.path());
  ASSERT_TRUE(cache);
  ModuleSource source{kScale, "<test>"};
  ASSERT_TRUE(cache->compile_or_get_cached(shared_client(), source, {}).ok());
  auto names = Env::posix()->list_dir(dumps.path());
  ASSERT_TRUE(names.ok());
  std::string input;
  for (const std::string& n : *names)
    if (n.find(".0-input.mlir") != std::string::npos) input = n;
  ASSERT_FALSE(input.empty()) << "the compile dumped no input";
  for (const std::string& n : *names) ASSERT_TRUE(Env::posix()->remove_file(dumps.file(n)).ok());

  for (bool fresh_process : {false, true}) {
    auto reader = fresh_process ? open_cache(dir.path()) : cache;
    CompileReport report;
    ASSERT_TRUE(reader->compile_or_get_cached(shared_client(), source, {}, &report).ok());
    ASSERT_EQ(report.cache, kiln::CacheOutcome::kHit);
    EXPECT_EQ(report.from_memory, !fresh_process);
    EXPECT_TRUE(Env::posix()->file_exists(dumps.file(input)))
        << (fresh_process ? "a persistent hit" : "a memory hit") << " dumped nothing";
    (void)Env::posix()->remove_file(dumps.file(input));
  }
  config::reset();
}

}  // namespace
}  // namespace kiln::testing
