#include "kiln/kv_store.h"

#include <hiredis/hiredis.h>
#include <poll.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <regex>
#include <thread>

namespace kiln {
namespace {

timeval to_timeval(int64_t ms) {
  timeval tv;
  tv.tv_sec = ms / 1000;
  tv.tv_usec = (ms % 1000) * 1000;
  return tv;
}

// A request that ran out of time is kDeadlineExceeded (callers count timeouts apart); a server
// that cannot be reached or drops the connection is kUnavailable.
Status connection_error(redisContext* c, const std::string& what) {
  std::string why = c ? c->errstr : "cannot allocate a connection";
  bool timeout = c && ((c->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK)) ||
                       why.find("temporarily unavailable") != std::string::npos ||
                       why.find("timed out") != std::string::npos);
  if (timeout) return deadline_exceeded(what + ": timed out");
  return unavailable(what + ": " + why);
}

// One deadline for the whole request: sending it and reading the complete reply. hiredis's own
// timeout applies per socket read, so a server trickling one byte at a time could hold a request
// forever. On expiry the connection is marked broken (its buffer may hold half a reply) and the
// next request reconnects.
redisReply* command_within(redisContext* c, int64_t timeout_ms, const char* format, ...) {
  va_list args;
  va_start(args, format);
  int appended = redisvAppendCommand(c, format, args);
  va_end(args);
  if (appended != REDIS_OK) return nullptr;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  auto fail_timed_out = [&]() -> redisReply* {
    c->err = REDIS_ERR_IO;  // Debian 12's hiredis has no REDIS_ERR_TIMEOUT
    std::snprintf(c->errstr, sizeof(c->errstr), "timed out after %lld ms",
                  static_cast<long long>(timeout_ms));
    return nullptr;
  };
  auto wait_for = [&](short events) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) return false;
    pollfd fd{c->fd, events, 0};
    return poll(&fd, 1, static_cast<int>(left)) > 0;
  };
  for (int done = 0; !done;) {
    if (!wait_for(POLLOUT)) return fail_timed_out();
    if (redisBufferWrite(c, &done) != REDIS_OK) return nullptr;
  }
  void* reply = nullptr;
  while (true) {
    if (redisGetReplyFromReader(c, &reply) != REDIS_OK) return nullptr;
    if (reply != nullptr) return static_cast<redisReply*>(reply);
    if (!wait_for(POLLIN)) return fail_timed_out();
    if (redisBufferRead(c) != REDIS_OK) return nullptr;
  }
}

}  // namespace

std::string RedisAddress::to_string() const {
  return "redis://" + (user.empty() && password.empty() ? "" : user + ":***@") + host + ":" +
         std::to_string(port) + "/" + std::to_string(db);
}

// Whatever stands between "//" and the last '@' may be a password: never print it.
std::string redact_credentials(const std::string& url) {
  size_t start = url.find("//");
  size_t at = url.rfind('@');
  if (start == std::string::npos || at == std::string::npos || at < start) return url;
  return url.substr(0, start + 2) + "***" + url.substr(at);
}

Result<RedisAddress> parse_redis_url(const std::string& url) {
  static const std::regex pattern(
      R"(redis://(?:([^:@/]*)(?::([^@/]*))?@)?([^:/]+)(?::(\d+))?(?:/(\d+))?/?)");
  std::smatch m;
  if (!std::regex_match(url, m, pattern))
    return invalid_argument("'" + redact_credentials(url) +
                            "' is not a Redis URL: use redis://[user:password@]host:port[/db] "
                            "(a password with '/', '@' or ':' cannot be written in the URL)");
  RedisAddress a;
  if (m[2].matched) {
    a.user = m[1].str();
    a.password = m[2].str();
  } else if (m[1].matched) {
    a.password = m[1].str();  // redis://password@host
  }
  a.host = m[3].str();
  // Digits only (the pattern says so), but perhaps too many for an int.
  auto number = [&](const std::string& digits, int max, const char* what) -> Result<int> {
    long value = digits.size() > 9 ? long{max} + 1 : std::stol(digits);
    if (value > max)
      return invalid_argument("'" + redact_credentials(url) + "' has " + what + " " + digits +
                              "; it must be at most " + std::to_string(max));
    return static_cast<int>(value);
  };
  if (m[4].matched) {
    KILN_ASSIGN_OR_RETURN(a.port, number(m[4].str(), 65535, "port"));
    if (a.port == 0) return invalid_argument("'" + redact_credentials(url) + "' has port 0");
  }
  if (m[5].matched) {
    KILN_ASSIGN_OR_RETURN(a.db, number(m[5].str(), 1 << 20, "database"));
  }
  return a;
}

Result<std::unique_ptr<RedisKeyValueStore>> RedisKeyValueStore::connect(const RedisAddress& address,
                                                                        int64_t timeout_ms) {
  std::unique_ptr<RedisKeyValueStore> store(new RedisKeyValueStore(address, timeout_ms));
  std::lock_guard<std::mutex> lock(store->mutex_);
  KILN_RETURN_IF_ERROR(store->ensure_connected_locked());
  return store;
}

std::unique_ptr<RedisKeyValueStore> RedisKeyValueStore::create_lazy(const RedisAddress& address,
                                                                    int64_t timeout_ms) {
  return std::unique_ptr<RedisKeyValueStore>(new RedisKeyValueStore(address, timeout_ms));
}

