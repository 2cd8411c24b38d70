// The Redis key-value store and the remote cache tier, against a real redis-server.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "kiln/compile.h"
#include "kiln/config.h"
#include "kiln/file.h"
#include "kiln/logging.h"
#include "kiln/npy.h"
#include "redis_fixture.h"
#include "test_support.h"

namespace kiln::testing {
namespace {

using ::testing::HasSubstr;

TEST(RedisUrlTest, ParsesEveryPart) {
  auto a = parse_redis_url("redis://alice:pw@10.0.0.2:6380/3");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->user, "alice");
  EXPECT_EQ(a->password, "pw");
  EXPECT_EQ(a->host, "10.0.0.2");
  EXPECT_EQ(a->port, 6380);
  EXPECT_EQ(a->db, 3);
  EXPECT_EQ(a->to_string(), "redis://alice:***@10.0.0.2:6380/3");
  auto b = parse_redis_url("redis://localhost");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->port, 6379);
  EXPECT_FALSE(parse_redis_url("http://x").ok());
}

TEST(RedisUrlTest, PasswordsNeverAppearInErrors) {
  auto bad = parse_redis_url("redis://alice:se/cret@10.0.0.2:6380");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), ::testing::Not(HasSubstr("se/cret")));
  EXPECT_THAT(bad.status().message(), HasSubstr("redis://***@10.0.0.2:6380"));
}

// A server that accepts, reads the request, then sends a valid-looking reply one byte every
// 200 ms and never finishes it.
class TricklingServer {
 public:
  TricklingServer() {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    socklen_t len = sizeof addr;
    getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    listen(listener_, 4);
    thread_ = std::thread([this] {
      int client = accept(listener_, nullptr, nullptr);
      if (client < 0) return;
      char buffer[256];
      (void)read(client, buffer, sizeof buffer);
      const char reply[] = "$100000\r\n";
      for (size_t i = 0; !stop_ && i < sizeof(reply) - 1 + 1000; ++i) {
        char byte = i < sizeof(reply) - 1 ? reply[i] : 'x';
        if (write(client, &byte, 1) != 1) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
      close(client);
    });
  }
  ~TricklingServer() {
    stop_ = true;
    shutdown(listener_, SHUT_RDWR);
    close(listener_);
    thread_.join();
  }
  RedisAddress address() const {
    RedisAddress a;
    a.host = "127.0.0.1";
    a.port = port_;
    return a;
  }

 private:
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST(RedisKeyValueStoreTest, ATricklingServerFailsWithinTheDeadline) {
  TricklingServer server;
  auto kv = RedisKeyValueStore::connect(server.address(), 1000);
  ASSERT_TRUE(kv.ok()) << kv.status().to_string();
  auto start = std::chrono::steady_clock::now();
  auto value = (*kv)->get("k");
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(value.ok());
  EXPECT_EQ(value.status().code(), StatusCode::kDeadlineExceeded) << value.status().to_string();
  EXPECT_THAT(value.status().message(), HasSubstr("timed out"));
  // The whole request has one 1 s deadline; each byte arriving within 200 ms must not extend it.
  EXPECT_LT(seconds, 5.0);
}

TEST(RedisKeyValueStoreTest, AServerNobodyRunsIsUnavailableNotATimeout) {
  int port = free_loopback_port();  // nothing listens there
  auto kv = RedisKeyValueStore::connect(
      *parse_redis_url("redis://127.0.0.1:" + std::to_string(port)), 1000);
  Status status = kv.ok() ? (*kv)->set("k", "v") : kv.status();
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status.to_string();
}

TEST(RedisKeyValueStoreTest, SetGetRemoveBlockingGetAndLargeValues) {
  RedisServer server;
  // The deadline covers a whole request; 30 MB on a loaded 2-core CI machine (other tests running
  // beside this one) can take seconds, and this test is about values, not deadlines.
  auto kv = RedisKeyValueStore::connect(server.address(), 60000);
  ASSERT_TRUE(kv.ok()) << kv.status().to_string();
  EXPECT_FALSE((*kv)->get("absent")->has_value());
  ASSERT_TRUE((*kv)->set("k", "v").ok());
  EXPECT_EQ(**(*kv)->get("k"), "v");
  ASSERT_TRUE((*kv)->remove("k").ok());
  EXPECT_FALSE((*kv)->get("k")->has_value());

  std::string big(30 << 20, '\0');
  for (size_t i = 0; i < big.size(); i += 4096) big[i] = static_cast<char>(i / 4096);
  auto stored = (*kv)->set("big", big);
  ASSERT_TRUE(stored.ok()) << stored.to_string();
  auto fetched = (*kv)->get("big");
  ASSERT_TRUE(fetched.ok()) << fetched.status().to_string();
  ASSERT_TRUE(fetched->has_value());
  EXPECT_TRUE(**fetched == big) << "the 30 MB value came back changed";

  auto timed_out = (*kv)->blocking_get("later", 100);
  ASSERT_FALSE(timed_out.ok());
  EXPECT_EQ(timed_out.status().code(), StatusCode::kDeadlineExceeded);
  std::thread writer([&] {
    auto other = RedisKeyValueStore::connect(server.address(), 2000);
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    (void)(*other)->set("later", "arrived");
  });
  auto arrived = (*kv)->blocking_get("later", 5000);
  writer.join();
  ASSERT_TRUE(arrived.ok());
  EXPECT_EQ(*arrived, "arrived");
}

TEST(RedisKeyValueStoreTest, AuthWithPasswordAndAClearErrorForAWrongOne) {
  RedisServer server("hunter2");
  auto good = RedisKeyValueStore::connect(server.address(), 2000);
  ASSERT_TRUE(good.ok()) << good.status().to_string();
  ASSERT_TRUE((*good)->set("k", "v").ok());
  RedisAddress wrong = server.address();
  wrong.password = "nope";
  auto bad = RedisKeyValueStore::connect(wrong, 2000);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("refused"));
}

TEST(InProcessKeyValueStoreTest, BlockingGetWakesOnSet) {
  InProcessKeyValueStore kv;
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    (void)kv.set("x", "1");
  });
  auto got = kv.blocking_get("x", 5000);
  writer.join();
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, "1");
  EXPECT_FALSE(kv.blocking_get("y", 20).ok());
}

