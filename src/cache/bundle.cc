#include <cstring>

#include "cache/alias_record.h"
#include "core/digest.h"
#include "kiln/cache.h"

namespace kiln {
namespace {

// "KILNBND1": unsigned; "KILNBNDS": the checksum is followed by an HMAC-SHA256 over everything
// before it, made with the team's secret.
constexpr char kBundleMagic[8] = {'K', 'I', 'L', 'N', 'B', 'N', 'D', '1'};
constexpr char kSignedBundleMagic[8] = {'K', 'I', 'L', 'N', 'B', 'N', 'D', 'S'};
// Real caches hold thousands of entries; a bundle claiming far more is hostile or broken, and
// importing it record by record would take hours.
constexpr uint64_t kMaxBundleRecords = 65536;
constexpr std::string_view kBundleTagContext = "kiln cache bundle";

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

}  // namespace

Result<std::string> export_cache_bundle(CacheStore& store, const std::string& secret) {
  KILN_ASSIGN_OR_RETURN(auto keys, store.keys());
  std::string out(secret.empty() ? kBundleMagic : kSignedBundleMagic, sizeof(kBundleMagic));
  uint64_t records = 0;
  for (const std::string& key : keys) {
    // Raw-bytes aliases map a file's bytes to a module digest; one planted record would run
    // another program in its place, so they never travel: the importer's first run of each file
    // re-derives its alias.
    if (AliasRecord::is_alias_key(key)) continue;
    KILN_ASSIGN_OR_RETURN(auto value, store.get(key));
    if (!value.has_value() || !decode_cache_entry(*value, key).ok()) continue;
    if (++records > kMaxBundleRecords)
      return resource_exhausted("the cache holds more than " + std::to_string(kMaxBundleRecords) +
                                " entries, more than one bundle may carry; run `kiln cache gc` " +
                                "with --max-entries first");
    append_u64(out, key.size());
    out += key;
    append_u64(out, value->size());
    out += *value;
  }
  append_u64(out, xxh3_64(out));
  if (!secret.empty()) out += hmac_tag(secret, kBundleTagContext, out);
  return out;
}

namespace {

// Checks the magic and, for a signed bundle, its tag against `secret`; returns the bundle without
// the tag and says whether it was signed.
Result<bool> check_bundle_signature(std::string_view& bundle, const std::string& secret) {
  if (bundle.size() < sizeof(kBundleMagic) + 8)
    return invalid_argument(
        "not a kiln cache bundle (too short); make one with `kiln cache export`");
  bool is_signed = std::memcmp(bundle.data(), kSignedBundleMagic, sizeof(kBundleMagic)) == 0;
  if (!is_signed && std::memcmp(bundle.data(), kBundleMagic, sizeof(kBundleMagic)) != 0)
    return invalid_argument(
        "not a kiln cache bundle (bad magic); make one with `kiln cache export`");
  if (!is_signed) {
    if (secret.empty()) return false;
    return permission_denied(
        "the cache bundle is not signed, and KILN_REMOTE_CACHE_SECRET is set, so only signed "
        "bundles are imported; export it again with the secret set");
  }
  if (bundle.size() < sizeof(kBundleMagic) + 8 + kHmacTagSize)
    return corruption("the cache bundle is truncated");
  std::string_view tag = bundle.substr(bundle.size() - kHmacTagSize);
  bundle = bundle.substr(0, bundle.size() - kHmacTagSize);
  if (secret.empty())
    return permission_denied(
        "the cache bundle is signed, but no secret is set to check it; set "
        "KILN_REMOTE_CACHE_SECRET to the secret it was exported with");
  if (!same_tag(tag, hmac_tag(secret, kBundleTagContext, bundle)))
    return permission_denied(
        "the cache bundle's signature does not verify (tampered, or signed with another "
        "secret); it was not imported");
  return true;
}

struct BundleRecord {
  std::string key;
  std::string_view value;
};

// Every record of a checksummed bundle body, checked before any is written (a damaged bundle
// imports nothing); entries that do not decode under their key are counted in `skipped`.
Result<std::vector<BundleRecord>> read_bundle_records(std::string_view bundle, int& skipped) {
  size_t end = bundle.size() - 8;
  uint64_t checksum = 0;
  size_t checksum_pos = end;
  read_u64(bundle, checksum_pos, checksum);
  if (xxh3_64(bundle.substr(0, end)) != checksum)
    return corruption("the cache bundle is damaged (checksum mismatch)");
  std::vector<BundleRecord> records;
  size_t pos = sizeof(kBundleMagic);
  std::string_view body = bundle.substr(0, end);
  while (pos < end) {
    if (records.size() + static_cast<size_t>(skipped) >= kMaxBundleRecords)
      return resource_exhausted("the cache bundle has more than " +
                                std::to_string(kMaxBundleRecords) + " records; not imported");
    uint64_t key_size = 0, value_size = 0;
    if (!read_u64(body, pos, key_size) || body.size() - pos < key_size)
      return corruption("the cache bundle is truncated");
    std::string key(body.substr(pos, key_size));
    pos += key_size;
    if (!read_u64(body, pos, value_size) || body.size() - pos < value_size)
      return corruption("the cache bundle is truncated");
    std::string_view value = body.substr(pos, value_size);
    pos += value_size;
    // Each entry must decode in full under the key it is filed under.
    if (AliasRecord::is_alias_key(key) || !decode_cache_entry(value, key).ok()) {
      ++skipped;
      continue;
    }
    records.push_back({std::move(key), value});
  }
  return records;
}

}  // namespace

Result<BundleImport> import_cache_bundle(CacheStore& store, std::string_view bundle,
                                         const std::string& secret) {
  KILN_ASSIGN_OR_RETURN(bool is_signed, check_bundle_signature(bundle, secret));
  BundleImport result;
  KILN_ASSIGN_OR_RETURN(std::vector<BundleRecord> records,
                        read_bundle_records(bundle, result.skipped));
  for (const BundleRecord& r : records) {
    KILN_RETURN_IF_ERROR(store.put(r.key, r.value));
    ++result.imported;
  }
  result.signed_bundle = is_signed;
  return result;
}

}  // namespace kiln
