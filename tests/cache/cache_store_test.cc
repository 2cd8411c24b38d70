// The cache entry format and the directory store, on real directories (faults through EnvWrapper).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

#include "cache/alias_record.h"
#include "fault_env.h"
#include "kiln/cache.h"
#include "kiln/env.h"
#include "kiln/file.h"
#include "kiln/logging.h"
#include "test_support.h"

namespace kiln::testing {
namespace {

// "k<i>"; appended rather than concatenated (GCC 12 warns falsely on "literal" + std::string).
std::string key_name(int i) {
  std::string key = "k";
  key += std::to_string(i);
  return key;
}

CacheEntryMetadata sample_metadata() {
  CacheEntryMetadata m;
  m.key = "net-0123";
  m.module_name = "net";
  m.producer_version = "test";
  m.compile_time_ms = 1234;
  m.created_micros = 42;
  m.components = {{"module", "module 'net'", std::string(64, 'a')}};
  return m;
}

TEST(CacheEntryTest, RoundTripKeepsMetadataAndPayload) {
  std::string payload(10000, 'x');
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 31);
  std::string entry = encode_cache_entry(sample_metadata(), payload);
  auto decoded = decode_cache_entry(entry, "net-0123");
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(decoded->payload, payload);
  EXPECT_EQ(decoded->metadata.module_name, "net");
  EXPECT_EQ(decoded->metadata.compile_time_ms, 1234);
  ASSERT_EQ(decoded->metadata.components.size(), 1u);
  EXPECT_EQ(decoded->metadata.components[0].digest, std::string(64, 'a'));
}

TEST(CacheEntryTest, EverySingleFlippedByteIsDetected) {
  std::string entry = encode_cache_entry(sample_metadata(), std::string(3000, 'p'));
  for (size_t i = 0; i < entry.size(); ++i) {
    for (unsigned char flip : {0x01, 0x80}) {
      std::string damaged = entry;
      damaged[i] = static_cast<char>(damaged[i] ^ flip);
      auto decoded = decode_cache_entry(damaged, "net-0123");
      ASSERT_FALSE(decoded.ok()) << "byte " << i << " flipped with " << int(flip);
      EXPECT_EQ(decoded.status().code(), StatusCode::kCorruption);
    }
  }
}

TEST(CacheEntryTest, AnEntryReadUnderAnotherKeyIsCorrupt) {
  std::string entry = encode_cache_entry(sample_metadata(), "payload");
  for (const char* other : {"net-0124", "", "net-0123 "}) {
    auto decoded = decode_cache_entry(entry, other);
    ASSERT_FALSE(decoded.ok()) << other;
    EXPECT_EQ(decoded.status().code(), StatusCode::kCorruption);
    EXPECT_THAT(decoded.status().message(), ::testing::HasSubstr("written for key 'net-0123'"));
    EXPECT_FALSE(decode_cache_entry_metadata(entry, other).ok());
  }
}

TEST(CacheEntryTest, TruncatedWrongMagicAndWrongVersionAreCorrupt) {
  std::string entry = encode_cache_entry(sample_metadata(), "payload");
  for (size_t n : {size_t{0}, size_t{10}, size_t{47}, entry.size() - 1})
    EXPECT_EQ(decode_cache_entry(entry.substr(0, n), "net-0123").status().code(),
              StatusCode::kCorruption);
  std::string magic = entry;
  magic[0] = 'X';
  EXPECT_THAT(decode_cache_entry(magic, "net-0123").status().message(),
              ::testing::HasSubstr("magic"));
  std::string version = entry;
  version[8] = 7;
  EXPECT_THAT(decode_cache_entry(version, "net-0123").status().message(),
              ::testing::HasSubstr("version 7"));
}

std::unique_ptr<DirectoryStore> open_store(const std::string& dir, Env* env, int64_t max_size = -1,
                                           int64_t max_entries = -1) {
  auto store = DirectoryStore::open({dir, max_size, max_entries, env});
  EXPECT_TRUE(store.ok()) << store.status().to_string();
  return std::move(store).value();
}

// A planted symlink under a name kiln writes must not let it truncate the victim's file.
TEST(PosixEnvTest, WritesNeverFollowASymlink) {
  TempDir dir;
  ASSERT_TRUE(write_file(dir.file("victim"), "precious").ok());
  ASSERT_EQ(symlink(dir.file("victim").c_str(), dir.file("planted").c_str()), 0);
  EXPECT_FALSE(Env::posix()->write_file(dir.file("planted"), "overwritten", true).ok());
  EXPECT_FALSE(write_file(dir.file("planted"), "overwritten").ok());
  EXPECT_EQ(*read_file(dir.file("victim")), "precious");
}

uint32_t permission_bits(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 0777;
}

TEST(DirectoryStoreTest, DirectoriesAreCreatedPrivateAndEntriesReadableOnlyByTheirOwner) {
  TempDir dir;
  std::string root = dir.file("a/b/cache");
  auto store = open_store(root, nullptr);
  ASSERT_TRUE(store->put("k1", "code").ok());
  EXPECT_EQ(permission_bits(dir.file("a")), 0700u);
  EXPECT_EQ(permission_bits(root), 0700u);
  EXPECT_EQ(permission_bits(root + "/entries"), 0700u);
  EXPECT_EQ(permission_bits(store->entry_path("k1")), 0600u);
  EXPECT_EQ(permission_bits(root + "/ledger.json"), 0600u);
}

TEST(DirectoryStoreTest, ADirectoryOtherUsersCanWriteIsRefusedNamingThePathAndTheFix) {
  TempDir dir;
  ASSERT_TRUE(open_store(dir.path(), nullptr)->put("k1", "code").ok());
  for (const std::string& path : {dir.path(), dir.path() + "/entries"}) {
    ASSERT_EQ(chmod(path.c_str(), 0777), 0);
    auto refused = DirectoryStore::open({dir.path()});
    ASSERT_FALSE(refused.ok()) << path;
    EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied);
    EXPECT_THAT(refused.status().message(), ::testing::HasSubstr(path + " is writable by other"));
    EXPECT_THAT(refused.status().message(), ::testing::HasSubstr("mode 0777"));
    EXPECT_THAT(refused.status().message(), ::testing::HasSubstr("KILN_CACHE_TRUST_SHARED_DIR"));
    // A deliberately shared team cache opts in.
    DirectoryStoreOptions shared{dir.path()};
    shared.trust_shared_directory = true;
    auto team = DirectoryStore::open(shared);
    ASSERT_TRUE(team.ok()) << team.status().to_string();
    EXPECT_EQ(**(*team)->get("k1"), "code");
    ASSERT_EQ(chmod(path.c_str(), 0700), 0);
  }
}

