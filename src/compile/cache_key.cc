// The cache key: the module's canonical form plus every component that changes generated code.
#include <algorithm>
#include <set>

#include "cache/alias_record.h"
#include "compile/cache_parts.h"
#include "compile/text_canonical.h"
#include "core/digest.h"
#include "kiln/config.h"
#include "kiln/logging.h"

namespace kiln {
namespace {

std::string sanitized_module_name(const std::string& name) {
  std::string out;
  for (char c : name.substr(0, 64))
    out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-') ? c : '_';
  return out.empty() ? "module" : out;
}

// Options that never change generated code stay out of the key.
bool excluded_override(const std::string& name) {
  static const char* kExcluded[] = {"dump_to",
                                    "dump_ir_to",
                                    "log_level",
                                    "detailed_logging",
                                    "xla_force_host_platform_device_count",
                                    "device_count"};
  for (const char* e : kExcluded)
    if (name == e) return true;
  return false;
}

// A PGLE-optimised entry is found by later runs before they have a profile: its key stands for
// "some PGLE profile", not for the bytes (which differ from run to run). Any other profile is
// keyed by its digest.
std::string profile_in_key(const CompileOptions& o) {
  if (o.pgle_build == PgleBuild::kOptimized) return "pgle";
  return o.fdo_profile.empty() ? "none" : sha256_hex(o.fdo_profile);
}

std::string options_description(const CompileOptions& o) {
  std::string disabled;
  for (const std::string& p : o.disabled_passes) disabled += (disabled.empty() ? "" : ",") + p;
  std::vector<std::pair<std::string, std::string>> overrides;
  for (const auto& kv : o.env_option_overrides)
    if (!excluded_override(kv.first)) overrides.push_back(kv);
  std::sort(overrides.begin(), overrides.end());
  std::string override_text;
  for (const auto& [k, v] : overrides) override_text += k + "=" + v + ",";
  std::string assignment;
  for (const auto& row : o.device_assignment) {
    assignment += "[";
    for (int d : row) assignment += std::to_string(d) + ",";
    assignment += "]";
  }
  return std::string("optimization_level=") + effort_level_name(o.optimization_level) +
         ";memory_fitting_level=" + effort_level_name(o.memory_fitting_level) +
         ";disabled_passes=" + disabled + ";num_replicas=" + std::to_string(o.num_replicas) +
         ";num_partitions=" + std::to_string(o.num_partitions) +
         ";device_assignment=" + assignment + ";overrides=" + override_text +
         ";profile_version=" + std::to_string(o.profile_version) +
         (o.target.is_host()
              ? ""
              : ";target=" + o.target.triple + "|" + o.target.cpu + "|" + o.target.features) +
         ";pgle_build=" + pgle_build_name(o.pgle_build) + ";fdo_profile=" + profile_in_key(o);
}

KeyComponent component(std::string name, std::string description) {
  return KeyComponent{std::move(name), description, sha256_hex(description)};
}

// Every component except the module's; these need no MLIR.
std::vector<KeyComponent> environment_components(const Client& client, const CompileOptions& o,
                                                 const std::string& tag) {
  std::string flags;
  for (const auto& [name, value] : config::codegen_flag_values()) flags += name + "=" + value + ";";
  std::string kinds;
  std::set<std::string> kind_set;
  for (const Device& d : client.devices()) kind_set.insert(d.kind);
  for (const std::string& k : kind_set) kinds += (kinds.empty() ? "" : ",") + k;
  return {
      component("versions", std::string("kiln ") + kiln_version() + "; llvm " + llvm_version()),
      component("platform", client.platform() + "; " + client.platform_version()),
      component("flags", flags),
      component("options", options_description(o)),
      component("devices", "count=" + std::to_string(client.devices().size()) + ";kinds=" + kinds),
      component("compression", "zstd"),
      component("tag", tag),
  };
}

CacheKey assemble_key(const std::string& module_name, std::vector<KeyComponent> components) {
  Sha256 h;
  for (const KeyComponent& c : components) {
    h.update_framed(c.name);
    h.update_framed(c.digest);
  }
  CacheKey key;
  key.module_name = module_name;
  key.key = sanitized_module_name(module_name) + "-" + h.hex();
  key.components = std::move(components);
  for (const KeyComponent& c : key.components)
    log::debug("cache key component " + c.name + ": " + c.digest);
  return key;
}

// A key computed before for the same bytes and other components.
std::optional<CacheKey> key_from_alias(const std::string& bytes,
                                       const std::vector<KeyComponent>& rest) {
  std::optional<AliasRecord> record = AliasRecord::decode(bytes);
  if (!record) return std::nullopt;
  std::vector<KeyComponent> components{{"module", record->description, record->module_digest}};
  components.insert(components.end(), rest.begin(), rest.end());
  return assemble_key(record->module_name, std::move(components));
}

}  // namespace

CompileOptions resolve_compile_options(const CompileOptions& options) {
  CompileOptions o = options;
  if (o.optimization_level == EffortLevel::kUnknown) {
    auto level = parse_effort_level(*config::get_string("KILN_OPTIMIZATION_LEVEL"));
    if (level.ok()) o.optimization_level = *level;
  }
  if (o.memory_fitting_level == EffortLevel::kUnknown) {
    auto level = parse_effort_level(*config::get_string("KILN_MEMORY_FITTING_LEVEL"));
    o.memory_fitting_level = level.ok() ? *level : EffortLevel::kO2;
  }
  o.optimization_level = resolve_effort_level(o.optimization_level);
  if (config::get_bool("KILN_DISABLE_MOST_OPTIMIZATIONS")) o.optimization_level = EffortLevel::kO0;
  std::vector<std::string> passes;
  for (std::string p : o.disabled_passes) {
    p.erase(0, p.find_first_not_of(" \t"));
    p.erase(p.find_last_not_of(" \t") + 1);
    if (!p.empty()) passes.push_back(p);
  }
  std::sort(passes.begin(), passes.end());
  passes.erase(std::unique(passes.begin(), passes.end()), passes.end());
  o.disabled_passes = passes;
  return o;
}

namespace cache_parts {

Result<CacheKey> compute_key(const Client& client, const ModuleSource& source,
                             const CompileOptions& options, const KeyPolicy& policy,
                             CacheStore* store) {
  bool keep_locations = policy.include_metadata;
  std::vector<KeyComponent> rest = environment_components(client, options, policy.tag);

  // Raw-bytes alias: the same bytes under the same other components map to the same key, so a
  // repeat run neither loads MLIR nor parses.
  Sha256 alias_hash;
  alias_hash.update_framed("raw-bytes-alias-v1");
  alias_hash.update_framed(keep_locations ? "locations kept" : "locations stripped");
  alias_hash.update_framed(source.bytes);
  for (const KeyComponent& c : rest) alias_hash.update_framed(c.digest);
  std::string alias_key = AliasRecord::key_for(alias_hash.hex());
  if (store != nullptr) {
    auto hit = store->get(alias_key);
    if (hit.ok() && hit->has_value()) {
      if (std::optional<CacheKey> key = key_from_alias(**hit, rest)) return std::move(*key);
    }
  }
  // Text is canonicalised by a scan (no MLIR); bytecode, and text the scan does not handle, by
  // parsing. The form is hashed too, so the two never share a key.
  CanonicalModule canonical;
  std::string form = "canonical text";
  KILN_ASSIGN_OR_RETURN(ModuleSource mlir, source.mlir());
  if (auto text = canonicalize_mlir_text(mlir.bytes, keep_locations)) {
    canonical.module_name = std::move(text->module_name);
    canonical.text = std::move(text->text);
  } else {
    KILN_ASSIGN_OR_RETURN(canonical, client.canonicalize(mlir, keep_locations));
    form = "canonical bytecode";
  }
  Sha256 module_hash;
  module_hash.update_framed(keep_locations ? "locations kept" : "locations stripped");
  module_hash.update_framed(form);
  module_hash.update_framed(canonical.text);
  std::string description = "module '" + canonical.module_name + "', " +
                            std::to_string(canonical.text.size()) + " " + form +
                            " bytes, locations " + (keep_locations ? "kept" : "stripped");
  std::vector<KeyComponent> components{{"module", description, module_hash.hex()}};
  components.insert(components.end(), rest.begin(), rest.end());
  CacheKey key = assemble_key(canonical.module_name, std::move(components));
  if (store != nullptr) {
    (void)store->put(
        alias_key,
        AliasRecord{canonical.module_name, key.components[0].digest, description}.encode());
  }
  return key;
}

}  // namespace cache_parts
}  // namespace kiln