RedisKeyValueStore::~RedisKeyValueStore() {
  if (context_) redisFree(static_cast<redisContext*>(context_));
}

Status RedisKeyValueStore::ensure_connected_locked() {
  auto* c = static_cast<redisContext*>(context_);
  if (c != nullptr && c->err == 0) return Status();
  if (c != nullptr) redisFree(c);
  context_ = nullptr;
  c = redisConnectWithTimeout(address_.host.c_str(), address_.port, to_timeval(timeout_ms_));
  if (c == nullptr || c->err) {
    Status s = connection_error(c, "cannot connect to " + address_.to_string());
    if (c) redisFree(c);
    return s;
  }
  redisSetTimeout(c, to_timeval(timeout_ms_));
  auto command = [&](redisReply* r) -> Status {
    if (r == nullptr) return connection_error(c, "Redis at " + address_.to_string());
    Status s = r->type == REDIS_REPLY_ERROR
                   ? invalid_argument("Redis at " + address_.to_string() + " refused: " + r->str)
                   : Status();
    freeReplyObject(r);
    return s;
  };
  Status s;
  if (!address_.password.empty()) {
    s = address_.user.empty()
            ? command(static_cast<redisReply*>(
                  command_within(c, timeout_ms_, "AUTH %s", address_.password.c_str())))
            : command(static_cast<redisReply*>(command_within(
                  c, timeout_ms_, "AUTH %s %s", address_.user.c_str(), address_.password.c_str())));
  }
  if (s.ok() && address_.db != 0)
    s = command(static_cast<redisReply*>(command_within(c, timeout_ms_, "SELECT %d", address_.db)));
  if (!s.ok()) {
    redisFree(c);
    return s;
  }
  context_ = c;
  return Status();
}

Status RedisKeyValueStore::set(const std::string& key, std::string_view value) {
  std::lock_guard<std::mutex> lock(mutex_);
  KILN_RETURN_IF_ERROR(ensure_connected_locked());
  auto* c = static_cast<redisContext*>(context_);
  auto* r = static_cast<redisReply*>(command_within(c, timeout_ms_, "SET %b %b", key.data(),
                                                    key.size(), value.data(), value.size()));
  if (r == nullptr) return connection_error(c, "Redis SET " + key);
  Status s = r->type == REDIS_REPLY_ERROR ? io_error(std::string("Redis SET refused: ") + r->str)
                                          : Status();
  freeReplyObject(r);
  return s;
}

Result<std::optional<std::string>> RedisKeyValueStore::get(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  KILN_RETURN_IF_ERROR(ensure_connected_locked());
  auto* c = static_cast<redisContext*>(context_);
  auto* r =
      static_cast<redisReply*>(command_within(c, timeout_ms_, "GET %b", key.data(), key.size()));
  if (r == nullptr) return connection_error(c, "Redis GET " + key);
  Result<std::optional<std::string>> out = std::optional<std::string>();
  if (r->type == REDIS_REPLY_STRING)
    out = std::optional<std::string>(std::string(r->str, r->len));
  else if (r->type == REDIS_REPLY_ERROR)
    out = io_error(std::string("Redis GET refused: ") + r->str);
  freeReplyObject(r);
  return out;
}

Result<std::string> RedisKeyValueStore::blocking_get(const std::string& key, int64_t timeout_ms) {
  // Polling with a short back-off keeps one simple code path for values of any size.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  int64_t sleep_ms = 1;
  while (true) {
    KILN_ASSIGN_OR_RETURN(auto value, get(key));
    if (value.has_value()) return std::move(*value);
    if (std::chrono::steady_clock::now() >= deadline)
      return deadline_exceeded("timed out after " + std::to_string(timeout_ms) +
                               " ms waiting for " + key);
    std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    sleep_ms = std::min<int64_t>(sleep_ms * 2, 20);
  }
}

Status RedisKeyValueStore::remove(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  KILN_RETURN_IF_ERROR(ensure_connected_locked());
  auto* c = static_cast<redisContext*>(context_);
  auto* r =
      static_cast<redisReply*>(command_within(c, timeout_ms_, "DEL %b", key.data(), key.size()));
  if (r == nullptr) return connection_error(c, "Redis DEL " + key);
  freeReplyObject(r);
  return Status();
}

Status InProcessKeyValueStore::set(const std::string& key, std::string_view value) {
  std::lock_guard<std::mutex> lock(mutex_);
  values_[key] = std::string(value);
  changed_.notify_all();
  return Status();
}

Result<std::optional<std::string>> InProcessKeyValueStore::get(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = values_.find(key);
  if (it == values_.end()) return std::optional<std::string>();
  return std::optional<std::string>(it->second);
}

Result<std::string> InProcessKeyValueStore::blocking_get(const std::string& key,
                                                         int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mutex_);
  bool found = changed_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                                 [&] { return values_.count(key) > 0; });
  if (!found)
    return deadline_exceeded("timed out after " + std::to_string(timeout_ms) + " ms waiting for " +
                             key);
  return values_[key];
}

Status InProcessKeyValueStore::remove(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  values_.erase(key);
  return Status();
}

}  // namespace kiln
