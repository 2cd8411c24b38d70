// The memory tier: executables this cache has loaded, most recently used first; and the cache's
// in-memory counters.
#include "compile/cache_parts.h"

namespace kiln::cache_parts {

std::shared_ptr<Executable> MemoryTier::get(const std::string& key) {
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void MemoryTier::put(const std::string& key, std::shared_ptr<Executable> executable) {
  if (auto it = by_key_.find(key); it != by_key_.end()) lru_.erase(it->second);
  lru_.emplace_front(key, std::move(executable));
  by_key_[key] = lru_.begin();
  while (lru_.size() > capacity_) {
    by_key_.erase(lru_.back().first);
    lru_.pop_back();
  }
}

void Counters::add(const std::string& name, int64_t delta) {
  std::lock_guard<std::mutex> lock(mutex_);
  values_[name] += delta;
}

std::map<std::string, int64_t> Counters::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return values_;
}

}  // namespace kiln::cache_parts