const char* kProgram = R"(module @remote_demo {
  func.func @f(%a: tensor<8xf32>) -> tensor<8xf32> {
    %r = math.tanh %a : tensor<8xf32>
    return %r : tensor<8xf32>
  }
})";

class RemoteCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config::reset();
    reset_compilation_cache_state();
    sink_ = log::add_sink([this](log::Level level, const std::string& m) {
      if (level == log::Level::kWarning) warnings_.push_back(m);
    });
  }
  void TearDown() override {
    log::remove_sink(sink_);
    config::reset();
    reset_compilation_cache_state();
  }
  // A fresh process on a fresh machine: empty memory, its own local directory.
  CompileReport run_on(const std::string& local_dir, const std::string& url,
                       const std::string& secret = "") {
    reset_compilation_cache_state();
    EXPECT_TRUE(config::set("KILN_CACHE_DIR", local_dir).ok());
    EXPECT_TRUE(config::set("KILN_REMOTE_CACHE", url).ok());
    EXPECT_TRUE(config::set("KILN_REMOTE_CACHE_SECRET", secret).ok());
    CompileReport report;
    auto exe =
        compile_or_get_cached(shared_client(), ModuleSource{kProgram, "<test>"}, {}, &report);
    EXPECT_TRUE(exe.ok()) << exe.status().to_string();
    return report;
  }
  // The remote tier's counters are the cache's own, in memory: a read writes nothing locally.
  int64_t counter(const std::string& name) {
    auto cache = default_compilation_cache();
    return cache.ok() ? (*cache)->counters()[name] : -1;
  }
  int64_t ledger_counter(const std::string& dir, const std::string& name) {
    auto store = DirectoryStore::open({dir, -1, -1, nullptr});
    auto stats = (*store)->stats();
    return stats.ok() ? stats->counters[name] : -1;
  }
  std::vector<std::string> warnings_;
  int sink_ = 0;
};

TEST_F(RemoteCacheTest, ASecondMachineHitsTheRemoteAndCopiesTheEntryLocally) {
  RedisServer server;
  TempDir first, second;
  CompileReport a = run_on(first.path(), server.url(), "secret");
  EXPECT_EQ(a.cache, kiln::CacheOutcome::kMiss);
  CompileReport b = run_on(second.path(), server.url(), "secret");
  EXPECT_EQ(b.cache, kiln::CacheOutcome::kHit);
  EXPECT_EQ(b.key, a.key);
  EXPECT_EQ(counter("remote_hits"), 1);
  EXPECT_EQ(ledger_counter(second.path(), "remote_hits"), 0);  // counted, not written
  EXPECT_TRUE(Env::posix()->file_exists(second.path() + "/entries/" + a.key + ".kce"));
  server.stop();  // the local copy now serves on its own
  CompileReport c = run_on(second.path(), server.url(), "secret");
  EXPECT_EQ(c.cache, kiln::CacheOutcome::kHit);
}

