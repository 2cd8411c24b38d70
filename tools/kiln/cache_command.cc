#include "cache_command.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli_support.h"
#include "kiln/cache.h"
#include "kiln/client.h"
#include "kiln/compilation_cache.h"
#include "kiln/compile.h"
#include "kiln/config.h"
#include "kiln/env.h"
#include "kiln/file.h"
#include "kiln/onnx.h"

namespace kiln::cli {
namespace {

struct CacheArgs {
  CLI::App* root = nullptr;
  CLI::App* stats = nullptr;
  CLI::App* ls = nullptr;
  CLI::App* clear = nullptr;
  CLI::App* verify = nullptr;
  CLI::App* gc = nullptr;
  CLI::App* explain = nullptr;
  CLI::App* export_cmd = nullptr;
  CLI::App* import_cmd = nullptr;
  std::string bundle;
  bool json = false;
  bool load = false;
  int64_t max_size = -1;
  int64_t max_entries = -1;
  double older_than_days = -1;
  std::string file;
  std::string effort = "UNKNOWN";
  std::vector<std::string> disabled;
};

CacheArgs& args() {
  static CacheArgs a;
  return a;
}

Result<std::shared_ptr<CompilationCache>> open_cache() {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<CompilationCache> cache, default_compilation_cache());
  if (cache->local_store() == nullptr) return invalid_argument("the compilation cache is disabled");
  return cache;
}

int stats_command(const CompilationCache& cache) {
  auto stats = cache.directory_stats();
  if (!stats.ok()) return fail(stats.status());
  // What was written to the directory; hits and misses are the reading process's own (a read
  // writes nothing): `kiln run --json` reports them per call.
  if (args().json) {
    nlohmann::json j{{"directory", stats->directory},
                     {"entries", stats->executables},
                     {"alias_records", stats->alias_records},
                     {"bytes", stats->bytes},
                     {"counters", stats->counters}};
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf(
      "cache directory  %s\nentries          %lld\nalias records    %lld\nbytes            %lld\n",
      stats->directory.c_str(), static_cast<long long>(stats->executables),
      static_cast<long long>(stats->alias_records), static_cast<long long>(stats->bytes));
  for (const auto& [name, value] : stats->counters)
    std::printf("%-16s %lld\n", name.c_str(), static_cast<long long>(value));
  return 0;
}

int ls_command(const CompilationCache& cache) {
  auto entries = cache.list_entries();
  if (!entries.ok()) return fail(entries.status());
  for (const CacheEntrySummary& e : *entries) {
    if (!e.problem.ok()) {
      std::printf("%s  CORRUPT (%s)\n", e.key.c_str(), e.problem.message().c_str());
      continue;
    }
    std::printf("%s  module %s, %zu bytes, compiled in %lld ms\n", e.key.c_str(),
                e.metadata.module_name.c_str(), e.bytes,
                static_cast<long long>(e.metadata.compile_time_ms));
  }
  return 0;
}

int verify_command(CompilationCache& cache) {
  auto result = cache.verify(args().load);
  if (!result.ok()) return fail(result.status());
  for (const auto& [key, why] : result->removed)
    std::printf("removing %s: %s\n", key.c_str(), why.c_str());
  std::printf("verified %d entries, removed %zu bad ones\n", result->verified,
              result->removed.size());
  return 0;
}

// The module `kiln cache explain` keys: the MLIR file, or an ONNX model's program (its identity
// printed first: what of it the key covers).
Result<ModuleSource> explained_source() {
  if (!is_onnx_file(args().file)) return ModuleSource::from_file(args().file);
  KILN_ASSIGN_OR_RETURN(OnnxModel model, OnnxModel::from_file(args().file));
  for (const auto& input : model.inputs())
    if (input.is_static)
      return invalid_argument(args().file + ": input '" + input.name +
                              "' is compiled in by value; its key depends on the values a "
                              "run gives (kiln run --json prints the key)");
  KILN_ASSIGN_OR_RETURN(auto shapes, model.resolve_input_shapes({}));
  KILN_ASSIGN_OR_RETURN(ModuleSource source, onnx_module_source(model, shapes));
  std::printf(
      "onnx model %s: structure %s (graph, opsets, initializer names, types and shapes, "
      "folded initializer values), input shapes",
      args().file.c_str(), model.structure_digest().substr(0, 16).c_str());
  for (const auto& shape : shapes) std::printf(" %s", shape_to_string(shape).c_str());
  std::printf(", %zu bound weights (values not in the key)\n", model.weights().size());
  return source;
}

// Whether `key` is stored, or else the stored entry of the same module nearest to it (fewest
// differing components) and what differs.
void print_nearest_entry(const std::vector<CacheEntrySummary>& entries, const CacheKey& key) {
  std::string nearest;
  std::vector<std::string> nearest_diff;
  for (const CacheEntrySummary& entry : entries) {
    if (entry.key == key.key) {
      std::printf("stored: yes (a run with these options is a cache hit)\n");
      return;
    }
    if (!entry.problem.ok() || entry.metadata.module_name != key.module_name) continue;
    std::vector<std::string> diff;
    for (const auto& mine : key.components) {
      bool same = false;
      for (const auto& theirs : entry.metadata.components)
        if (theirs.name == mine.name && theirs.digest == mine.digest) same = true;
      if (!same) diff.push_back(mine.name);
    }
    if (nearest.empty() || diff.size() < nearest_diff.size()) {
      nearest = entry.key;
      nearest_diff = diff;
    }
  }
  if (nearest.empty()) {
    std::printf("stored: no, and no entry of module '%s' is stored\n", key.module_name.c_str());
    return;
  }
  std::printf("stored: no; nearest entry of module '%s' is %s, differing in:",
              key.module_name.c_str(), nearest.c_str());
  for (const auto& d : nearest_diff) std::printf(" %s", d.c_str());
  std::printf("\n");
}

int explain_command() {
  auto client = Client::create_cpu();
  if (!client.ok()) return fail(client.status());
  auto source = explained_source();
  if (!source.ok()) return fail(source.status());
  CompileOptions options;
  auto level = parse_effort_level(args().effort);
  if (!level.ok()) return fail(level.status());
  options.optimization_level = *level;
  options.disabled_passes = args().disabled;
  auto cache = open_cache();
  auto key = cache.ok() ? (*cache)->compute_key(**client, *source, options)
                        : compute_cache_key(**client, *source, options);
  if (!key.ok()) return fail(key.status());
  std::printf("key %s\n", key->key.c_str());
  for (const auto& c : key->components)
    std::printf("  %-12s %s  %s\n", c.name.c_str(), c.digest.substr(0, 16).c_str(),
                c.description.c_str());
  if (!cache.ok()) return 0;
  auto entries = (*cache)->list_entries();
  if (entries.ok()) print_nearest_entry(*entries, *key);
  return 0;
}

}  // namespace

void add_cache_command(CLI::App& app) {
  CacheArgs& a = args();
  a.root = app.add_subcommand("cache", "inspect and maintain the persistent compilation cache");
  a.root->require_subcommand(1);
  a.stats = a.root->add_subcommand("stats", "counters, entries and bytes");
  a.stats->add_flag("--json", a.json, "machine-readable");
  a.ls = a.root->add_subcommand("ls", "list the entries");
  a.clear = a.root->add_subcommand("clear", "remove every entry");
  a.verify = a.root->add_subcommand(
      "verify", "check every entry's header, checksum, key and code structure; remove bad ones");
  a.verify->add_flag("--load", a.load, "also load each entry's code (runs its constructors)");
  a.gc = a.root->add_subcommand("gc", "evict least recently used entries down to limits");
  a.gc->add_option("--max-size", a.max_size, "bytes");
  a.gc->add_option("--max-entries", a.max_entries, "entries");
  a.gc->add_option("--older-than", a.older_than_days, "days since last use");
  a.export_cmd = a.root->add_subcommand("export", "write every entry into a portable bundle");
  a.export_cmd->add_option("file", a.bundle, "bundle file to write")->required();
  a.import_cmd = a.root->add_subcommand("import", "add a bundle's entries to this cache");
  a.import_cmd->add_option("file", a.bundle, "bundle file to read")->required();
  a.explain = a.root->add_subcommand("explain", "a file's key components, and why it misses");
  a.explain->add_option("file", a.file, "MLIR file or ONNX model")->required();
  a.explain->add_option("-O,--effort", a.effort, "effort level O0..O3");
  a.explain->add_option("--disable-pass", a.disabled, "leave a pipeline pass out");
}

bool cache_command_parsed() { return args().root != nullptr && args().root->parsed(); }

int run_cache_command() {
  CacheArgs& a = args();
  if (a.explain->parsed()) return explain_command();
  auto opened = open_cache();
  if (!opened.ok()) return fail(opened.status());
  CompilationCache& cache = **opened;
  if (a.stats->parsed()) return stats_command(cache);
  if (a.ls->parsed()) return ls_command(cache);
  if (a.verify->parsed()) return verify_command(cache);
  const std::string& directory = cache.local_store()->directory();
  if (a.export_cmd->parsed()) {
    auto bundle = cache.export_bundle();
    if (!bundle.ok()) return fail(bundle.status());
    Status s = write_file(a.bundle, *bundle);
    if (!s.ok()) return fail(s);
    std::printf("wrote %s (%zu bytes)\n", a.bundle.c_str(), bundle->size());
    return 0;
  }
  if (a.import_cmd->parsed()) {
    auto bytes = read_file(a.bundle);
    if (!bytes.ok()) return fail(bytes.status());
    auto imported = cache.import_bundle(*bytes);
    if (!imported.ok()) return fail(imported.status());
    std::printf("imported %d entries into %s (%s bundle", imported->imported, directory.c_str(),
                imported->signed_bundle ? "signed" : "unsigned");
    if (imported->skipped > 0)
      std::printf("; skipped %d damaged or alias records", imported->skipped);
    std::printf(")\n");
    return 0;
  }
  if (a.clear->parsed()) {
    Status s = cache.clear();
    if (!s.ok()) return fail(s);
    std::printf("cleared %s\n", directory.c_str());
    return 0;
  }
  if (a.gc->parsed()) {
    int64_t older = a.older_than_days < 0 ? -1
                                          : Env::posix()->now_micros() -
                                                static_cast<int64_t>(a.older_than_days * 86400e6);
    Status s = cache.evict(a.max_size, a.max_entries, older);
    if (!s.ok()) return fail(s);
    return stats_command(cache);
  }
  return 0;
}

}  // namespace kiln::cli