TEST(DirectoryStoreTest, ADirectoryOwnedByAnotherUserIsRefused) {
  TempDir dir;
  FaultEnv env;
  ASSERT_TRUE(open_store(dir.path(), &env)->put("k1", "code").ok());
  env.make_foreign(dir.path() + "/entries");
  auto refused = DirectoryStore::open({dir.path(), -1, -1, &env});
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(),
              ::testing::HasSubstr(dir.path() + "/entries is owned by uid 65534"));
}

TEST(DirectoryStoreTest, AnEntryOwnedByAnotherUserOrWritableByOthersIsNeverReturned) {
  TempDir dir;
  FaultEnv env;
  auto store = open_store(dir.path(), &env);
  ASSERT_TRUE(store->put("planted", "someone else's code").ok());
  ASSERT_TRUE(store->put("shared", "code anyone may change").ok());
  ASSERT_TRUE(store->put("mine", "my code").ok());
  env.make_foreign(store->entry_path("planted"));
  ASSERT_EQ(chmod(store->entry_path("shared").c_str(), 0666), 0);
  std::vector<std::string> warnings;
  int sink = log::add_sink([&](log::Level, const std::string& line) { warnings.push_back(line); });
  EXPECT_FALSE(store->get("planted")->has_value());
  EXPECT_FALSE(store->get("shared")->has_value());
  log::remove_sink(sink);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_THAT(warnings[0], ::testing::HasSubstr("planted.kce is owned by uid 65534"));
  EXPECT_THAT(warnings[1], ::testing::HasSubstr("shared.kce is writable by other users"));
  EXPECT_EQ(**store->get("mine"), "my code");
  // Removed, so the recompile can store this user's own entry under the key.
  EXPECT_FALSE(Env::posix()->file_exists(store->entry_path("planted")));
  ASSERT_TRUE(store->put("planted", "my own build").ok());
  EXPECT_EQ(**store->get("planted"), "my own build");
  EXPECT_EQ(store->stats()->counters["untrusted"], 2);
}

TEST(DirectoryStoreTest, UnknownKeyIsNoneAndPutThenGetReturnsTheBytes) {
  TempDir dir;
  auto store = open_store(dir.path(), nullptr);
  auto missing = store->get("nothing-here");
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());
  ASSERT_TRUE(store->put("k1", "value one").ok());
  ASSERT_TRUE(store->put("k2", "value two").ok());
  EXPECT_EQ(**store->get("k1"), "value one");
  EXPECT_EQ(**store->get("k2"), "value two");
  auto stats = store->stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->entries, 2);
  EXPECT_EQ(stats->bytes, 18);
}