TEST_F(RemoteCacheTest, TamperedAndForeignSecretEntriesAreRejectedAndRecompiled) {
  RedisServer server;
  TempDir writer, tampered_reader, other_secret_reader;
  CompileReport a = run_on(writer.path(), server.url(), "secret");
  auto kv = RedisKeyValueStore::connect(server.address(), 2000);
  std::string remote_key = "kiln:cache:" + a.key;
  std::string value = **(*kv)->get(remote_key);
  value[value.size() - 10] ^= 0x01;  // a well-formed entry with one changed byte
  ASSERT_TRUE((*kv)->set(remote_key, value).ok());
  CompileReport b = run_on(tampered_reader.path(), server.url(), "secret");
  EXPECT_EQ(b.cache, kiln::CacheOutcome::kMiss);
  EXPECT_GE(counter("remote_rejected"), 1);
  EXPECT_THAT(warnings_, ::testing::Contains(HasSubstr("failed authentication")));

  // Written with another secret: rejected too.
  TempDir other_writer;
  (void)(*kv)->remove(remote_key);
  run_on(other_writer.path(), server.url(), "another secret");
  CompileReport c = run_on(other_secret_reader.path(), server.url(), "secret");
  EXPECT_EQ(c.cache, kiln::CacheOutcome::kMiss);
  EXPECT_GE(counter("remote_rejected"), 1);

  // Written without a secret: a reader that requires one rejects it.
  TempDir unsigned_writer, strict_reader;
  (void)(*kv)->remove(remote_key);
  run_on(unsigned_writer.path(), server.url(), "");
  CompileReport d = run_on(strict_reader.path(), server.url(), "secret");
  EXPECT_EQ(d.cache, kiln::CacheOutcome::kMiss);
}

TEST_F(RemoteCacheTest, ADownRemoteIsAWarningAndALocalCompile) {
  TempDir local;
  int port = free_loopback_port();  // nothing listens there
  CompileReport r = run_on(local.path(), "redis://127.0.0.1:" + std::to_string(port), "s");
  EXPECT_EQ(r.cache, kiln::CacheOutcome::kMiss);
  EXPECT_THAT(warnings_, ::testing::Contains(HasSubstr("compiling locally")));
  EXPECT_GE(counter("remote_errors"), 1);
  CompileReport again = run_on(local.path(), "redis://127.0.0.1:" + std::to_string(port), "s");
  EXPECT_EQ(again.cache, kiln::CacheOutcome::kHit);  // the local tier still works
}

TEST_F(RemoteCacheTest, ASlowRemoteTimesOutPerRequestAndIsThenSkipped) {
  // A listener that accepts connections (through its backlog) and never answers.
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(listener, 16), 0);
  socklen_t len = sizeof(addr);
  getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  std::string url = "redis://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  ASSERT_TRUE(config::set("KILN_REMOTE_CACHE_TIMEOUT_MS", "100").ok());
  TempDir local;
  auto start = std::chrono::steady_clock::now();
  CompileReport r = run_on(local.path(), url, "s");
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  close(listener);
  EXPECT_EQ(r.cache, kiln::CacheOutcome::kMiss);
  EXPECT_GE(counter("remote_timeouts"), 1);
  EXPECT_THAT(warnings_, ::testing::Contains(HasSubstr("skipping the remote cache for 30 s")));
  EXPECT_LT(seconds, 5.0);  // three 100 ms timeouts, then no more waiting
}

TEST_F(RemoteCacheTest, ReadOnlyRemoteIsNeverWritten) {
  RedisServer server;
  TempDir local;
  ASSERT_TRUE(config::set("KILN_REMOTE_CACHE_READ_ONLY", "true").ok());
  reset_compilation_cache_state();
  EXPECT_TRUE(config::set("KILN_CACHE_DIR", local.path()).ok());
  EXPECT_TRUE(config::set("KILN_REMOTE_CACHE", server.url()).ok());
  CompileReport r;
  ASSERT_TRUE(compile_or_get_cached(shared_client(), ModuleSource{kProgram, "<t>"}, {}, &r).ok());
  auto kv = RedisKeyValueStore::connect(server.address(), 2000);
  EXPECT_FALSE((*kv)->get("kiln:cache:" + r.key)->has_value());
}

TEST(RemoteCacheProcessTest, RedisStoppedDuringEightProcessesEveryProcessStillFinishesCorrectly) {
  RedisServer server;
  TempDir work;
  std::string program = program_path("../../examples/mlp.mlir");
  std::vector<pid_t> pids;
  for (int i = 0; i < 8; ++i) {
    std::string dir = work.file("cache" + std::to_string(i));
    std::string out = work.file("out" + std::to_string(i) + ".npy");
    std::vector<std::string> argv = {kiln_binary(),
                                     "--cache-dir",
                                     dir,
                                     "--set",
                                     "KILN_REMOTE_CACHE=" + server.url(),
                                     "--set",
                                     "KILN_REMOTE_CACHE_SECRET=s",
                                     "run",
                                     program,
                                     "--fill",
                                     "ones",
                                     "--output",
                                     out};
    pids.push_back(spawn_process(argv));
    if (i == 3) server.stop();  // half start with Redis, half without; some lose it mid-run
  }
  for (pid_t pid : pids) EXPECT_EQ(wait_process(pid), 0);
  for (int i = 0; i < 8; ++i) {
    auto out = read_npy(work.file("out" + std::to_string(i) + ".npy"));
    ASSERT_TRUE(out.ok()) << i;
    EXPECT_FLOAT_EQ(out->as<float>()[0], 128 * 65 + 1);
  }
}

}  // namespace
}  // namespace kiln::testing
