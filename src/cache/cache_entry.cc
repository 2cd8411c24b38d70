#include <cstring>
#include <nlohmann/json.hpp>

#include "core/digest.h"
#include "kiln/cache.h"

namespace kiln {
namespace {

constexpr char kEntryMagic[8] = {'K', 'I', 'L', 'N', 'C', 'E', '0', '1'};
constexpr uint32_t kEntryFormatVersion = 1;
constexpr uint32_t kCompressionZstd = 1;
// A decompressed payload larger than this is treated as damage, not allocated.
constexpr size_t kMaxPayloadBytes = size_t{4} << 30;

struct EntryHeader {
  char magic[8];
  uint32_t format_version;
  uint32_t compression;
  int64_t compile_time_ms;
  uint64_t metadata_size;
  uint64_t payload_size;
  uint64_t checksum;
};
static_assert(sizeof(EntryHeader) == 48);

uint64_t entry_checksum(EntryHeader header, std::string_view rest) {
  header.checksum = 0;
  std::string all(reinterpret_cast<const char*>(&header), sizeof(header));
  all.append(rest.data(), rest.size());
  return xxh3_64(all);
}

Result<std::pair<EntryHeader, std::string_view>> check_entry(std::string_view bytes) {
  EntryHeader header;
  if (bytes.size() < sizeof(header)) return corruption("cache entry is truncated");
  std::memcpy(&header, bytes.data(), sizeof(header));
  if (std::memcmp(header.magic, kEntryMagic, sizeof(kEntryMagic)) != 0)
    return corruption("cache entry has a wrong magic number");
  if (header.format_version != kEntryFormatVersion)
    return corruption("cache entry format version " + std::to_string(header.format_version) +
                      " is not " + std::to_string(kEntryFormatVersion));
  if (header.compression != kCompressionZstd)
    return corruption("cache entry uses unknown compression " + std::to_string(header.compression));
  std::string_view rest = bytes.substr(sizeof(header));
  if (header.metadata_size > rest.size() ||
      header.payload_size != rest.size() - header.metadata_size)
    return corruption("cache entry sizes do not match its length (truncated?)");
  if (entry_checksum(header, rest) != header.checksum)
    return corruption("cache entry checksum mismatch");
  return std::make_pair(header, rest);
}

Result<CacheEntryMetadata> parse_metadata(const EntryHeader& header, std::string_view text,
                                          std::string_view expected_key) {
  CacheEntryMetadata m;
  try {
    nlohmann::json j = nlohmann::json::parse(text);
    m.key = j.at("key").get<std::string>();
    m.module_name = j.at("module_name").get<std::string>();
    m.producer_version = j.at("producer_version").get<std::string>();
    m.created_micros = j.at("created_micros").get<int64_t>();
    m.uncompressed_size = j.at("uncompressed_size").get<uint64_t>();
    for (const auto& c : j.at("components"))
      m.components.push_back({c.at("name").get<std::string>(),
                              c.at("description").get<std::string>(),
                              c.at("digest").get<std::string>()});
  } catch (const nlohmann::json::exception& e) {
    return corruption(std::string("cache entry metadata is malformed: ") + e.what());
  }
  // An entry filed under another key (a bad import, a mix-up, a planted file) is damage: it holds
  // some other program's code.
  if (m.key != expected_key)
    return corruption("cache entry is filed under key '" + std::string(expected_key) +
                      "' but was written for key '" + m.key + "'");
  m.compile_time_ms = header.compile_time_ms;
  return m;
}

}  // namespace

std::string encode_cache_entry(const CacheEntryMetadata& metadata, std::string_view payload) {
  nlohmann::json components = nlohmann::json::array();
  for (const KeyComponent& c : metadata.components)
    components.push_back({{"name", c.name}, {"description", c.description}, {"digest", c.digest}});
  std::string meta = nlohmann::json{
      {"key", metadata.key},
      {"module_name", metadata.module_name},
      {"producer_version", metadata.producer_version},
      {"created_micros", metadata.created_micros},
      {"uncompressed_size", payload.size()},
      {"components",
       components}}.dump();
  std::string compressed = zstd_compress(payload);
  EntryHeader header{};
  std::memcpy(header.magic, kEntryMagic, sizeof(kEntryMagic));
  header.format_version = kEntryFormatVersion;
  header.compression = kCompressionZstd;
  header.compile_time_ms = metadata.compile_time_ms;
  header.metadata_size = meta.size();
  header.payload_size = compressed.size();
  std::string rest = meta + compressed;
  header.checksum = entry_checksum(header, rest);
  std::string out(reinterpret_cast<const char*>(&header), sizeof(header));
  return out + rest;
}

Result<DecodedCacheEntry> decode_cache_entry(std::string_view bytes, std::string_view key) {
  KILN_ASSIGN_OR_RETURN(auto checked, check_entry(bytes));
  auto [header, rest] = checked;
  DecodedCacheEntry entry;
  KILN_ASSIGN_OR_RETURN(entry.metadata,
                        parse_metadata(header, rest.substr(0, header.metadata_size), key));
  KILN_ASSIGN_OR_RETURN(entry.payload,
                        zstd_decompress(rest.substr(header.metadata_size), kMaxPayloadBytes));
  if (entry.payload.size() != entry.metadata.uncompressed_size)
    return corruption("cache entry payload has the wrong size");
  return entry;
}

Result<CacheEntryMetadata> decode_cache_entry_metadata(std::string_view bytes,
                                                       std::string_view key) {
  KILN_ASSIGN_OR_RETURN(auto checked, check_entry(bytes));
  auto [header, rest] = checked;
  return parse_metadata(header, rest.substr(0, header.metadata_size), key);
}

}  // namespace kiln
