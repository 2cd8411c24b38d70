#include <cstring>

#include "core/digest.h"
#include "kiln/cache.h"

namespace kiln {
namespace {

constexpr char kBundleMagic[8] = {'K', 'I', 'L', 'N', 'B', 'N', 'D', '1'};

void append_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>(v >> (8 * i));
}

bool read_u64(std::string_view in, size_t& pos, uint64_t& v) {
  if (in.size() - pos < 8) return false;
  v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(static_cast<unsigned char>(in[pos + i])) << (8 * i);
  pos += 8;
  return true;
}

// Raw-bytes aliases (tiny text records) travel too: they spare the importer a parse per file.
bool is_alias(const std::string& key) { return key.rfind("alias-", 0) == 0; }

}  // namespace

Result<std::string> export_cache_bundle(CacheStore& store) {
  KILN_ASSIGN_OR_RETURN(auto keys, store.keys());
  std::string out(kBundleMagic, sizeof(kBundleMagic));
  for (const std::string& key : keys) {
    KILN_ASSIGN_OR_RETURN(auto value, store.get(key));
    if (!value.has_value() || !(is_alias(key) || decode_cache_entry_metadata(*value).ok()))
      continue;
    append_u64(out, key.size());
    out += key;
    append_u64(out, value->size());
    out += *value;
  }
  append_u64(out, xxh3_64(out));
  return out;
}

Result<int> import_cache_bundle(CacheStore& store, std::string_view bundle) {
  if (bundle.size() < sizeof(kBundleMagic) + 8 ||
      std::memcmp(bundle.data(), kBundleMagic, sizeof(kBundleMagic)) != 0)
    return invalid_argument(
        "not a kiln cache bundle (bad magic); make one with `kiln cache export`");
  size_t end = bundle.size() - 8;
  uint64_t checksum = 0;
  size_t checksum_pos = end;
  read_u64(bundle, checksum_pos, checksum);
  if (xxh3_64(bundle.substr(0, end)) != checksum)
    return corruption("the cache bundle is damaged (checksum mismatch)");
  size_t pos = sizeof(kBundleMagic);
  int imported = 0;
  std::string_view body = bundle.substr(0, end);
  while (pos < end) {
    uint64_t key_size = 0, value_size = 0;
    if (!read_u64(body, pos, key_size) || body.size() - pos < key_size)
      return corruption("the cache bundle is truncated");
    std::string key(body.substr(pos, key_size));
    pos += key_size;
    if (!read_u64(body, pos, value_size) || body.size() - pos < value_size)
      return corruption("the cache bundle is truncated");
    std::string_view value = body.substr(pos, value_size);
    pos += value_size;
    if (!is_alias(key) && !decode_cache_entry_metadata(value).ok()) continue;
    KILN_RETURN_IF_ERROR(store.put(key, value));
    imported += is_alias(key) ? 0 : 1;
  }
  return imported;
}

}  // namespace kiln