TEST(DirectoryStoreTest, FirstWriterWins) {
  TempDir dir;
  auto a = open_store(dir.path(), nullptr);
  auto b = open_store(dir.path(), nullptr);
  ASSERT_TRUE(a->put("k", "first").ok());
  ASSERT_TRUE(b->put("k", "second").ok());
  EXPECT_EQ(**b->get("k"), "first");
}

// Two processes that both miss the existence check: the second one's link finds the first one's
// entry (kAlreadyExists), which is the race lost, not an error; the entry and the ledger keep one.
TEST(DirectoryStoreTest, ALinkLosingTheRaceToAnotherWriterIsNotAnError) {
  TempDir dir;
  FaultEnv env;
  env.hide_existing_files = true;
  auto first = open_store(dir.path(), nullptr);
  auto second = open_store(dir.path(), &env);
  ASSERT_TRUE(first->put("k", "first").ok());
  Status lost = second->put("k", "second");
  EXPECT_TRUE(lost.ok()) << lost.to_string();
  EXPECT_EQ(**first->get("k"), "first");
  EXPECT_EQ(first->stats()->entries, 1);

  Status exists = Env::posix()->link_file(dir.path() + "/ledger.json", dir.path() + "/ledger.json");
  EXPECT_EQ(exists.code(), StatusCode::kAlreadyExists) << exists.to_string();
}

// Raw-bytes alias records have one type: their keys are told apart from entries' keys, and a
// damaged record decodes to nothing (the key is then computed the slow way), never to a key.
TEST(AliasRecordTest, RoundTripsAndDamagedRecordsDecodeToNothing) {
  AliasRecord record{"mlp", std::string(64, 'a'), "module 'mlp', 120 canonical text bytes"};
  std::optional<AliasRecord> back = AliasRecord::decode(record.encode());
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->module_name, "mlp");
  EXPECT_EQ(back->module_digest, record.module_digest);
  EXPECT_EQ(back->description, record.description);
  EXPECT_TRUE(AliasRecord::is_alias_key(AliasRecord::key_for(std::string(64, 'b'))));
  EXPECT_FALSE(AliasRecord::is_alias_key(std::string(64, 'b')));
  std::string encoded = record.encode();
  EXPECT_FALSE(AliasRecord::decode(encoded.substr(0, encoded.size() - 1)).has_value());
  EXPECT_FALSE(AliasRecord::decode("mlp\nshort\nmodule\n").has_value());
  EXPECT_FALSE(AliasRecord::decode("").has_value());
}

TEST(DirectoryStoreTest, InvalidKeysAreRejected) {
  TempDir dir;
  auto store = open_store(dir.path(), nullptr);
  EXPECT_FALSE(store->put("../escape", "x").ok());
  EXPECT_FALSE(store->get("a/b").ok());
}

TEST(DirectoryStoreTest, MaxSizeZeroStoresNothing) {
  TempDir dir;
  auto store = open_store(dir.path(), nullptr, /*max_size=*/0);
  ASSERT_TRUE(store->put("k", "value").ok());
  EXPECT_FALSE(store->get("k")->has_value());
}

TEST(DirectoryStoreTest, ValueLargerThanMaxSizeIsRejectedWithAWarning) {
  TempDir dir;
  std::vector<std::string> warnings;
  int sink = log::add_sink([&](log::Level level, const std::string& m) {
    if (level == log::Level::kWarning) warnings.push_back(m);
  });
  auto store = open_store(dir.path(), nullptr, /*max_size=*/100);
  ASSERT_TRUE(store->put("big", std::string(101, 'b')).ok());
  log::remove_sink(sink);
  EXPECT_FALSE(store->get("big")->has_value());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], ::testing::HasSubstr("larger than the cache's maximum size of 100"));
}

TEST(DirectoryStoreTest, EvictsLeastRecentlyUsedAcrossTwoStoreInstances) {
  TempDir dir;
  FaultEnv env;
  auto a = open_store(dir.path(), &env, /*max_size=*/300);
  auto b = open_store(dir.path(), &env, /*max_size=*/300);
  ASSERT_TRUE(a->put("one", std::string(100, '1')).ok());
  env.now += 10;
  ASSERT_TRUE(b->put("two", std::string(100, '2')).ok());
  env.now += 10;
  ASSERT_TRUE(a->put("three", std::string(100, '3')).ok());
  env.now += 10;
  ASSERT_TRUE(b->get("one")->has_value());  // "one" is now the most recently used
  env.now += 10;
  // 400 > 300: as JAX's LRUCache, evict the least recently used until the rest fit.
  ASSERT_TRUE(a->put("four", std::string(100, '4')).ok());
  EXPECT_TRUE(a->get("one")->has_value());
  EXPECT_FALSE(a->get("two")->has_value());
  EXPECT_TRUE(a->get("three")->has_value());
  EXPECT_TRUE(b->get("four")->has_value());
  auto stats = a->stats();
  EXPECT_EQ(stats->entries, 3);
  EXPECT_EQ(stats->bytes, 300);
  EXPECT_EQ(stats->counters["evictions"], 1);
}

