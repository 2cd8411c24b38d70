#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "cache/alias_record.h"
#include "cache/unique_suffix.h"
#include "core/crash_point.h"
#include "kiln/cache.h"
#include "kiln/config.h"
#include "kiln/logging.h"

namespace kiln {

const char* to_string(StoreCounter counter) {
  switch (counter) {
    case StoreCounter::kWrites:
      return "writes";
    case StoreCounter::kWriteErrors:
      return "write_errors";
    case StoreCounter::kReadErrors:
      return "read_errors";
    case StoreCounter::kCorrupt:
      return "corrupt";
    case StoreCounter::kUntrusted:
      return "untrusted";
    case StoreCounter::kEvictions:
      return "evictions";
  }
  return "?";
}
namespace {

// Keys become file names: keep them to a safe alphabet.
bool valid_key(const std::string& key) {
  if (key.empty() || key.size() > 200) return false;
  for (char c : key)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
      return false;
  return key[0] != '.';
}

constexpr const char* kEntrySuffix = ".kce";

}  // namespace

std::string cache_directory() {
  std::string dir = *config::get_string("KILN_CACHE_DIR");
  return dir.empty() ? default_cache_directory() : dir;
}

std::string default_cache_directory() {
  // The platform's places only: KILN_CACHE_DIR is a flag, read through the registry.
  if (auto xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/kiln";
  if (auto home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/kiln";
  return "/tmp/kiln-cache";
}

Result<std::unique_ptr<DirectoryStore>> DirectoryStore::open(const DirectoryStoreOptions& options) {
  DirectoryStoreOptions o = options;
  if (o.env == nullptr) o.env = Env::posix();
  if (o.directory.empty()) return invalid_argument("the cache directory is empty");
  KILN_RETURN_IF_ERROR(o.env->create_dirs(o.directory + "/entries"));
  KILN_RETURN_IF_ERROR(o.env->create_dirs(o.directory + "/tmp"));
  // The directory itself may be reached through a symlink (~/.cache on another disk); what is
  // inside it may not.
  KILN_RETURN_IF_ERROR(
      check_trusted_path(o.env, o.directory, /*follow_symlinks=*/true, o.trust_shared_directory));
  for (const char* sub : {"/entries", "/tmp"})
    KILN_RETURN_IF_ERROR(check_trusted_path(o.env, o.directory + sub, /*follow_symlinks=*/false,
                                            o.trust_shared_directory));
  return std::unique_ptr<DirectoryStore>(new DirectoryStore(std::move(o)));
}

std::string DirectoryStore::entry_path(const std::string& key) const {
  return options_.directory + "/entries/" + key + kEntrySuffix;
}

Result<CacheStats> DirectoryStore::read_ledger() {
  CacheStats stats;
  auto text = options_.env->read_file(options_.directory + "/ledger.json");
  if (!text.ok()) return stats;  // a fresh directory; rebuild_ledger recounts if entries exist
  try {
    nlohmann::json j = nlohmann::json::parse(*text);
    stats.entries = j.at("entries").get<int64_t>();
    stats.bytes = j.at("bytes").get<int64_t>();
    stats.counters = j.at("counters").get<std::map<std::string, int64_t>>();
    stats.alias_records = j.value("alias_records", int64_t{0});
  } catch (const nlohmann::json::exception&) {
    return corruption("cache ledger is damaged");
  }
  return stats;
}

Status DirectoryStore::write_ledger(const CacheStats& stats) {
  nlohmann::json j{{"entries", stats.entries},
                   {"bytes", stats.bytes},
                   {"alias_records", stats.alias_records},
                   {"counters", stats.counters}};
  std::string tmp = options_.directory + "/tmp/ledger-" + unique_suffix(options_.env);
  Status written = options_.env->write_file(tmp, j.dump(), /*sync=*/true);
  if (written.ok()) crash_point("cache-ledger:temp-written");
  if (written.ok()) written = options_.env->rename_file(tmp, options_.directory + "/ledger.json");
  if (!written.ok()) (void)options_.env->remove_file(tmp);  // a full disk leaves no temp behind
  return written;
}

Status DirectoryStore::update_ledger(const std::function<void(CacheStats&)>& change) {
  KILN_ASSIGN_OR_RETURN(auto lock, options_.env->lock_file(options_.directory + "/lock"));
  auto stats = read_ledger();
  if (!stats.ok()) {
    // Recount from the entries; counters are lost but sizes are right again.
    KILN_RETURN_IF_ERROR(write_ledger(CacheStats{}));
    lock.reset();
    KILN_RETURN_IF_ERROR(rebuild_ledger());
    KILN_ASSIGN_OR_RETURN(lock, options_.env->lock_file(options_.directory + "/lock"));
    stats = read_ledger();
    if (!stats.ok()) return stats.status();
  }
  change(*stats);
  return write_ledger(*stats);
}

Result<std::optional<std::string>> DirectoryStore::get(const std::string& key) {
  if (!valid_key(key)) return invalid_argument("invalid cache key '" + key + "'");
  std::string path = entry_path(key);
  if (!options_.env->file_exists(path)) return std::optional<std::string>();
  if (Status trusted = check_trusted_path(options_.env, path, /*follow_symlinks=*/false,
                                          options_.trust_shared_directory);
      !trusted.ok()) {
    if (trusted.code() == StatusCode::kNotFound) return std::optional<std::string>();
    // Someone else's code under our key: never loaded; removed so the recompile can store ours.
    log::warning("Ignoring cache entry: " + trusted.message());
    count(StoreCounter::kUntrusted);
    (void)remove(key);
    return std::optional<std::string>();
  }
  auto bytes = options_.env->read_file(path);
  if (!bytes.ok()) {
    if (!options_.env->file_exists(path)) return std::optional<std::string>();  // evicted meanwhile
    return bytes.status();
  }
  // With eviction on, record the use for LRU (one O(1) touch; a failure only makes eviction order
  // less exact). Without bounds a read writes nothing.
  if (options_.max_size_bytes > 0 || options_.max_entries > 0)
    (void)options_.env->set_mtime_micros(path, options_.env->now_micros());
  return std::optional<std::string>(std::move(*bytes));
}

Status DirectoryStore::put(const std::string& key, std::string_view value) {
  if (!valid_key(key)) return invalid_argument("invalid cache key '" + key + "'");
  if (options_.max_size_bytes == 0) return Status();  // a zero-size cache stores nothing
  if (options_.max_size_bytes > 0 && static_cast<int64_t>(value.size()) > options_.max_size_bytes) {
    log::warning("Cache entry " + key + " of " + std::to_string(value.size()) +
                 " bytes is larger than the cache's maximum size of " +
                 std::to_string(options_.max_size_bytes) + " bytes; not stored");
    return Status();
  }
  std::string path = entry_path(key);
  if (options_.env->file_exists(path)) return Status();  // first writer won already
  // Write and sync a private temp file, then publish it with one link: readers see all or nothing.
  std::string tmp = options_.directory + "/tmp/" + key + "." + unique_suffix(options_.env);
  Status written = options_.env->write_file(tmp, value, /*sync=*/true);
  if (!written.ok()) {
    (void)options_.env->remove_file(tmp);
    return written;
  }
  (void)options_.env->set_mtime_micros(tmp, options_.env->now_micros());
  crash_point("cache-put:temp-written");
  KILN_ASSIGN_OR_RETURN(auto lock, options_.env->lock_file(options_.directory + "/lock"));
  Status linked = options_.env->link_file(tmp, path);
  if (linked.ok()) crash_point("cache-put:linked");
  (void)options_.env->remove_file(tmp);
  if (!linked.ok()) {
    if (linked.code() == StatusCode::kAlreadyExists) return Status();  // another writer won
    return linked;
  }
  auto stats = read_ledger();
  if (!stats.ok()) stats = CacheStats{};
  stats->entries += 1;
  stats->alias_records += AliasRecord::is_alias_key(key) ? 1 : 0;
  stats->bytes += static_cast<int64_t>(value.size());
  // Crossing a bound evicts the least recently used until it holds again (only then is the
  // directory listed).
  bool over_bytes = options_.max_size_bytes >= 0 && stats->bytes > options_.max_size_bytes;
  bool over_entries =
      options_.max_entries >= 0 && stats->entries - stats->alias_records > options_.max_entries;
  if (over_bytes || over_entries) {
    KILN_RETURN_IF_ERROR(evict_locked(*stats, options_.max_size_bytes, options_.max_entries,
                                      /*older_than=*/-1));
  }
  return write_ledger(*stats);
}

Status DirectoryStore::evict_locked(CacheStats& stats, int64_t byte_goal, int64_t entry_goal,
                                    int64_t older_than_micros) {
  KILN_ASSIGN_OR_RETURN(auto names, options_.env->list_dir(options_.directory + "/entries"));
  struct Item {
    int64_t used;
    uint64_t size;
    std::string path;
    bool alias;
  };
  std::vector<Item> items;
  int64_t total = 0, aliases = 0;
  for (const std::string& name : names) {
    std::string path = options_.directory + "/entries/" + name;
    auto used = options_.env->mtime_micros(path);
    auto size = options_.env->file_size(path);
    if (!used.ok() || !size.ok()) continue;
    bool alias = AliasRecord::is_alias_key(name);
    items.push_back({*used, *size, path, alias});
    total += static_cast<int64_t>(*size);
    aliases += alias ? 1 : 0;
  }
  std::sort(items.begin(), items.end(),
            [](const Item& a, const Item& b) { return a.used < b.used; });
  int64_t count = static_cast<int64_t>(items.size());
  int64_t evicted = 0;
  // Oldest first, each only while a goal still needs it: the most recently used that fit stay.
  for (const Item& item : items) {
    bool too_old = older_than_micros >= 0 && item.used < older_than_micros;
    bool need = (byte_goal >= 0 && total > byte_goal) ||
                (entry_goal >= 0 && !item.alias && count - aliases > entry_goal);
    if (!need && !too_old) continue;
    if (!options_.env->remove_file(item.path).ok()) continue;
    total -= static_cast<int64_t>(item.size);
    --count;
    aliases -= item.alias ? 1 : 0;
    ++evicted;
  }
  stats.entries = count;
  stats.alias_records = aliases;
  stats.bytes = total;
  if (evicted > 0) stats.counters[to_string(StoreCounter::kEvictions)] += evicted;
  return Status();
}

Status DirectoryStore::remove(const std::string& key) {
  if (!valid_key(key)) return invalid_argument("invalid cache key '" + key + "'");
  std::string path = entry_path(key);
  KILN_ASSIGN_OR_RETURN(auto lock, options_.env->lock_file(options_.directory + "/lock"));
  auto size = options_.env->file_size(path);
  if (!size.ok()) return Status();  // already gone
  KILN_RETURN_IF_ERROR(options_.env->remove_file(path));
  auto stats = read_ledger();
  if (!stats.ok()) stats = CacheStats{};
  stats->entries = std::max<int64_t>(0, stats->entries - 1);
  if (AliasRecord::is_alias_key(key))
    stats->alias_records = std::max<int64_t>(0, stats->alias_records - 1);
  stats->bytes = std::max<int64_t>(0, stats->bytes - static_cast<int64_t>(*size));
  return write_ledger(*stats);
}

Result<std::vector<std::string>> DirectoryStore::keys() {
  KILN_ASSIGN_OR_RETURN(auto names, options_.env->list_dir(options_.directory + "/entries"));
  std::vector<std::string> keys;
  std::string suffix = kEntrySuffix;
  for (const std::string& name : names)
    if (name.size() > suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      keys.push_back(name.substr(0, name.size() - suffix.size()));
  std::sort(keys.begin(), keys.end());
  return keys;
}

void DirectoryStore::count(const std::string& counter, int64_t delta) {
  // Counters are statistics: losing one to an I/O error must not fail a compile.
  (void)update_ledger([&](CacheStats& s) { s.counters[counter] += delta; });
}

Result<CacheStats> DirectoryStore::stats() {
  KILN_ASSIGN_OR_RETURN(auto lock, options_.env->lock_file(options_.directory + "/lock"));
  return read_ledger();
}

Status DirectoryStore::rebuild_ledger() {
  KILN_ASSIGN_OR_RETURN(auto lock, options_.env->lock_file(options_.directory + "/lock"));
  auto stats = read_ledger();
  CacheStats fresh;
  if (stats.ok()) fresh.counters = stats->counters;
  KILN_ASSIGN_OR_RETURN(auto names, options_.env->list_dir(options_.directory + "/entries"));
  for (const std::string& name : names) {
    auto size = options_.env->file_size(options_.directory + "/entries/" + name);
    if (!size.ok()) continue;
    fresh.entries += 1;
    fresh.alias_records += AliasRecord::is_alias_key(name) ? 1 : 0;
    fresh.bytes += static_cast<int64_t>(*size);
  }
  return write_ledger(fresh);
}

Status DirectoryStore::evict_to(int64_t max_bytes, int64_t max_entries, int64_t older_than_micros) {
  KILN_ASSIGN_OR_RETURN(auto lock, options_.env->lock_file(options_.directory + "/lock"));
  // Temp files of writers that crashed before publishing: nobody will finish them.
  constexpr int64_t kStaleTempMicros = int64_t{10} * 60 * 1000000;
  if (auto temps = options_.env->list_dir(options_.directory + "/tmp"); temps.ok()) {
    for (const std::string& name : *temps) {
      std::string path = options_.directory + "/tmp/" + name;
      auto written = options_.env->mtime_micros(path);
      if (written.ok() && options_.env->now_micros() - *written > kStaleTempMicros)
        (void)options_.env->remove_file(path);
    }
  }
  auto stats = read_ledger();
  if (!stats.ok()) stats = CacheStats{};
  KILN_RETURN_IF_ERROR(evict_locked(*stats, max_bytes, max_entries, older_than_micros));
  return write_ledger(*stats);
}

Status DirectoryStore::clear() {
  KILN_ASSIGN_OR_RETURN(auto lock, options_.env->lock_file(options_.directory + "/lock"));
  KILN_ASSIGN_OR_RETURN(auto names, options_.env->list_dir(options_.directory + "/entries"));
  for (const std::string& name : names)
    KILN_RETURN_IF_ERROR(options_.env->remove_file(options_.directory + "/entries/" + name));
  auto stats = read_ledger();
  CacheStats fresh;
  if (stats.ok()) fresh.counters = stats->counters;
  return write_ledger(fresh);
}

}  // namespace kiln
