// Whether and how a freshly compiled executable is written to the persistent store.
#include "compile/cache_parts.h"
#include "kiln/logging.h"
#include "kiln/monitoring.h"

namespace kiln::cache_parts {

Status write_entry(const Client& client, CacheStore& store, Counters& counters, const CacheKey& key,
                   CompileReport& report, const WritePolicy& policy,
                   const std::function<std::string()>& payload) {
  const std::string& module = key.module_name;
  auto skip = [&](const std::string& reason, WriteSkip why) {
    report.write_skip = why;
    report.skipped_write = reason;
    counters.add(std::string("skipped_writes.") + to_string(why));
    std::string line = "Not writing persistent cache entry for '" + module + "': " + reason;
    policy.explain ? log::warning(line) : log::debug(line);
  };
  // kiln improves on the seed: a leader that is not the writer process still persists what only it
  // compiled.
  if (client.process_index() != policy.writer_process && report.shared != SharedRole::kLeader) {
    skip("process " + std::to_string(client.process_index()) + " is not the cache writer (" +
             std::to_string(policy.writer_process) + ")",
         WriteSkip::kNotWriter);
    return Status();
  }
  if (report.compile_ms / 1000.0 < policy.min_compile_time_secs) {
    skip("compile took " + std::to_string(report.compile_ms / 1000.0) +
             " s, less than KILN_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=" +
             std::to_string(policy.min_compile_time_secs),
         WriteSkip::kCompileTime);
    return Status();
  }
  CacheEntryMetadata meta;
  meta.key = key.key;
  meta.module_name = module;
  meta.producer_version = kiln_version();
  meta.compile_time_ms = static_cast<int64_t>(report.compile_ms + 0.5);
  meta.created_micros = (policy.env ? policy.env : Env::posix())->now_micros();
  meta.components = key.components;
  std::string entry = encode_cache_entry(meta, payload());
  if (static_cast<int64_t>(entry.size()) < policy.min_entry_size_bytes) {
    skip("entry of " + std::to_string(entry.size()) +
             " bytes is smaller than KILN_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=" +
             std::to_string(policy.min_entry_size_bytes),
         WriteSkip::kEntrySize);
    return Status();
  }
  Status put = store.put(key.key, entry);
  if (!put.ok()) {
    store.count(StoreCounter::kWriteErrors);
    std::string message = "Error writing persistent compilation cache entry for '" + module +
                          "': " + status_code_name(put.code()) + ": " + put.message();
    if (policy.raise_errors) return Status(put.code(), message);
    log::warning(message);
    return Status();
  }
  store.count(StoreCounter::kWrites);
  counters.add("writes");
  monitoring::record_event(monitoring::Event::kCacheWrites);
  if (policy.explain)
    log::warning("Wrote '" + module + "' to persistent compilation cache with key '" + key.key +
                 "' (" + std::to_string(entry.size()) + " bytes)");
  if (policy.expect_pgle)
    log::warning("PERSISTENT CACHE WRITE with key '" + key.key + "' for '" + module +
                 "': this is unexpected because KILN_COMPILATION_CACHE_EXPECT_PGLE is set; the "
                 "run that filled the cache may not have run this program enough times");
  return Status();
}

}  // namespace kiln::cache_parts
