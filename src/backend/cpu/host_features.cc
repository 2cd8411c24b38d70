#include "backend/cpu/host_features.h"

#include <cpuid.h>

#include <cstdint>
#include <sstream>

namespace kiln::cpu {
namespace {

struct FeatureBit {
  const char* name;
  unsigned leaf;
  unsigned subleaf;
  int reg;  // 0 eax, 1 ebx, 2 ecx, 3 edx
  int bit;
  int needs;  // 0 none, 1 AVX state, 2 AVX-512 state, 3 AMX state
};

// LLVM's names for the features whose absence would make generated code fault.
constexpr FeatureBit kFeatures[] = {
    {"sse3", 1, 0, 2, 0, 0},
    {"pclmul", 1, 0, 2, 1, 0},
    {"ssse3", 1, 0, 2, 9, 0},
    {"fma", 1, 0, 2, 12, 1},
    {"cx16", 1, 0, 2, 13, 0},
    {"sse4.1", 1, 0, 2, 19, 0},
    {"sse4.2", 1, 0, 2, 20, 0},
    {"movbe", 1, 0, 2, 22, 0},
    {"popcnt", 1, 0, 2, 23, 0},
    {"aes", 1, 0, 2, 25, 0},
    {"avx", 1, 0, 2, 28, 1},
    {"f16c", 1, 0, 2, 29, 1},
    {"rdrnd", 1, 0, 2, 30, 0},
    {"sse2", 1, 0, 3, 26, 0},
    {"bmi", 7, 0, 1, 3, 0},
    {"avx2", 7, 0, 1, 5, 1},
    {"bmi2", 7, 0, 1, 8, 0},
    {"avx512f", 7, 0, 1, 16, 2},
    {"avx512dq", 7, 0, 1, 17, 2},
    {"rdseed", 7, 0, 1, 18, 0},
    {"adx", 7, 0, 1, 19, 0},
    {"avx512ifma", 7, 0, 1, 21, 2},
    {"avx512cd", 7, 0, 1, 28, 2},
    {"sha", 7, 0, 1, 29, 0},
    {"avx512bw", 7, 0, 1, 30, 2},
    {"avx512vl", 7, 0, 1, 31, 2},
    {"avx512vbmi", 7, 0, 2, 1, 2},
    {"avx512vbmi2", 7, 0, 2, 6, 2},
    {"gfni", 7, 0, 2, 8, 0},
    {"vaes", 7, 0, 2, 9, 1},
    {"vpclmulqdq", 7, 0, 2, 10, 1},
    {"avx512vnni", 7, 0, 2, 11, 2},
    {"avx512bitalg", 7, 0, 2, 12, 2},
    {"avx512vpopcntdq", 7, 0, 2, 14, 2},
    {"avx512fp16", 7, 0, 3, 23, 2},
    {"amx-bf16", 7, 0, 3, 22, 3},
    {"amx-tile", 7, 0, 3, 24, 3},
    {"amx-int8", 7, 0, 3, 25, 3},
    {"avxvnni", 7, 1, 0, 4, 1},
    {"avx512bf16", 7, 1, 0, 5, 2},
    {"lzcnt", 0x80000001, 0, 2, 5, 0},
};

uint64_t enabled_state() {
  unsigned a, b, c, d;
  __cpuid(1, a, b, c, d);
  if (!(c & (1u << 27))) return 0;  // no OSXSAVE: no extended state at all
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

}  // namespace

const std::set<std::string>& checkable_features() {
  static const std::set<std::string> names = [] {
    std::set<std::string> s;
    for (const FeatureBit& f : kFeatures) s.insert(f.name);
    return s;
  }();
  return names;
}

const std::set<std::string>& host_features() {
  static const std::set<std::string> features = [] {
    std::set<std::string> s;
    uint64_t xcr0 = enabled_state();
    bool avx_state = (xcr0 & 0x6) == 0x6;
    bool avx512_state = avx_state && (xcr0 & 0xe0) == 0xe0;
    bool amx_state = (xcr0 & 0x60000) == 0x60000;
    unsigned max_leaf = __get_cpuid_max(0, nullptr);
    unsigned max_ext = __get_cpuid_max(0x80000000, nullptr);
    for (const FeatureBit& f : kFeatures) {
      if ((f.leaf < 0x80000000 && f.leaf > max_leaf) || (f.leaf >= 0x80000000 && f.leaf > max_ext))
        continue;
      unsigned r[4] = {0, 0, 0, 0};
      __cpuid_count(f.leaf, f.subleaf, r[0], r[1], r[2], r[3]);
      if (!(r[f.reg] & (1u << f.bit))) continue;
      if ((f.needs == 1 && !avx_state) || (f.needs == 2 && !avx512_state) ||
          (f.needs == 3 && !amx_state))
        continue;
      s.insert(f.name);
    }
    return s;
  }();
  return features;
}

std::vector<std::string> missing_features(const std::string& llvm_feature_string) {
  std::vector<std::string> missing;
  std::stringstream list(llvm_feature_string);
  for (std::string item; std::getline(list, item, ',');) {
    if (item.size() < 2 || item[0] != '+') continue;
    std::string name = item.substr(1);
    if (checkable_features().count(name) && !host_features().count(name)) missing.push_back(name);
  }
  return missing;
}

}  // namespace kiln::cpu
