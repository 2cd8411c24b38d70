#include <cstring>

#include "cache/alias_record.h"
#include "core/digest.h"
#include "kiln/cache.h"
#include "kiln/kv_store.h"
#include "kiln/logging.h"

namespace kiln {
namespace {

constexpr char kFrameMagic[4] = {'K', 'R', 'C', '1'};
constexpr size_t kTagSize = kHmacTagSize;
constexpr const char* kPrefix = "kiln:cache:";

}  // namespace

RemoteCacheStore::RemoteCacheStore(std::unique_ptr<KeyValueStore> kv, std::string secret,
                                   std::string description)
    : kv_(std::move(kv)), secret_(std::move(secret)), description_(std::move(description)) {}

RemoteCacheStore::~RemoteCacheStore() = default;

Result<std::optional<std::string>> RemoteCacheStore::get(const std::string& key) {
  KILN_ASSIGN_OR_RETURN(auto framed, kv_->get(kPrefix + key));
  if (!framed.has_value()) return framed;
  std::string_view v = *framed;
  if (v.size() < 5 || std::memcmp(v.data(), kFrameMagic, 4) != 0)
    return corruption("remote cache entry " + key + " is not a kiln remote entry");
  bool tagged = v[4] == 1;
  std::string_view body = v.substr(5);
  std::string_view tag;
  if (tagged) {
    if (body.size() < kTagSize) return corruption("remote cache entry " + key + " is truncated");
    tag = body.substr(0, kTagSize);
    body = body.substr(kTagSize);
  }
  if (!secret_.empty()) {
    if (!tagged) return corruption("remote cache entry " + key + " carries no authentication tag");
    if (!same_tag(tag, hmac_tag(secret_, key, body)))
      return corruption("remote cache entry " + key +
                        " failed authentication (tampered, or "
                        "written with another secret)");
  }
  return std::optional<std::string>(std::string(body));
}

Status RemoteCacheStore::put(const std::string& key, std::string_view value) {
  std::string framed(kFrameMagic, 4);
  framed += secret_.empty() ? '\0' : '\1';
  if (!secret_.empty()) framed += hmac_tag(secret_, key, value);
  framed.append(value.data(), value.size());
  return kv_->set(kPrefix + key, framed);
}

Status RemoteCacheStore::remove(const std::string& key) { return kv_->remove(kPrefix + key); }

Result<std::vector<std::string>> RemoteCacheStore::keys() {
  return unimplemented("listing a remote cache is not supported");
}

TieredCacheStore::TieredCacheStore(CacheStore* local, std::unique_ptr<CacheStore> remote,
                                   bool remote_read_only, Env* env)
    : local_(local), remote_(std::move(remote)), remote_read_only_(remote_read_only), env_(env) {}

std::string TieredCacheStore::describe() const {
  return local_->describe() + " + remote " + remote_->describe() +
         (remote_read_only_ ? " (read-only)" : "");
}

void TieredCacheStore::note(const char* counter) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++remote_counters_[counter];
}

std::map<std::string, int64_t> TieredCacheStore::remote_counters() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return remote_counters_;
}

bool TieredCacheStore::remote_available() {
  std::lock_guard<std::mutex> lock(mutex_);
  return env_->now_micros() >= skip_until_micros_;
}

void TieredCacheStore::remote_failed(const Status& status, const std::string& what) {
  bool timeout = status.code() == StatusCode::kDeadlineExceeded;
  note(timeout ? "remote_timeouts" : "remote_errors");
  std::string message = "remote compilation cache " + remote_->describe() + ": " + what +
                        " failed (" + status.message() + "); compiling locally";
  std::lock_guard<std::mutex> lock(mutex_);
  if (++consecutive_failures_ >= 3) {
    skip_until_micros_ = env_->now_micros() + 30 * 1000000LL;
    consecutive_failures_ = 0;
    message += "; skipping the remote cache for 30 s";
  }
  log::warning(message);
}

Result<std::optional<std::string>> TieredCacheStore::get(const std::string& key) {
  KILN_ASSIGN_OR_RETURN(auto local, local_->get(key));
  if (local.has_value() || !remote_available()) return local;
  auto remote = remote_->get(key);
  if (!remote.ok()) {
    if (remote.status().code() == StatusCode::kCorruption) {
      note("remote_rejected");
      log::warning("rejected remote cache entry: " + remote.status().message());
      return std::optional<std::string>();
    }
    remote_failed(remote.status(), "reading " + key);
    return std::optional<std::string>();
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    consecutive_failures_ = 0;
  }
  bool is_alias = AliasRecord::is_alias_key(key);
  if (!remote->has_value()) {
    if (!is_alias) note("remote_misses");
    return remote;
  }
  if (!is_alias) note("remote_hits");
  (void)local_->put(key, **remote);  // warm the local tier; a failure only costs a later fetch
  return remote;
}

Status TieredCacheStore::put(const std::string& key, std::string_view value) {
  Status local = local_->put(key, value);
  if (!remote_read_only_ && remote_available()) {
    Status remote = remote_->put(key, value);
    if (!remote.ok()) remote_failed(remote, "writing " + key);
  }
  return local;
}

Status TieredCacheStore::remove(const std::string& key) {
  Status local = local_->remove(key);
  if (!remote_read_only_ && remote_available()) (void)remote_->remove(key);
  return local;
}

}  // namespace kiln
