// Test helper for the multi-process cache tests.
//   cache_worker stress DIR SEED OPS MAX_BYTES  mixed get/put on a bounded store; exits 1 on any
//                                               error or on a read that returns a damaged entry
//   cache_worker write DIR SEED                 writes entries forever (the parent kills it)
//   cache_worker put DIR KEY                    stores one entry under KEY (named after it)
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "kiln/cache.h"

namespace {

std::string payload(std::mt19937& rng) {
  std::string p(1000 + rng() % 20000, '\0');
  for (char& c : p) c = static_cast<char>(rng());
  return p;
}

kiln::CacheEntryMetadata metadata(const std::string& name) {
  kiln::CacheEntryMetadata m;
  m.key = name;
  m.module_name = name;
  m.producer_version = "worker";
  m.compile_time_ms = 1;
  return m;
}

}  // namespace

// "<prefix><n>", appended rather than concatenated (GCC 12 warns falsely on "literal" + string).
std::string numbered_key(char prefix, unsigned n) {
  std::string key(1, prefix);
  key += std::to_string(n);
  return key;
}

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  std::string mode = argv[1], dir = argv[2];
  std::mt19937 rng(static_cast<uint32_t>(std::atoi(argv[3])));
  int64_t max_bytes = argc > 5 ? std::atoll(argv[5]) : -1;
  auto store = kiln::DirectoryStore::open({dir, max_bytes, -1, nullptr});
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().to_string().c_str());
    return 1;
  }
  if (mode == "put") {
    std::string key = argv[3];
    kiln::Status s = (*store)->put(key, kiln::encode_cache_entry(metadata(key), payload(rng)));
    if (!s.ok()) std::fprintf(stderr, "put %s: %s\n", key.c_str(), s.to_string().c_str());
    return s.ok() ? 0 : 1;
  }
  if (mode == "write") {
    for (int i = 0;; ++i) {
      std::string key = numbered_key('w', rng() % 50);
      std::string entry = kiln::encode_cache_entry(metadata(key), payload(rng));
      (void)(*store)->put(key, entry);
      if (i % 7 == 0) (void)(*store)->remove(key);
    }
  }
  int ops = std::atoi(argv[4]);
  for (int i = 0; i < ops; ++i) {
    std::string key = numbered_key('k', rng() % 40);
    if (rng() % 2) {
      kiln::Status s = (*store)->put(key, kiln::encode_cache_entry(metadata(key), payload(rng)));
      if (!s.ok()) {
        std::fprintf(stderr, "put %s: %s\n", key.c_str(), s.to_string().c_str());
        return 1;
      }
    } else {
      auto got = (*store)->get(key);
      if (!got.ok()) {
        std::fprintf(stderr, "get %s: %s\n", key.c_str(), got.status().to_string().c_str());
        return 1;
      }
      if (got->has_value()) {
        auto decoded = kiln::decode_cache_entry(**got, key);
        if (!decoded.ok() || decoded->metadata.module_name != key) {
          std::fprintf(stderr, "damaged read of %s\n", key.c_str());
          return 1;
        }
      }
    }
  }
  return 0;
}