// Raw-bytes alias records are tiny pointers to keys: they never count against the entry bound.
TEST(DirectoryStoreTest, AliasRecordsDoNotCountAgainstTheEntryBound) {
  TempDir dir;
  FaultEnv env;
  auto store = open_store(dir.path(), &env, -1, /*max_entries=*/2);
  for (int i = 0; i < 2; ++i) {
    env.now += 10;
    ASSERT_TRUE(store->put("alias-" + std::string(64, char('a' + i)), "m\nd\ndesc\n").ok());
    env.now += 10;
    ASSERT_TRUE(store->put(key_name(i), "value").ok());
  }
  auto stats = store->stats();
  EXPECT_EQ(stats->entries, 4) << "an alias record pushed an entry out";
  EXPECT_EQ(stats->alias_records, 2);
  env.now += 10;
  ASSERT_TRUE(store->put(key_name(2), "value").ok());  // a third entry: the oldest entry goes
  stats = store->stats();
  EXPECT_EQ(stats->entries, 4);
  EXPECT_EQ(stats->alias_records, 2);
  EXPECT_FALSE(store->get(key_name(0))->has_value());
  EXPECT_TRUE(store->get(key_name(1))->has_value());
  EXPECT_TRUE(store->get(key_name(2))->has_value());
}

TEST(DirectoryStoreTest, EntryCountIsBounded) {
  TempDir dir;
  FaultEnv env;
  auto store = open_store(dir.path(), &env, -1, /*max_entries=*/10);
  for (int i = 0; i < 25; ++i) {
    env.now += 1;
    ASSERT_TRUE(store->put(key_name(i), "v").ok());
    ASSERT_LE(store->stats()->entries, 10);
  }
  EXPECT_TRUE(store->get("k24")->has_value());
  EXPECT_FALSE(store->get("k0")->has_value());
}

TEST(DirectoryStoreTest, GetAndPutNeverListTheDirectoryBelowTheBounds) {
  TempDir dir;
  FaultEnv env;
  auto store = open_store(dir.path(), &env, /*max_size=*/1 << 30, /*max_entries=*/100000);
  for (int i = 0; i < 300; ++i) {
    ASSERT_TRUE(store->put(key_name(i), "value").ok());
    ASSERT_TRUE(store->get(key_name(i / 2))->has_value());
  }
  EXPECT_EQ(env.listings.load(), 0);
}

TEST(DirectoryStoreTest, FailedWritesLeaveNoEntryAndNoTempFiles) {
  TempDir dir;
  FaultEnv env;
  env.fail_entry_writes = true;  // a torn write, then a full disk
  auto store = open_store(dir.path(), &env);
  Status put = store->put("k", std::string(1000, 'v'));
  ASSERT_FALSE(put.ok());
  EXPECT_THAT(put.message(), ::testing::HasSubstr("No space left on device"));
  EXPECT_FALSE(store->get("k")->has_value());
  auto leftovers = Env::posix()->list_dir(dir.path() + "/tmp");
  ASSERT_TRUE(leftovers.ok());
  EXPECT_TRUE(leftovers->empty());
}

TEST(DirectoryStoreTest, GcAndClear) {
  TempDir dir;
  FaultEnv env;
  auto store = open_store(dir.path(), &env);
  for (int i = 0; i < 5; ++i) {
    env.now += 1000;
    ASSERT_TRUE(store->put(key_name(i), std::string(10, 'x')).ok());
  }
  ASSERT_TRUE(store->evict_to(-1, 3, -1).ok());
  EXPECT_EQ(store->stats()->entries, 3);
  EXPECT_FALSE(store->get("k1")->has_value());
  ASSERT_TRUE(store->evict_to(-1, -1, env.now.load() - 500).ok());  // older than the newest
  EXPECT_EQ(store->stats()->entries, 1);
  ASSERT_TRUE(store->clear().ok());
  EXPECT_EQ(store->stats()->entries, 0);
  EXPECT_TRUE(store->keys()->empty());
}

}  // namespace
}  // namespace kiln::testing
