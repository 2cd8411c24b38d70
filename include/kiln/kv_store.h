// Key-value stores shared by the processes of a job (and the remote cache tier): a Redis one for
// real deployments and an in-process one for single-process tests.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "kiln/export.h"
#include "kiln/status.h"

namespace kiln {

class KILN_EXPORT KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;
  virtual Status set(const std::string& key, std::string_view value) = 0;
  // nullopt when the key is absent.
  virtual Result<std::optional<std::string>> get(const std::string& key) = 0;
  // Waits up to `timeout_ms` for the key to appear; kDeadlineExceeded on timeout.
  virtual Result<std::string> blocking_get(const std::string& key, int64_t timeout_ms) = 0;
  virtual Status remove(const std::string& key) = 0;
};

// redis://[user:password@]host:port[/db]
struct KILN_EXPORT RedisAddress {
  std::string host = "127.0.0.1";
  int port = 6379;
  int db = 0;
  std::string user;
  std::string password;
  std::string to_string() const;  // without the password
};
KILN_EXPORT Result<RedisAddress> parse_redis_url(const std::string& url);

// One connection, reconnected on demand; every request bounded by `timeout_ms`. Thread-safe.
class KILN_EXPORT RedisKeyValueStore : public KeyValueStore {
 public:
  static Result<std::unique_ptr<RedisKeyValueStore>> connect(const RedisAddress& address,
                                                             int64_t timeout_ms);
  // Connects on first use (and again after a failure), so a server that is down now may serve
  // later.
  static std::unique_ptr<RedisKeyValueStore> create_lazy(const RedisAddress& address,
                                                         int64_t timeout_ms);
  ~RedisKeyValueStore() override;
  Status set(const std::string& key, std::string_view value) override;
  Result<std::optional<std::string>> get(const std::string& key) override;
  Result<std::string> blocking_get(const std::string& key, int64_t timeout_ms) override;
  Status remove(const std::string& key) override;

 private:
  RedisKeyValueStore(RedisAddress address, int64_t timeout_ms)
      : address_(std::move(address)),
        timeout_ms_(timeout_ms > 0 ? timeout_ms : 500) {}  // never infinite
  Status ensure_connected_locked();
  std::mutex mutex_;
  RedisAddress address_;
  int64_t timeout_ms_;
  void* context_ = nullptr;  // redisContext
};

class KILN_EXPORT InProcessKeyValueStore : public KeyValueStore {
 public:
  Status set(const std::string& key, std::string_view value) override;
  Result<std::optional<std::string>> get(const std::string& key) override;
  Result<std::string> blocking_get(const std::string& key, int64_t timeout_ms) override;
  Status remove(const std::string& key) override;

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;
};

}  // namespace kiln
