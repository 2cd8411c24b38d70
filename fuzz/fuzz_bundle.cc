// The bundle reader (`kiln cache import`): into a store in memory, with and without a secret. A
// bundle imports whole or not at all, and only records that decode under their own key.
#include <cstdlib>
#include <map>
#include <string>

#include "core/digest.h"
#include "fuzz_support.h"
#include "kiln/cache.h"

namespace {

class MemoryStore : public kiln::CacheStore {
 public:
  kiln::Result<std::optional<std::string>> get(const std::string& key) override {
    auto it = entries_.find(key);
    if (it == entries_.end()) return std::optional<std::string>();
    return std::optional<std::string>(it->second);
  }
  kiln::Status put(const std::string& key, std::string_view value) override {
    entries_.emplace(key, std::string(value));
    return kiln::Status();
  }
  kiln::Status remove(const std::string& key) override {
    entries_.erase(key);
    return kiln::Status();
  }
  kiln::Result<std::vector<std::string>> keys() override {
    std::vector<std::string> out;
    for (const auto& [key, value] : entries_) out.push_back(key);
    return out;
  }
  void count(const std::string&, int64_t) override {}
  kiln::Result<kiln::CacheStats> stats() override { return kiln::CacheStats(); }
  std::string describe() const override { return "memory"; }
  const std::map<std::string, std::string>& entries() const { return entries_; }

 private:
  std::map<std::string, std::string> entries_;
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kiln::fuzz::quiet_logs();
  return 0;
}

namespace {

void import_both_ways(std::string_view bundle) {
  for (const char* secret : {"", "fuzz-secret"}) {
    MemoryStore store;
    kiln::Result<kiln::BundleImport> imported = kiln::import_cache_bundle(store, bundle, secret);
    if (!imported.ok()) {
      if (!store.entries().empty()) std::abort();  // a refused bundle writes nothing
      continue;
    }
    if (static_cast<size_t>(imported->imported) != store.entries().size()) std::abort();
    for (const auto& [key, entry] : store.entries())
      if (!kiln::decode_cache_entry(entry, key).ok()) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bundle = kiln::fuzz::as_view(data, size);
  import_both_ways(bundle);
  // Again with an unsigned bundle's trailing checksum (XXH3 over all before it) made valid, so
  // the record parser sees the mutants.
  constexpr size_t kMagicSize = 8;
  if (bundle.size() >= kMagicSize + 8 && bundle.substr(0, kMagicSize) == "KILNBND1") {
    std::string fixed(bundle);
    size_t at = fixed.size() - 8;
    kiln::fuzz::put_u64(fixed, at, kiln::xxh3_64(bundle.substr(0, at)));
    import_both_ways(fixed);
  }
  return 0;
}
