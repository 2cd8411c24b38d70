// The directory store under real concurrent processes and real crashes.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <random>
#include <thread>

#include "kiln/cache.h"
#include "test_support.h"

namespace kiln::testing {
namespace {

TEST(CacheProcessTest, EightProcessesOfMixedGetPutWithEvictionStayConsistentAndBounded) {
  TempDir dir;
  const int64_t max_bytes = 200'000;  // far below what 8 × 250 puts write: eviction all along
  std::vector<pid_t> workers;
  for (int i = 0; i < 8; ++i)
    workers.push_back(spawn_process({KILN_CACHE_WORKER, "stress", dir.path(), std::to_string(i + 1),
                                     "500", std::to_string(max_bytes)}));
  for (pid_t pid : workers) {
    ASSERT_GT(pid, 0);
    EXPECT_EQ(wait_process(pid), 0) << "a worker saw an error or a damaged entry";
  }
  auto store = DirectoryStore::open({dir.path(), max_bytes, -1, nullptr});
  ASSERT_TRUE(store.ok());
  auto stats = (*store)->stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_LE(stats->bytes, max_bytes);
  EXPECT_GT(stats->counters["evictions"], 0);
  // The ledger agrees with the directory.
  int64_t bytes = 0;
  auto keys = (*store)->keys();
  for (const auto& k : *keys)
    bytes += static_cast<int64_t>(*Env::posix()->file_size((*store)->entry_path(k)));
  EXPECT_EQ(bytes, stats->bytes);
  EXPECT_EQ(static_cast<int64_t>(keys->size()), stats->entries);
}

TEST(CacheProcessTest, WriterKilledAtRandomPointsNeverLeavesAReadablePartialEntry) {
  TempDir dir;
  std::mt19937 rng(7);
  // How long a writer takes to publish its first entry here (a sanitized build starts several
  // times slower than a plain one): kills land at random points up to twice that, so they hit
  // start-up, writes in flight and completed writes alike.
  int64_t span = 0;
  {
    TempDir probe;  // measured apart, so every entry in `dir` comes from a killed writer
    auto start = std::chrono::steady_clock::now();
    pid_t first = spawn_process({KILN_CACHE_WORKER, "write", probe.path(), "first"});
    ASSERT_GT(first, 0);
    auto store = DirectoryStore::open({probe.path(), -1, -1, nullptr});
    ASSERT_TRUE(store.ok());
    while (std::chrono::steady_clock::now() - start < std::chrono::seconds(20)) {
      auto keys = (*store)->keys();
      if (keys.ok() && !keys->empty()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    span = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                                 start)
               .count();
    kill(first, SIGKILL);
    wait_process(first);
  }
  std::uniform_int_distribution<int64_t> delay(span / 10, 2 * span);
  for (int trial = 0; trial < 200; ++trial) {
    pid_t pid = spawn_process({KILN_CACHE_WORKER, "write", dir.path(), std::to_string(trial)});
    ASSERT_GT(pid, 0);
    std::this_thread::sleep_for(std::chrono::microseconds(delay(rng)));
    kill(pid, SIGKILL);
    wait_process(pid);
  }
  auto store = DirectoryStore::open({dir.path(), -1, -1, nullptr});
  ASSERT_TRUE(store.ok());
  auto keys = (*store)->keys();
  ASSERT_TRUE(keys.ok());
  ASSERT_FALSE(keys->empty());
  for (const std::string& key : *keys) {
    auto bytes = (*store)->get(key);
    ASSERT_TRUE(bytes.ok() && bytes->has_value()) << key;
    auto decoded = decode_cache_entry(**bytes, key);
    ASSERT_TRUE(decoded.ok()) << key << ": " << decoded.status().to_string();
    EXPECT_EQ(decoded->metadata.module_name, key);
  }
}

// A writer killed at each named step of a put (KILN_CRASH_AT_STEP; src/core/crash_point.h): the
// entry is there whole or not at all, the ledger still reads, and the next writer's entry is
// stored and read back.
class CacheCrashStepTest : public ::testing::TestWithParam<const char*> {};

TEST_P(CacheCrashStepTest, WriterKilledAtTheStepLeavesAStoreThatReadsRightAndKeepsWorking) {
  std::string step = GetParam();
  TempDir dir;
  ASSERT_EQ(run_process({KILN_CACHE_WORKER, "put", dir.path(), "before"}).exit_code, 0);
  ProcessResult killed =
      run_process({KILN_CACHE_WORKER, "put", dir.path(), "victim"}, {"KILN_CRASH_AT_STEP=" + step});
  ASSERT_EQ(killed.exit_code, 128 + SIGKILL) << "the step was not reached: " << killed.err;
  ProcessResult next = run_process({KILN_CACHE_WORKER, "put", dir.path(), "after"});
  ASSERT_EQ(next.exit_code, 0) << next.err;

  auto store = DirectoryStore::open({dir.path(), -1, -1, nullptr});
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  bool victim_published = step != "cache-put:temp-written";
  for (const std::string key : {"before", "victim", "after"}) {
    auto bytes = (*store)->get(key);
    ASSERT_TRUE(bytes.ok()) << key << ": " << bytes.status().to_string();
    if (key == "victim" && !victim_published) {
      EXPECT_FALSE(bytes->has_value()) << "a partial entry became visible";
      continue;
    }
    ASSERT_TRUE(bytes->has_value()) << key;
    auto decoded = decode_cache_entry(**bytes, key);
    ASSERT_TRUE(decoded.ok()) << key << ": " << decoded.status().to_string();
    EXPECT_EQ(decoded->metadata.module_name, key);
  }
  auto stats = (*store)->stats();
  ASSERT_TRUE(stats.ok()) << stats.status().to_string();
  EXPECT_GE(stats->entries, 2);
}

INSTANTIATE_TEST_SUITE_P(NamedSteps, CacheCrashStepTest,
                         ::testing::Values("cache-put:temp-written", "cache-put:linked",
                                           "cache-ledger:temp-written"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

}  // namespace
}  // namespace kiln::testing
