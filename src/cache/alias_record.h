// Raw-bytes alias records: a small record that maps a module's exact bytes (under the same other
// key components) to the key computed for them, so a repeat run neither loads MLIR nor parses.
// They live in the same stores as entries, under keys of their own, and are never executables:
// counts, listings, bundles and eviction bounds treat them apart. One type for all of that.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kiln {

struct AliasRecord {
  std::string module_name;
  std::string module_digest;  // the module component's SHA-256 (64 hex digits)
  std::string description;    // the module component's description

  // The store key of the record for this digest of bytes and components.
  static std::string key_for(std::string_view digest_hex);
  static bool is_alias_key(std::string_view key);
  std::string encode() const;
  // nullopt for a damaged record (then the key is computed the slow way).
  static std::optional<AliasRecord> decode(std::string_view bytes);
};

}  // namespace kiln
