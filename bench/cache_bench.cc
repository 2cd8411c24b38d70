// cache_bench: persistent store put/get latency as the entry count grows (JAX's anchor: 5.7 ms per
// put at 250 entries, 304 ms at 10,880), and cache-key throughput on a ~10 MB module (raw-bytes
// alias vs the canonicalising path, against parsing).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "kiln/cache.h"
#include "kiln/client.h"
#include "kiln/compile.h"
#include "kiln/config.h"
#include "kiln/file.h"

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string entry_bytes(std::mt19937& rng, const std::string& name) {
  std::string payload(2048, '\0');
  for (char& c : payload) c = static_cast<char>(rng());
  kiln::CacheEntryMetadata meta;
  meta.module_name = name;
  meta.producer_version = "bench";
  return kiln::encode_cache_entry(meta, payload);
}

void store_latency(int entries) {
  std::string dir =
      (std::filesystem::temp_directory_path() / ("kiln-cache-bench-" + std::to_string(entries)))
          .string();
  std::filesystem::remove_all(dir);
  auto store = kiln::DirectoryStore::open({dir, -1, -1, nullptr});
  std::mt19937 rng(entries);
  std::string sample = entry_bytes(rng, "fill");
  // Fill directly (the fill is not what is measured), then recount once.
  for (int i = 0; i < entries; ++i)
    (void)kiln::write_file(dir + "/entries/fill-" + std::to_string(i) + ".kce", sample);
  (void)(*store)->rebuild_ledger();
  std::vector<double> puts, gets;
  for (int i = 0; i < 200; ++i) {
    std::string value = entry_bytes(rng, "new");
    auto t = Clock::now();
    (void)(*store)->put("new-" + std::to_string(i), value);
    puts.push_back(ms_since(t));
    std::string key = "fill-" + std::to_string(rng() % entries);
    t = Clock::now();
    auto got = (*store)->get(key);
    gets.push_back(ms_since(t));
    if (!got.ok() || !got->has_value()) std::fprintf(stderr, "missing %s\n", key.c_str());
  }
  std::printf("%9d %14.3f %14.3f %14.3f %14.3f\n", entries, median(puts),
              *std::max_element(puts.begin(), puts.end()), median(gets),
              *std::max_element(gets.begin(), gets.end()));
  std::filesystem::remove_all(dir);
}

std::string big_module(size_t target_bytes) {
  std::string text = "module @big {\n";
  for (int f = 0; text.size() < target_bytes; ++f) {
    std::string n = std::to_string(f);
    text += "  func.func @f" + n +
            "(%a: tensor<16x16xf32>, %b: tensor<16x16xf32>) -> tensor<16x16xf32> {\n";
    text += "    %c = arith.constant dense<" + std::to_string(f % 97) + ".5> : tensor<16x16xf32>\n";
    text += "    %s = arith.addf %a, %b : tensor<16x16xf32>\n";
    text += "    %m = arith.mulf %s, %c : tensor<16x16xf32>\n";
    text += "    %e = math.exp %m : tensor<16x16xf32>\n";
    text += "    return %e : tensor<16x16xf32>\n  }\n";
  }
  return text + "}\n";
}

}  // namespace

int main() {
  std::printf("DirectoryStore latency (ms, 200 operations each, 2 KB entries, fsync per put)\n");
  std::printf("%9s %14s %14s %14s %14s\n", "entries", "put median", "put max", "get median",
              "get max");
  for (int n : {100, 1000, 10000, 100000}) store_latency(n);

  std::string text = big_module(10 << 20);
  double mb = text.size() / 1048576.0;
  auto client = kiln::Client::create_cpu();
  std::string dir = (std::filesystem::temp_directory_path() / "kiln-key-bench").string();
  std::filesystem::remove_all(dir);
  (void)kiln::config::set("KILN_CACHE_DIR", dir);
  auto store = kiln::persistent_cache_store();
  kiln::ModuleSource source{text, "big.mlir"};
  // Warm the compiler library so its one-time load is not counted as canonicalising.
  (void)(*client)->canonicalize({"module {}", "warm.mlir"}, false);
  auto t = Clock::now();
  auto first = kiln::compute_cache_key(**client, source, {}, *store);
  double canonical_ms = ms_since(t);
  t = Clock::now();
  auto parsed = (*client)->canonicalize(source, false);
  double parse_print_ms = ms_since(t);
  std::vector<double> alias_ms;
  for (int i = 0; i < 5; ++i) {
    t = Clock::now();
    auto again = kiln::compute_cache_key(**client, source, {}, *store);
    alias_ms.push_back(ms_since(t));
    if (!again.ok() || !first.ok() || again->key != first->key)
      std::fprintf(stderr, "key mismatch\n");
  }
  std::printf("\ncache key of a %.1f MB module\n", mb);
  std::printf("  canonicalising path (text scan, hash, alias write):  %8.1f ms  %7.1f MB/s\n",
              canonical_ms, mb / (canonical_ms / 1000));
  std::printf("  parsing the module with MLIR (the anchor):             %8.1f ms  %7.1f MB/s\n",
              parsed->parse_ms, mb / (parsed->parse_ms / 1000));
  std::printf("  MLIR's canonical form (bytecode input): %.1f ms = parse %.1f + bytecode %.1f\n",
              parse_print_ms, parsed->parse_ms, parse_print_ms - parsed->parse_ms);
  std::printf("  raw bytes seen before (alias), median of 5:           %8.1f ms  %7.1f MB/s\n",
              median(alias_ms), mb / (median(alias_ms) / 1000));
  std::filesystem::remove_all(dir);
  return 0;
}
