#include "cache/alias_record.h"

namespace kiln {
namespace {

constexpr std::string_view kPrefix = "alias-";

// The next line of `rest` (without its newline), or nullopt when there is none.
std::optional<std::string> next_line(std::string_view& rest) {
  size_t end = rest.find('\n');
  if (end == std::string_view::npos) return std::nullopt;
  std::string line(rest.substr(0, end));
  rest.remove_prefix(end + 1);
  return line;
}

}  // namespace

std::string AliasRecord::key_for(std::string_view digest_hex) {
  return std::string(kPrefix) + std::string(digest_hex);
}

bool AliasRecord::is_alias_key(std::string_view key) {
  return key.substr(0, kPrefix.size()) == kPrefix;
}

// "<module name>\n<module digest>\n<description>\n"
std::string AliasRecord::encode() const {
  return module_name + "\n" + module_digest + "\n" + description + "\n";
}

std::optional<AliasRecord> AliasRecord::decode(std::string_view bytes) {
  AliasRecord record;
  auto name = next_line(bytes);
  auto digest = next_line(bytes);
  auto description = next_line(bytes);
  if (!name || !digest || !description || digest->size() != 64) return std::nullopt;
  record.module_name = std::move(*name);
  record.module_digest = std::move(*digest);
  record.description = std::move(*description);
  return record;
}

}  // namespace kiln
